"""Ray Tune 1.13's ``ray.tune.suggest.zoopt``: ``ZOOptSearch``, suggestions from
`ZOOpt <https://github.com/polixir/ZOOpt>`_'s sequential RAndomized COordinate Shrinking
(``SRacosTune``: derivative-free, classification-based; the ``zoopt`` extra: ``pip install
'corral[zoopt]'``)."""

from __future__ import annotations

import contextlib
import importlib
import inspect
import math
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from corral.tune.search import Choice, Domain, RandInt, Uniform
from corral.tune.suggest.ask_tell import AskTellSearcher
from corral.tune.suggest.library_searcher import import_library
from corral.tune.suggest.suggestion import Searcher

# The precision of a converted uniform's values (Ray Tune's): ZOOpt rounds them to it.
FLOAT_PRECISION = 1e-12
# zoopt.Parameter's arguments that ZOOptSearch sets itself (or that SRacosTune needs).
_OWN_PARAMETER_ARGS = frozenset(
    {"budget", "init_samples", "parallel", "server_num", "algorithm", "sequential", "autoset"}
)


class ZOOptSearch(AskTellSearcher):
    """Suggests each trial's config with ZOOpt's ``SRacosTune`` and tells it each trial's
    loss (the metric, negated for ``mode="max"``).

    Args:
        algo: "asracos" or "sracos" (any case; both are ``SRacosTune``, as in Ray Tune).
        budget: the number of trials the search is planned for (an int >= 3; ZOOpt sizes
            its first, random, batch by it: 4 trials up to 50, 6 up to 100, 12 up to
            1000, else 22). Set ``tune.run``'s ``num_samples`` to it.
        dim_dict: the search space: corral search spaces (``{"x": tune.uniform(-1, 1)}``,
            converted by ``convert_search_space``) or ZOOpt dimensions by name:
            ``(ValueType.CONTINUOUS, [low, high], precision)``, ``(ValueType.DISCRETE,
            [low, high], has_order)`` (both bounds included) or ``(ValueType.GRID,
            [values])``. None: ``tune.run``'s config is the search space.
        metric: the result key to optimise (or ``tune.run(metric=...)``; default
            ``"_metric"``).
        mode: "min" or "max" (or ``tune.run(mode=...)``).
        points_to_evaluate: configs to run first, in order (part of the first batch);
            each gives a value for every parameter.
        parallel_num: how many trials it suggests at once after the first batch (whose
            trials are all suggested at once, and must all end before the next
            suggestion).
        **kwargs: ``seed`` (the seed of ZOOpt's random draws, kept apart from numpy's
            global ones), other ``zoopt.Parameter`` options (``exploration_rate``,
            ``uncertain_bits``, ...), and Ray Tune's old ``max_concurrent`` (refused:
            ``ConcurrencyLimiter``) and ``use_early_stopped_trials`` (False refused).

    Choices are searched by index (``ValueType.GRID``), randints as ``ValueType.DISCRETE``
    with order; a loguniform is refused (ZOOpt has no log scale: search its exponent
    with ``tune.uniform``). A trial that errors, ends without a result, or whose metric
    is not a finite number is told as the worst loss (``inf``: ZOOpt waits for every
    trial of its first batch). The search is finished when ZOOpt cannot draw a config
    it has not tried (a small discrete space fully tried).

    Its state for ``tune.run(resume=...)`` is JSON: every point's parameters and loss,
    in order, told again to a fresh ``SRacosTune`` on restore (whose random draws start
    from a seed derived from ``seed`` and the number of points replayed).
    """

    _point_choices_as_indices = True
    _suggests_choice_indices = True

    def __init__(
        self,
        algo: str = "asracos",
        budget: int | None = None,
        dim_dict: Mapping[str, Any] | None = None,
        metric: str | None = None,
        mode: str | None = None,
        points_to_evaluate: Sequence[Mapping] | None = None,
        parallel_num: int = 1,
        **kwargs: Any,
    ) -> None:
        self._zoopt = import_library("zoopt", "ZOOptSearch")
        max_concurrent = kwargs.pop("max_concurrent", None)
        use_early_stopped_trials = kwargs.pop("use_early_stopped_trials", None)
        seed = kwargs.pop("seed", None)
        super().__init__(metric, mode, points_to_evaluate, max_concurrent, use_early_stopped_trials)
        if not isinstance(algo, str) or algo.lower() not in ("asracos", "sracos"):
            raise ValueError(f"ZOOptSearch(algo=...) must be 'asracos' or 'sracos', got {algo!r}")
        if isinstance(budget, bool) or not isinstance(budget, int) or budget < 3:
            raise ValueError(
                "ZOOptSearch(budget=...) must be an int >= 3 (the number of trials planned: "
                f"tune.run's num_samples), got {budget!r}"
            )
        if isinstance(parallel_num, bool) or not isinstance(parallel_num, int) or parallel_num < 1:
            raise ValueError(
                f"ZOOptSearch(parallel_num=...) must be an int >= 1, got {parallel_num!r}"
            )
        if isinstance(seed, bool) or not isinstance(seed, int | type(None)):
            raise ValueError(f"ZOOptSearch(seed=...) must be an int or None, got {seed!r}")
        accepted = set(inspect.signature(self._zoopt.Parameter).parameters)
        unknown = sorted(k for k in kwargs if k not in accepted or k in _OWN_PARAMETER_ARGS)
        if unknown:
            raise TypeError(
                f"ZOOptSearch got unexpected arguments: {', '.join(unknown)} (it takes "
                "zoopt.Parameter's options but budget, init_samples, parallel, server_num, "
                "algorithm, sequential and autoset)"
            )
        self._algo = algo.lower()
        self._budget = budget
        self._parallel_num = parallel_num
        self._seed = seed
        self._parameter_kwargs = kwargs
        self._opt: Any = None
        self._rng: np.random.RandomState | None = None
        self._precisions: list[int | None] = []  # ZOOpt's module-global float precisions
        self._replayed = 0  # how many points a restore replays
        self._from_ask = False  # whether the point just suggested was ZOOpt's own
        self._take_space(dim_dict)

    # -- the search space ----------------------------------------------------

    @classmethod
    def _to_library(cls, name: str, domain: Domain) -> Any:
        value_type = import_library("zoopt", cls.__name__).ValueType
        if isinstance(domain, Choice):
            return (value_type.GRID, list(range(len(domain.categories))))
        if isinstance(domain, Uniform):
            return (value_type.CONTINUOUS, [domain.lower, domain.upper], FLOAT_PRECISION)
        if isinstance(domain, RandInt):
            return (value_type.DISCRETE, [domain.lower, domain.upper - 1], True)
        raise ValueError(
            f"ZOOptSearch cannot search {name}={domain!r} (ZOOpt has no log scale: search "
            "the exponent with tune.uniform); it searches choice, uniform and randint"
        )

    def _own_space(self, space: Any) -> Any:
        value_type = self._zoopt.ValueType
        if not isinstance(space, Mapping) or not space:
            raise TypeError(
                "ZOOptSearch(dim_dict=...) takes a dict (of ZOOpt dimensions or corral search "
                f"spaces), got {space!r}"
            )
        for key, dim in space.items():
            ok = isinstance(dim, tuple) and len(dim) in (2, 3)
            if ok and dim[0] == value_type.GRID:
                ok = isinstance(dim[1], list | tuple) and len(dim[1]) > 0
            elif ok and dim[0] in (value_type.CONTINUOUS, value_type.DISCRETE) and len(dim) == 3:
                bounds = dim[1]
                ok = (
                    isinstance(bounds, list | tuple)
                    and len(bounds) == 2
                    and all(isinstance(b, int | float) for b in bounds)
                    and bounds[0] <= bounds[1]
                )
                if dim[0] == value_type.CONTINUOUS:
                    ok = ok and isinstance(dim[2], int | float) and dim[2] > 0
            else:
                ok = False
            if not ok:
                raise TypeError(
                    "ZOOptSearch's dim_dict maps names to ZOOpt dimensions: "
                    "(ValueType.CONTINUOUS, [low, high], precision), (ValueType.DISCRETE, "
                    f"[low, high], has_order) or (ValueType.GRID, [values]), got {key}={dim!r}"
                )
        return {str(k): v for k, v in space.items()}

    def _fits_own(self, key: str, value: Any) -> bool:
        value_type = self._zoopt.ValueType
        dim = self._space[key]
        if dim[0] == value_type.GRID:
            return value in list(dim[1])
        number = isinstance(value, int | float) and not isinstance(value, bool)
        if dim[0] == value_type.DISCRETE:
            number = number and float(value).is_integer()
        return number and dim[1][0] <= value <= dim[1][1]

    def _param_names(self) -> list[str] | None:
        return list(self._space or ())

    # -- the optimizer -------------------------------------------------------

    @contextlib.contextmanager
    def _zoopt_globals(self) -> Iterator[None]:
        """ZOOpt's module globals as this search's: its float precisions and numpy's
        global random state (ZOOpt draws from it), put back afterwards."""
        assert self._rng is not None
        zoo_global = importlib.import_module("zoopt.utils.zoo_global").gl
        saved_precisions, saved_state = zoo_global.float_precisions, np.random.get_state()
        zoo_global.float_precisions = list(self._precisions)
        np.random.set_state(self._rng.get_state())
        try:
            yield
        finally:
            self._rng.set_state(np.random.get_state())
            np.random.set_state(saved_state)
            zoo_global.float_precisions = saved_precisions

    def _start(self) -> None:
        from zoopt.algos.opt_algorithms.racos.sracos import SRacosTune

        seed = self._seed
        if seed is not None and self._replayed:
            # (Restored: not the first draws again, which would repeat the first trials.)
            seed = int(np.random.SeedSequence([seed, self._replayed]).generate_state(1)[0])
        self._rng = np.random.RandomState(seed)
        zoo_global = importlib.import_module("zoopt.utils.zoo_global").gl
        saved = zoo_global.float_precisions
        try:
            dimension = self._zoopt.Dimension2(list(self._space.values()))
            self._precisions = list(zoo_global.float_precisions)
        finally:
            zoo_global.float_precisions = saved
        parameter = self._zoopt.Parameter(budget=self._budget, **self._parameter_kwargs)
        self._opt = SRacosTune(dimension, parameter, parallel_num=self._parallel_num)

    def set_state(self, state: dict) -> None:
        """As ``AskTellSearcher.set_state``; the restored optimizer's draws start from a
        seed derived from ``seed`` and the number of points replayed."""
        trials = state.get("trials") if isinstance(state, Mapping) else None
        self._replayed = len(trials) if isinstance(trials, list) else 0
        super().set_state(state)

    def _train_size(self) -> int:
        return int(self._opt.get_parameters().get_train_size())

    def _ask(self) -> tuple[dict[str, Any], Any] | str | None:
        asked = len(self._records)
        ended = sum(not r["live"] for r in self._records)
        train_size = self._train_size()
        with self._zoopt_globals():
            if asked < train_size:
                # The first batch: random draws, all suggested at once.
                solution, distinct = self._opt.tune_init_attribute()
            elif ended < train_size or asked - ended >= self._parallel_num:
                return None  # (the first batch ends before the classifier's first draw)
            else:
                solution, distinct = self._opt.sample_solution(self._opt.ub)
        if solution is None or not distinct:
            return Searcher.FINISHED  # (no config left that it has not tried)
        self._from_ask = True
        return dict(zip(self._space, solution.get_x())), solution

    def _handle_of(self, params: dict[str, Any]) -> Any:
        value_type = self._zoopt.ValueType
        x = []
        for key, dim in self._space.items():
            value = params[key]
            if dim[0] == value_type.CONTINUOUS:
                value = np.float64(value)
            elif dim[0] == value_type.GRID:
                # (As ZOOpt draws it: an element of the numpy array of the values.)
                options = np.array(dim[1])
                value = options[[i for i, o in enumerate(dim[1]) if o == value][0]]
            else:
                value = int(value)
            x.append(value)
        return self._opt.get_objective().construct_solution(x)

    def _asked(self, params: dict[str, Any]) -> None:
        if self._from_ask:
            self._from_ask = False
            return
        # A point it did not draw (of points_to_evaluate, or restored): the first batch
        # draws others than it.
        if len(self._opt._init_data) < self._train_size():
            self._opt._init_data.append(self._handle_of(params))

    def _tell(self, params: dict[str, Any], handle: Any, loss: float) -> None:
        with self._zoopt_globals():
            self._opt.complete(handle, loss)

    def _failed(self, params: dict[str, Any], handle: Any) -> None:
        # The worst loss: ZOOpt waits for every trial of its first batch.
        self._tell(params, handle, math.inf)


__all__ = ["ZOOptSearch"]
