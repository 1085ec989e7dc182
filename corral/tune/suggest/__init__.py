"""Ray Tune 1.13's search algorithms (``ray.tune.suggest``), so that
``from ray.tune.suggest import ConcurrencyLimiter`` ports as
``from corral.tune.suggest import ConcurrencyLimiter``.

``tune.run(search_alg=...)`` takes a ``SearchAlgorithm`` (``BasicVariantGenerator``, the
default: grid search and search-space draws), a ``Searcher`` (suggests each trial's config
and learns from the results; wrapped in a ``SearchGenerator``), or a name of
``SEARCH_ALG_IMPORT``. ``ConcurrencyLimiter`` and ``Repeater`` wrap a ``Searcher``.
``OptunaSearch`` (``corral.tune.suggest.optuna``, the ``optuna`` extra) and
``HyperOptSearch`` (``corral.tune.suggest.hyperopt``, the ``hyperopt`` extra),
``SkOptSearch`` (``skopt``), ``NevergradSearch`` (``nevergrad``) and ``BayesOptSearch``
(``bayesopt``), ``ZOOptSearch`` (``zoopt``), ``BlendSearch`` and ``CFO`` (``flaml``) and
``AxSearch`` (``ax``) drive those libraries; Ray Tune's other wrappers of third-party
optimisation libraries (``TuneBOHB``, ``HEBOSearch``, ...) are not built: their modules
import and their classes raise ``NotImplementedError`` (corral/_surface/not_built.py).
"""

from __future__ import annotations

import importlib
import inspect
from typing import Any

from corral.tune.suggest.basic_variant import BasicVariantGenerator
from corral.tune.suggest.repeater import Repeater
from corral.tune.suggest.search import SearchAlgorithm
from corral.tune.suggest.search_generator import SearchGenerator
from corral.tune.suggest.suggestion import ConcurrencyLimiter, Searcher
from corral.tune.suggest.variant_generator import grid_search

# Ray Tune's names of its search algorithms -> "module:Class" under corral.tune.suggest.
SEARCH_ALG_IMPORT: dict[str, str] = {
    "variant_generator": "basic_variant:BasicVariantGenerator",
    "random": "basic_variant:BasicVariantGenerator",
    "ax": "ax:AxSearch",
    "dragonfly": "dragonfly:DragonflySearch",
    "skopt": "skopt:SkOptSearch",
    "hyperopt": "hyperopt:HyperOptSearch",
    "bayesopt": "bayesopt:BayesOptSearch",
    "bohb": "bohb:TuneBOHB",
    "nevergrad": "nevergrad:NevergradSearch",
    "optuna": "optuna:OptunaSearch",
    "zoopt": "zoopt:ZOOptSearch",
    "sigopt": "sigopt:SigOptSearch",
    "hebo": "hebo:HEBOSearch",
    "blendsearch": "flaml:BlendSearch",
    "cfo": "flaml:CFO",
}


def create_searcher(search_alg: str, **kwargs: Any) -> Any:
    """The search algorithm Ray Tune calls ``search_alg`` (``"random"``, ``"hyperopt"``,
    ...; any case), built with those of ``kwargs`` its class takes.

    Raises:
        ValueError: no search algorithm has that name.
        NotImplementedError: a third-party searcher corral does not build.
    """
    key = search_alg.lower()
    if key not in SEARCH_ALG_IMPORT:
        raise ValueError(
            f"Unknown search algorithm {search_alg!r}; known: {', '.join(SEARCH_ALG_IMPORT)}"
        )
    module, _, name = SEARCH_ALG_IMPORT[key].partition(":")
    cls = getattr(importlib.import_module(f"{__name__}.{module}"), name)
    try:
        accepted = set(inspect.signature(cls).parameters)
    except (TypeError, ValueError):
        accepted = set()  # (a stand-in: it raises when called)
    return cls(**{k: v for k, v in kwargs.items() if k in accepted})


__all__ = [
    "SEARCH_ALG_IMPORT",
    "BasicVariantGenerator",
    "ConcurrencyLimiter",
    "Repeater",
    "SearchAlgorithm",
    "SearchGenerator",
    "Searcher",
    "create_searcher",
    "grid_search",
]
