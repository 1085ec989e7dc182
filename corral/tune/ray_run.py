"""`corral.tune.run` with `backend="ray"`: the trials run in parallel under Ray Tune.

corral resolves the trials itself (grid search, search-space draws, `num_samples`), so a
trial's config is the same as in-process; Ray Tune then runs them as a grid over the trial
indices, each trial with its own `default_resource_request` placement group, wherever the
cluster has room. Their results, checkpoints and statuses are read back into corral's
`Trial`s, so `run` returns the same `ExperimentAnalysis` either way.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any

from corral.tune.logger import read_json_results
from corral.tune.ray_adapter import as_ray_trainable
from corral.tune.result import EXPR_RESULT_FILE, TRAINING_ITERATION
from corral.tune.stopping import StopFn
from corral.tune.trial_runner import TrialLoop

# The one config key Ray Tune sees: which of corral's trials a Ray trial runs.
TRIAL_INDEX = "corral_trial_index"


def run_trials_on_ray(
    trainable_cls: type[Any],
    trials: list[Any],
    *,
    experiment_root: str,
    name: str,
    loop: TrialLoop,
    stop_all: Callable[[], bool] | None = None,
    resources: Any = None,
    fail_fast: bool | str = False,
    raise_on_failed_trial: bool = True,
) -> None:
    """Runs `trials` on Ray Tune (connecting with `ray.init()` when needed) and fills
    each trial's results, checkpoints, status and logdir in place.

    `loop` says how, as for local trials: its stop rule (corral's, handed to Ray as a
    function, so both paths stop alike), restore, checkpoint frequency and keeping.
    `stop_all` (a `tune.run(stop=Stopper)`'s) goes to Ray Tune with it, as one Ray
    `Stopper`. `tune.run` refuses callbacks on this path (Ray Tune runs the trials and
    calls its own callbacks).
    `resources` (`tune.run(resources_per_trial=...)`), when given, is every trial's
    placement group instead of the trainable's `default_resource_request`. `loop`'s
    `max_failures`, `fail_fast` and `raise_on_failed_trial` go to Ray Tune as they are.
    """
    import ray
    from ray import tune

    if not ray.is_initialized():
        ray.init()
    configs = [trial.config for trial in trials]
    base = as_ray_trainable(trainable_cls)

    class IndexedTrainable(base):  # type: ignore[misc, valid-type]
        def setup(self, config: dict) -> None:
            super().setup(configs[config[TRIAL_INDEX]])
            if loop.restore:
                self.trainer.restore(loop.restore)

        @classmethod
        def default_resource_request(cls, config: dict) -> Any:
            if resources is not None:
                return resources
            return trainable_cls.default_resource_request(configs[config[TRIAL_INDEX]])

    IndexedTrainable.__name__ = IndexedTrainable.__qualname__ = base.__name__
    keeper = loop.keeper
    checkpoint_config = tune.CheckpointConfig(
        num_to_keep=keeper.num,
        checkpoint_score_attribute=keeper.score_attr,
        checkpoint_score_order="min" if keeper.minimise else "max",
        checkpoint_frequency=loop.checkpoint_freq,
        checkpoint_at_end=loop.checkpoint_at_end,
    )
    analysis = tune.run(
        IndexedTrainable,
        name=name,
        config={TRIAL_INDEX: tune.grid_search(list(range(len(trials))))},
        stop=_ray_stop(loop.should_stop, stop_all),
        checkpoint_config=checkpoint_config,
        storage_path=os.path.abspath(experiment_root),
        verbose=min(int(loop.verbose), 1),
        max_failures=loop.max_failures,
        fail_fast=fail_fast,
        raise_on_failed_trial=raise_on_failed_trial,
    )
    for ray_trial in analysis.trials:
        _read_back(trials[ray_trial.config[TRIAL_INDEX]], ray_trial)


def _ray_stop(should_stop: StopFn, stop_all: Callable[[], bool] | None = None) -> Any:
    # corral's stop rule is `stop(trial_id, result)`, as Ray's stop functions are; Ray wants
    # a plain bool back. With a `stop_all`, a Ray `Stopper` asks both.
    def per_trial(trial_id: str, result: Mapping) -> bool:
        return bool(should_stop(trial_id, dict(result)))

    if stop_all is None:
        return per_trial
    from ray import tune

    ends_all = stop_all

    class CorralStopper(tune.Stopper):  # type: ignore[misc]
        def __call__(self, trial_id: str, result: dict) -> bool:
            return per_trial(trial_id, result)

        def stop_all(self) -> bool:
            return bool(ends_all())

    return CorralStopper()


def _read_back(trial: Any, ray_trial: Any) -> None:
    """Results, status, logdir and checkpoints of a finished Ray trial, into `trial`."""
    # The trial's folder in the storage path (results, checkpoints); with remote
    # storage, its staging copy on the driver.
    logdir = ray_trial.path if os.path.isdir(ray_trial.path or "") else ray_trial.local_path
    trial.logdir = logdir
    trial.status = ray_trial.status
    by_iteration: dict[int, dict] = {}
    results_file = os.path.join(logdir, EXPR_RESULT_FILE)
    if os.path.isfile(results_file):
        for result in read_json_results(results_file):
            trial.update_last_result(result)
            by_iteration[result.get(TRAINING_ITERATION, 0)] = result
    checkpoints = []
    for entry in sorted(os.listdir(logdir)):
        path = os.path.join(logdir, entry)
        if entry.startswith("checkpoint_") and os.path.isdir(path):
            iteration = _checkpoint_iteration(path)
            result = {} if iteration is None else by_iteration.get(iteration, {})
            checkpoints.append((path, result))
    trial.checkpoints = checkpoints
    latest = ray_trial.checkpoint
    trial.checkpoint = latest.path if latest is not None else None


def _checkpoint_iteration(path: str) -> int | None:
    from corral.tune.trainable import CHECKPOINT_METADATA_FILE
    from corral.utils.checkpoints import read_json
    from corral.utils.error import CheckpointError

    try:
        return int(
            read_json(os.path.join(path, CHECKPOINT_METADATA_FILE), "checkpoint metadata")[
                "iteration"
            ]
        )
    except (CheckpointError, OSError, ValueError, KeyError, TypeError):
        return None
