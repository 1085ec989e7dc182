"""Ray Tune 1.13's ``ray.tune.suggest.flaml``: ``BlendSearch`` and ``CFO``, suggestions from
`FLAML <https://microsoft.github.io/FLAML>`_'s searchers (cost-frugal local search, blended
with Optuna's global search in ``BlendSearch``; the ``flaml`` extra: ``pip install
'corral[flaml]'``).

Ray Tune 1.13 exported FLAML's own classes; corral's wrap them (a FLAML searcher is Ray
Tune's, not corral's, ``Searcher``): they take FLAML's arguments, convert corral's search
spaces to FLAML's, give FLAML each trial's config with its result, and keep their state
for ``tune.run(resume=...)`` as JSON.
"""

from __future__ import annotations

import copy
import inspect
import warnings
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any

import numpy as np

from corral.tune.search import (
    Choice,
    Domain,
    LogRandInt,
    LogUniform,
    Normal,
    Quantized,
    RandInt,
    Uniform,
    has_domains,
)
from corral.tune.suggest.library_searcher import (
    RecordingSearcher,
    coded_categories,
    flat_point,
    import_library,
    plain,
)
from corral.tune.suggest.variant_generator import unflatten_dict

# How often a suggestion FLAML skips (a config it tried, a finished local search) is
# asked again at once (Ray Tune asks again at its next step; corral's runner ends a run
# when nothing runs and no trial comes).
_RETRIES = 20


def _import_flaml(searcher: str) -> ModuleType:
    with warnings.catch_warnings():
        # ("flaml.automl is not available": the tuner needs none of it.)
        warnings.simplefilter("ignore", UserWarning)
        return import_library("flaml", searcher)


