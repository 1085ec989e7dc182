"""Ray Tune 1.13's trial schedulers for ``tune.run(scheduler=...)``, so that
``from ray.tune.schedulers import ASHAScheduler`` ports as
``from corral.tune.schedulers import ASHAScheduler``.

Built: ``FIFOScheduler`` (the default), ``AsyncHyperBandScheduler`` /
``ASHAScheduler``, ``HyperBandScheduler`` (synchronous HyperBand), ``MedianStoppingRule``
and ``PopulationBasedTraining`` (also ``synch=True``). Ray Tune's others import and raise
``NotImplementedError`` naming them when built (``HyperBandForBOHB`` serves only
``TuneBOHB``, which is not built either).
"""

from __future__ import annotations

from typing import Any

from corral.tune.schedulers.async_hyperband import ASHAScheduler, AsyncHyperBandScheduler
from corral.tune.schedulers.hyperband import HyperBandScheduler
from corral.tune.schedulers.median_stopping_rule import MedianStoppingRule
from corral.tune.schedulers.pbt import PopulationBasedTraining
from corral.tune.schedulers.trial_scheduler import FIFOScheduler, TrialScheduler


def _not_built(name: str, what: str) -> type:
    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        raise NotImplementedError(
            f"corral.tune.schedulers.{name} ({what}) is not built; built here: "
            "FIFOScheduler, ASHAScheduler (AsyncHyperBandScheduler), HyperBandScheduler, "
            "MedianStoppingRule, PopulationBasedTraining. With the `ray` extra, ray.tune.run "
            "takes corral's Trainers with all of Ray Tune's schedulers."
        )

    return type(name, (TrialScheduler,), {"__init__": __init__, "__doc__": f"Not built: {what}."})


HyperBandForBOHB = _not_built(
    "HyperBandForBOHB", "HyperBand for BOHB's searcher, TuneBOHB, which is not built"
)
PB2 = _not_built("PB2", "population-based bandits")
PopulationBasedTrainingReplay = _not_built(
    "PopulationBasedTrainingReplay", "replaying a PBT run's schedule"
)
ResourceChangingScheduler = _not_built("ResourceChangingScheduler", "changing trials' resources")

# Ray Tune's short names of its schedulers.
SCHEDULER_IMPORT: dict[str, type] = {
    "fifo": FIFOScheduler,
    "async_hyperband": AsyncHyperBandScheduler,
    "asha": ASHAScheduler,
    "median_stopping_rule": MedianStoppingRule,
    "hyperband": HyperBandScheduler,
    "hb_bohb": HyperBandForBOHB,
    "pbt": PopulationBasedTraining,
    "pbt_replay": PopulationBasedTrainingReplay,
    "pb2": PB2,
    "resource_changing": ResourceChangingScheduler,
}


def create_scheduler(scheduler: str, **kwargs: Any) -> TrialScheduler:
    """The scheduler Ray Tune calls ``scheduler`` (``"asha"``, ``"pbt"``, ...; any case,
    so ``rllib train``'s ``--scheduler FIFO`` too), built with ``kwargs``.

    Raises:
        ValueError: no scheduler has that name.
    """
    if scheduler.lower() not in SCHEDULER_IMPORT:
        raise ValueError(f"Unknown scheduler {scheduler!r}; known: {', '.join(SCHEDULER_IMPORT)}")
    return SCHEDULER_IMPORT[scheduler.lower()](**kwargs)


__all__ = [
    "PB2",
    "ASHAScheduler",
    "AsyncHyperBandScheduler",
    "FIFOScheduler",
    "HyperBandForBOHB",
    "HyperBandScheduler",
    "MedianStoppingRule",
    "PopulationBasedTraining",
    "PopulationBasedTrainingReplay",
    "ResourceChangingScheduler",
    "SCHEDULER_IMPORT",
    "TrialScheduler",
    "create_scheduler",
]