class _FlamlSearcher(RecordingSearcher):
    """A FLAML searcher (``_flaml_class``) as a corral ``Searcher``.

    Args:
        metric: the result key to optimise (or ``tune.run(metric=...)``; default
            ``"_metric"``).
        mode: "min" or "max" (or ``tune.run(mode=...)``).
        space: the search space: corral search spaces (``{"lr": tune.loguniform(1e-4,
            1e-2)}``, converted by ``convert_search_space``) or FLAML's own
            (``flaml.tune.uniform(...)``, ..., with constants). None: ``tune.run``'s
            config is the search space.
        points_to_evaluate: configs to run first, in order (FLAML starts its local
            search from the best of them); a point may leave parameters out.
        **kwargs: the FLAML class's other arguments (``low_cost_partial_config``,
            ``cat_hp_cost``, ``evaluated_rewards``, ``seed``, ``config_constraints``,
            ``metric_constraints``, ...; see FLAML's documentation), and Ray Tune's
            old ``max_concurrent`` (refused: ``ConcurrencyLimiter``) and
            ``use_early_stopped_trials`` (False refused).

    A trial that errors, ends without a result, or whose metric is not a finite number
    is told to FLAML as an error (its config is not tried again).

    Its state for ``tune.run(resume=...)`` is JSON: each trial's parameters and its
    metric. On restore a fresh FLAML searcher is given the ended trials as evaluated
    points (``points_to_evaluate`` with ``evaluated_rewards``: FLAML starts its local
    search again from the best of them, without running them again), then the points
    of ``points_to_evaluate`` not suggested yet; its random draws start from a seed
    derived from ``seed`` and the number of trials restored.
    """

    _flaml_class = ""  # the name of FLAML's class
    # (A record's outcome is its metric; a point may leave parameters out.)
    _params_may_lack = True

    def __init__(
        self,
        metric: str | None = None,
        mode: str | None = None,
        space: Mapping[str, Any] | None = None,
        points_to_evaluate: Sequence[Mapping] | None = None,
        **kwargs: Any,
    ) -> None:
        name = type(self).__name__
        self._flaml = _import_flaml(name)
        max_concurrent = kwargs.pop("max_concurrent", None)
        use_early_stopped_trials = kwargs.pop("use_early_stopped_trials", None)
        super().__init__(metric, mode, points_to_evaluate, max_concurrent, use_early_stopped_trials)
        cls = getattr(self._flaml, self._flaml_class)
        accepted = set(inspect.signature(cls.__init__).parameters) - {
            "self",
            "metric",
            "mode",
            "space",
            "points_to_evaluate",
        }
        unknown = sorted(k for k in kwargs if k not in accepted)
        if unknown:
            raise TypeError(
                f"{name} got unexpected arguments: {', '.join(unknown)} (FLAML's "
                f"{self._flaml_class} takes {', '.join(sorted(accepted))})"
            )
        rewards = kwargs.pop("evaluated_rewards", None)
        if rewards is not None and (
            not isinstance(rewards, list | tuple)
            or len(rewards) > len(self._points)
            or not all(isinstance(r, int | float) and not isinstance(r, bool) for r in rewards)
        ):
            raise ValueError(
                f"{name}(evaluated_rewards=...) takes the metric's values of the first points "
                f"of points_to_evaluate (at most {len(self._points)} numbers), got {rewards!r}"
            )
        self._evaluated_rewards = [float(r) for r in rewards or ()]
        self._flaml_kwargs = kwargs
        self._searcher: Any = None  # FLAML's searcher, made at the first suggestion
        self._take_space(space)

    # -- the search space ----------------------------------------------------

    @classmethod
    def _to_library(cls, name: str, domain: Domain) -> Any:
        ft = _import_flaml(cls.__name__).tune
        if isinstance(domain, Choice):
            coded = coded_categories(domain)
            return ft.choice(list(range(len(coded))) if coded is not None else domain.categories)
        if isinstance(domain, Uniform):
            return ft.uniform(domain.lower, domain.upper)
        if isinstance(domain, LogUniform):
            # (A log-uniform distribution is the same in any base.)
            return ft.loguniform(domain.lower, domain.upper)
        if isinstance(domain, RandInt):
            return ft.randint(domain.lower, domain.upper)
        if isinstance(domain, LogRandInt):
            return ft.lograndint(domain.lower, domain.upper)
        if isinstance(domain, Normal):
            return ft.randn(domain.mean, domain.sd)
        if isinstance(domain, Quantized):
            # (FLAML's quantised spaces are Ray Tune's: the upper bound included.)
            inner, q, low, high = domain.domain, domain.q, domain.qlower, domain.qupper
            if isinstance(inner, Uniform):
                return ft.quniform(low, high, q)
            if isinstance(inner, LogUniform):
                return ft.qloguniform(low, high, q)
            if isinstance(inner, RandInt):
                return ft.qrandint(int(low), int(high), int(q))
            if isinstance(inner, LogRandInt):
                return ft.qlograndint(int(low), int(high), int(q))
            return ft.qrandn(inner.mean, inner.sd, q)
        raise ValueError(f"{cls.__name__} cannot search {name}={domain!r}")

    def _own_space(self, space: Any) -> Any:
        if not isinstance(space, Mapping) or not space or has_domains(space):
            raise TypeError(
                f"{type(self).__name__}(space=...) takes a dict (of corral search spaces, or of "
                f"FLAML's: flaml.tune.uniform(...), ...), got {space!r}"
            )
        return dict(space)

    def _param_names(self) -> list[str] | None:
        return list(self._space or ()) if self._domains else None

    def _flaml_space(self) -> dict:
        """The space FLAML searches (nested as the config is)."""
        if self._domains:
            return unflatten_dict(dict(self._space))
        return copy.copy(self._space)

    # -- FLAML's searcher ------------------------------------------------------

    def _ready(self) -> Any:
        if self._searcher is None:
            self._check_ready(RuntimeError)
            self._searcher = self._make_searcher()
        return self._searcher

    def _make_searcher(self) -> Any:
        """A fresh FLAML searcher, given the ended trials as evaluated points, then the
        points not suggested yet."""
        ended = [r for r in self._records if not r["live"] and r["value"] is not None]
        told = [unflatten_dict(dict(r["params"])) for r in ended]
        rewards = [r["value"] for r in ended]
        remaining = list(range(self._points_used, len(self._points)))
        # (Points with evaluated_rewards, not suggested yet: told, not run.)
        told += [self._library_point(self._points[i]) for i in remaining[: self._rewards_left()]]
        rewards += self._evaluated_rewards[self._points_used :]
        points = told + [
            self._library_point(self._points[i]) for i in remaining[self._rewards_left() :]
        ]
        kwargs = dict(self._flaml_kwargs)
        if self._records:
            # (Restored: not the first draws again, which would repeat the first trials.)
            seed = kwargs.get("seed", self._default_seed())
            if isinstance(seed, int):
                kwargs["seed"] = int(
                    np.random.SeedSequence([seed, len(self._records)]).generate_state(1)[0]
                )
        cls = getattr(self._flaml, self._flaml_class)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)
            return cls(
                metric=self._metric,
                mode=self._mode,
                space=self._flaml_space(),
                points_to_evaluate=points or None,
                evaluated_rewards=rewards or None,
                **kwargs,
            )

    def _default_seed(self) -> Any:
        cls = getattr(self._flaml, self._flaml_class)
        parameter = inspect.signature(cls.__init__).parameters.get("seed")
        return None if parameter is None else parameter.default

    def _rewards_left(self) -> int:
        return max(len(self._evaluated_rewards) - self._points_used, 0)

    def _library_point(self, point: Mapping) -> dict:
        """A point of ``points_to_evaluate`` as FLAML takes it (nested, coded choices as
        their index)."""
        if not self._domains:
            return dict(point)
        return unflatten_dict(self._encoded_point(point))

    # -- suggestions and results ---------------------------------------------

    def suggest(self, trial_id: str) -> dict | None:
        searcher = self._ready()
        config = None
        for _ in range(_RETRIES):
            config = searcher.suggest(trial_id)
            if config is not None:
                break
        if config is None:
            return None
        params = plain(flat_point(config, self._param_names() or ()))
        self._record(trial_id, params)
        if not self._domains:
            return plain(config)
        return self._suggestion(params)

    def _flaml_result(self, record: Mapping, result: Mapping) -> dict:
        """``result`` as FLAML reads it: with the trial's config (FLAML's values)."""
        return {**result, "config": unflatten_dict(dict(record["params"]))}

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        record = self._by_id.get(trial_id)
        if record is None or self._searcher is None:
            return
        self._searcher.on_trial_result(trial_id, self._flaml_result(record, result))

    def _ended(self, trial_id: str, record: dict[str, Any], result: dict | None) -> None:
        """Gives FLAML the trial's last result (with its config); a failed trial is told
        as an error."""
        searcher = self._ready()
        if record["value"] is None:
            searcher.on_trial_complete(trial_id, None, error=True)
        else:
            assert result is not None
            searcher.on_trial_complete(trial_id, self._flaml_result(record, result))

    # -- state (JSON) ----------------------------------------------------------

    def get_state(self) -> dict:
        """Every trial suggested, in order (its trial id, parameters, metric and whether
        it runs), and how many of ``points_to_evaluate`` FLAML took."""
        # (FLAML suggests its points first, in order: those told are not suggested.)
        return self._records_state(
            min(len(self._points), len(self._evaluated_rewards) + len(self._records))
        )

    def set_state(self, state: dict) -> None:
        """Takes the trials of a ``get_state``; the next suggestion comes from a fresh FLAML
        searcher given the ended ones as evaluated points.

        Raises:
            ValueError: ``state`` is not one ``get_state`` wrote for this search space.
        """
        records = self._restored_records(state)
        self._records, self._by_id = [], {}
        for record in records:
            self._keep(record)
        self._searcher = None


class BlendSearch(_FlamlSearcher):
    __doc__ = (
        "FLAML's ``BlendSearch``: local searches (CFO's) blended with a global search "
        "(Optuna's TPE by default, ``global_search_alg``), which starts new local "
        "searches from promising regions.\n" + (_FlamlSearcher.__doc__ or "").split("\n", 1)[1]
    )
    _flaml_class = "BlendSearch"


class CFO(_FlamlSearcher):
    __doc__ = (
        "FLAML's ``CFO`` (cost-frugal optimisation): a randomised local search that starts "
        "from a low-cost config (``low_cost_partial_config``) and moves towards costlier "
        "ones only when they pay.\n" + (_FlamlSearcher.__doc__ or "").split("\n", 1)[1]
    )
    _flaml_class = "CFO"


__all__ = ["BlendSearch", "CFO"]
