"""``LibrarySearcher``: what corral's wrappers of optimisation libraries share
(``OptunaSearch``, ``HyperOptSearch``, Ray Tune 1.13's behaviour).

A wrapper takes its search space from its own ``space`` argument (the library's own
distributions, or corral search spaces it converts) or from ``tune.run``'s config
(``set_search_properties``: the config's ``choice``, ``uniform``, ``loguniform`` and
``randint`` values, and the quantised, log-int and normal ones a library supports, become
the library's parameters, named by their path joined by "/";
the config's constants stay where they are). ``metric`` and ``mode`` come from the
wrapper or from ``tune.run`` (set each in one place); with a ``mode`` and no ``metric``
it optimises ``"_metric"``, the number a function trainable returns or reports
unnamed. ``points_to_evaluate`` are suggested first, in order.

Its state for ``tune.run(resume=...)`` is JSON: what each trial was suggested and how it
ended, which a fresh instance replays into the library on restore (the library's own
objects are never pickled). ``RecordingSearcher`` keeps that record (each trial's
parameters and outcome, in order) for the wrappers that replay it.
"""

from __future__ import annotations

import copy
import importlib
import logging
import math
from collections.abc import Collection, Mapping, Sequence
from types import ModuleType
from typing import Any

import numpy as np

from corral.tune.logger import to_jsonable
from corral.tune.search import (
    Choice,
    Domain,
    Function,
    LogRandInt,
    LogUniform,
    Normal,
    Quantized,
    RandInt,
    Uniform,
    has_domains,
)
from corral.tune.session import DEFAULT_METRIC
from corral.tune.suggest.suggestion import Searcher
from corral.tune.suggest.variant_generator import parse_spec_vars, unflatten_dict

logger = logging.getLogger(__name__)

# Values a library keeps (and JSON holds) as they are; a choice among other values is
# searched by index.
_PLAIN = (type(None), bool, int, float, str)
# (Each wrapper's `_to_library` refuses, naming it, what its library cannot search.)
_SEARCHABLE = (Choice, Uniform, LogUniform, RandInt, LogRandInt, Normal, Quantized)


def import_library(module: str, searcher: str, extra: str | None = None) -> ModuleType:
    """The optional library ``module``, of corral's extra ``extra`` (default: the
    module's name).

    Raises:
        ImportError: it is not installed (saying how to install it).
    """
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise ImportError(
            f"{searcher} needs {module}, which is not installed: pip install "
            f"'corral[{extra or module}]' ({e})"
        ) from e


def space_domains(spec: Mapping, searcher: str) -> list[tuple[str, Domain]]:
    """The search spaces of the config ``spec``, each with its name (its path joined by
    "/"), in order.

    Raises:
        ValueError: ``spec`` holds what a library cannot search: ``grid_search`` values,
            ``sample_from`` functions, search spaces inside a list, a key with "/".
    """
    resolved, domains, grids = parse_spec_vars(spec)
    if grids:
        names = ", ".join("/".join(map(str, path)) for path, _ in grids)
        raise ValueError(
            f"{searcher} cannot search grid_search values ({names}): use tune.choice([...]) "
            "for them, or the default search algorithm (BasicVariantGenerator) for a grid"
        )
    for path, value in resolved:
        if has_domains(value):
            raise ValueError(
                f"{searcher} cannot search the search spaces inside the list at "
                f"{'/'.join(map(str, path))}: give each value its own key"
            )
    out: list[tuple[str, Domain]] = []
    for path, domain in domains:
        name = "/".join(map(str, path))
        if any("/" in str(key) for key in path):
            raise ValueError(
                f"{searcher} names a parameter by its path joined by '/', so the key of "
                f"{name!r} may not hold one"
            )
        if isinstance(domain, Function):
            raise ValueError(
                f"{searcher} cannot search {name}=sample_from(...) (a function of the other "
                "values has no distribution to learn): use choice, uniform, loguniform or "
                "randint"
            )
        if not isinstance(domain, _SEARCHABLE):
            raise ValueError(f"{searcher} cannot search {name}={domain!r}")
        out.append((name, domain))
    return out


def coded_categories(domain: Domain) -> list | None:
    """A choice's categories when some are not plain values (None, bool, int, float,
    str): the library then searches their indices, which it keeps (and JSON holds) as
    they are. None for any other search space."""
    if isinstance(domain, Choice) and not all(isinstance(c, _PLAIN) for c in domain.categories):
        return domain.categories
    return None


def from_library(domain: Domain, value: Any) -> Any:
    """The config value a library's ``value`` for ``domain`` stands for: a coded
    choice's category (a copy), a uniform's or loguniform's float inside its bounds
    (floating point may step just past them), a randint's int in its range."""
    categories = coded_categories(domain)
    if categories is not None:
        return copy.deepcopy(categories[int(value)])
    if isinstance(domain, Uniform | LogUniform):
        return min(max(float(value), domain.lower), domain.upper)
    if isinstance(domain, RandInt | LogRandInt):
        return min(max(int(round(float(value))), domain.lower), domain.upper - 1)
    if isinstance(domain, Quantized):
        return domain.quantize(float(value))
    if isinstance(domain, Normal):
        return float(value)
    return plain(value)


def can_give(domain: Domain, value: Any) -> bool:
    """Whether a draw of the numeric search space ``domain`` can be ``value`` (a number
    within its bounds; an int for an int domain)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return False
    if isinstance(domain, RandInt | LogRandInt):
        return isinstance(value, int) and domain.lower <= value < domain.upper
    if isinstance(domain, Quantized):
        return (isinstance(value, int) or not domain.is_int) and (
            domain.lower <= value <= domain.upper
        )
    if isinstance(domain, Normal):
        return math.isfinite(value)
    assert isinstance(domain, Uniform | LogUniform)
    return domain.lower <= value <= domain.upper


def plain(value: Any) -> Any:
    """``value`` with numpy scalars (at any depth of dicts, lists and tuples) made
    Python's."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return {k: plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(plain(v) for v in value)
    return value


def flat_point(point: Mapping, names: Collection[str], prefix: str = "") -> dict[str, Any]:
    """``point`` (a config) flattened to paths joined by "/", down to the parameters
    ``names`` (a parameter's value stays whole, though it be a dict)."""
    out: dict[str, Any] = {}
    for key, value in point.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value and name not in names:
            out.update(flat_point(value, names, f"{name}/"))
        else:
            out[name] = value
    return out


class LibrarySearcher(Searcher):
    """The base of corral's wrappers of optimisation libraries.

    A subclass converts one corral search space (``_to_library``), checks a space of
    the library's own (``_own_space``), names its parameters (``_param_names``) and
    implements ``suggest``, ``on_trial_complete``, ``get_state`` and ``set_state``.

    Args:
        metric: the result key to optimise (or ``tune.run(metric=...)``; default
            ``"_metric"``).
        mode: "min" or "max" (or ``tune.run(mode=...)``).
        points_to_evaluate: configs to suggest first, in order (a dict each, nested as
            the config is, or keyed by parameter name).
        max_concurrent: Ray Tune's old argument, refused (``ConcurrencyLimiter``).
        use_early_stopped_trials: Ray Tune's old argument; False is refused.
    """

    # Whether a point of points_to_evaluate must give every parameter (else the library
    # draws those it lacks).
    _point_needs_every_param = False
    # Whether the library takes a point's choices as indices (else only coded ones).
    _point_choices_as_indices = False
    # Whether the library suggests every choice as an index (else only coded ones).
    _suggests_choice_indices = False

    def __init__(
        self,
        metric: str | None,
        mode: str | None,
        points_to_evaluate: Sequence[Mapping] | None,
        max_concurrent: int | None = None,
        use_early_stopped_trials: bool | None = None,
    ) -> None:
        name = type(self).__name__
        if isinstance(metric, list | tuple) or isinstance(mode, list | tuple):
            raise NotImplementedError(
                f"{name} with lists of metrics and modes (Ray Tune's multi-objective "
                "search) is not built: optimise one metric"
            )
        super().__init__(
            metric=metric,
            mode=mode,
            max_concurrent=max_concurrent,
            use_early_stopped_trials=use_early_stopped_trials,
        )
        if points_to_evaluate is not None and not isinstance(points_to_evaluate, list | tuple):
            raise TypeError(
                f"{name}(points_to_evaluate=...) takes a list of configs, got "
                f"{points_to_evaluate!r}"
            )
        for point in points_to_evaluate or ():
            if not isinstance(point, Mapping):
                raise TypeError(
                    f"{name}(points_to_evaluate=...) takes a list of configs (dicts), got "
                    f"{point!r} in it"
                )
        self._points: list[Mapping] = list(points_to_evaluate or ())
        self._points_used = 0  # how many points were suggested (or observed)
        self._space: Any = None  # the library's search space
        self._domains: dict[str, Domain] = {}  # a converted space's corral search spaces

    # -- the search space ----------------------------------------------------

    @classmethod
    def convert_search_space(cls, spec: Mapping) -> dict[str, Any]:
        """The search spaces of the config ``spec`` as the library's parameters, by name
        (path joined by "/"; constants are left out). A choice among values that are not
        all plain (None, bool, int, float, str) becomes a choice of their indices.

        Raises:
            ValueError: ``spec`` holds ``grid_search`` values, ``sample_from`` functions,
                search spaces inside a list, or a key with "/".
        """
        return {name: cls._to_library(name, d) for name, d in space_domains(spec, cls.__name__)}

    @classmethod
    def _to_library(cls, name: str, domain: Domain) -> Any:
        """The library's parameter ``name`` for one corral search space."""
        raise NotImplementedError

    def _own_space(self, space: Any) -> Any:
        """``space``, the library's own search space, checked (TypeError if it is not one)."""
        raise NotImplementedError

    def _param_names(self) -> list[str] | None:
        """The search space's parameter names (None where they are not known ahead)."""
        raise NotImplementedError

    def _take_space(self, space: Any) -> None:
        """Takes the constructor's ``space``: corral search spaces (converted) or the
        library's own."""
        if space is None:
            return
        if isinstance(space, Mapping) and has_domains(space):
            others = [("/".join(map(str, p))) for p, _ in parse_spec_vars(space)[0]]
            if others:
                raise TypeError(
                    f"{type(self).__name__}'s space holds other values than corral search "
                    f"spaces ({', '.join(others)}): give it corral search spaces (tune.uniform, "
                    "tune.choice, ...) or the library's own, not both; constants go in "
                    "tune.run's config"
                )
            self._take_config_space(space)
        else:
            self._space = self._own_space(space)

    def _take_config_space(self, config: Mapping) -> None:
        self._domains = dict(space_domains(config, type(self).__name__))
        self._space = {name: self._to_library(name, d) for name, d in self._domains.items()}

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: Mapping, **spec: Any
    ) -> bool:
        """Takes ``tune.run``'s ``metric`` and ``mode`` where it has none (a different one
        is an error: set each in one place), and its ``config``'s search spaces as its
        own where it was given none.

        Returns:
            Whether it took the config's search spaces (False: it has a space of its
            own, so ``config`` may hold constants only).

        Raises:
            ValueError: a metric or mode differs from its own; it has no search space, or
                no mode, after this; the config holds what it cannot search.
        """
        name = type(self).__name__
        if mode not in (None, "min", "max"):
            raise ValueError(f"tune.run(mode=...) must be 'min', 'max' or None, got {mode!r}")
        for what, mine, given in (("metric", self._metric, metric), ("mode", self._mode, mode)):
            if mine is not None and given is not None and mine != given:
                raise ValueError(
                    f"tune.run({what}={given!r}) differs from {name}'s own {what} {mine!r}: "
                    "set it in one place"
                )
        self._metric = self._metric if self._metric is not None else metric
        self._mode = self._mode if self._mode is not None else mode
        took = False
        if self._space is None:
            self._take_config_space(config)
            took = bool(self._space)
        self._check_ready(ValueError)
        return took

    def _check_ready(self, error: type[Exception]) -> None:
        """Raises ``error`` unless it has a search space and a mode (and sets the
        default metric); checks ``points_to_evaluate`` against the space."""
        name = type(self).__name__
        if not self._space:
            raise error(
                f"{name} has no search space: give it one ({name}(space=...)) or put search "
                "spaces (tune.uniform, tune.choice, ...) in tune.run's config"
            )
        if self._mode is None:
            raise error(
                f"{name} needs a mode, 'min' or 'max' (whether {self._metric or 'its metric'} "
                f"is better low or high): pass mode=... to {name} or to tune.run"
            )
        if self._metric is None:
            # Ray Tune's anonymous metric: the number a function trainable returns.
            self._metric = DEFAULT_METRIC
        for point in self._points:
            self._encoded_point(point)

    # -- suggestions and results --------------------------------------------

    def _next_point(self) -> Mapping | None:
        """The next of ``points_to_evaluate`` not suggested yet, or None."""
        if self._points_used >= len(self._points):
            return None
        self._points_used += 1
        return self._points[self._points_used - 1]

    def _encoded_point(self, point: Mapping, ignore_unknown: bool = False) -> dict[str, Any]:
        """``point`` keyed by parameter name, each value as the library takes it (a
        coded choice's index).

        Raises:
            ValueError: it names a parameter the space lacks (unless ``ignore_unknown``)
                or lacks one the library needs, or a value its search space cannot give.
        """
        name = type(self).__name__
        names = self._param_names()
        flat = flat_point(point, names or ())
        if names is not None:
            unknown = [key for key in flat if key not in names]
            if unknown and not ignore_unknown:
                raise ValueError(
                    f"{name}: the point {dict(point)!r} sets {', '.join(unknown)}, which the "
                    f"search space lacks (its parameters: {', '.join(names)})"
                )
            flat = {key: value for key, value in flat.items() if key in names}
            missing = [key for key in names if key not in flat]
            if missing and (self._point_needs_every_param or ignore_unknown):
                raise ValueError(
                    f"{name}: the point {dict(point)!r} lacks {', '.join(missing)}: give a "
                    "value for every parameter of the search space"
                )
        return {key: self._point_value(key, value, point) for key, value in flat.items()}

    def _point_value(self, key: str, value: Any, point: Mapping) -> Any:
        domain = self._domains.get(key)
        if domain is None:
            return value
        if isinstance(domain, Choice):
            index = next((i for i, c in enumerate(domain.categories) if c == value), None)
            if index is None:
                raise ValueError(
                    f"{type(self).__name__}: the point {dict(point)!r} sets {key}={value!r}, "
                    f"which is none of its choices {domain.categories!r}"
                )
            coded = self._point_choices_as_indices or coded_categories(domain) is not None
            return index if coded else value
        if not can_give(domain, value):
            raise ValueError(
                f"{type(self).__name__}: the point {dict(point)!r} sets {key}={value!r}, "
                f"which {key}={domain!r} cannot give"
            )
        return value

    def _suggestion(self, params: Mapping[str, Any]) -> dict:
        """The config the library's ``params`` (by name) stand for, nested by path."""
        config = {}
        for key, value in params.items():
            domain = self._domains.get(key)
            if domain is None:
                config[key] = plain(value)
            elif (
                self._suggests_choice_indices
                and isinstance(domain, Choice)
                and coded_categories(domain) is None
            ):
                config[key] = plain(domain.categories[int(value)])
            else:
                config[key] = from_library(domain, value)
        return unflatten_dict(config)

    def _result_value(self, trial_id: str, result: Mapping) -> float | None:
        """The metric's value in ``result``; None (with a warning) where it is not a
        finite number, which counts as a failed trial.

        Raises:
            ValueError: ``result`` lacks the metric.
        """
        metric = self._metric
        assert metric is not None
        if metric not in result:
            keys = ", ".join(sorted(str(k) for k in result)[:20])
            raise ValueError(
                f"{type(self).__name__} optimises {metric!r}, which trial {trial_id}'s result "
                f"lacks (it has: {keys}): report it from the trainable, or optimise a key "
                "it reports (metric=...)"
            )
        try:
            value = float(result[metric])
        except (TypeError, ValueError):
            value = math.nan
        if not math.isfinite(value):
            logger.warning(
                "%s: trial %s ended with %s=%r, not a finite number: it counts as failed",
                type(self).__name__,
                trial_id,
                metric,
                result[metric],
            )
            return None
        return value

    def _restore_points(self, state: Mapping) -> None:
        used = state.get("points_used", 0)
        if isinstance(used, bool) or not isinstance(used, int) or used < 0:
            raise ValueError(f"points_used must be an int >= 0, got {used!r}")
        self._points_used = min(used, len(self._points))


class RecordingSearcher(LibrarySearcher):
    """A ``LibrarySearcher`` that records each trial it suggests, in order: its trial id,
    its parameters (the library's values by name, JSON), its outcome (a number; None
    while it runs or when it failed) and whether it runs. That record is its state for
    ``tune.run(resume=...)``: a subclass makes a fresh library object from it on
    restore.

    A subclass records a suggestion with ``_record``, hears each ended trial in
    ``_ended`` (the library is told there) and sets how a record is checked:
    ``_outcome_key`` (the outcome's key in the state), ``_outcome`` (the outcome of a
    metric's value), ``_anonymous_records`` (whether a record may lack a trial: a point
    told outside any trial) and ``_params_may_lack`` (whether a record's parameters may
    leave out some of the space's).
    """

    _outcome_key = "value"
    _anonymous_records = False
    _params_may_lack = False

    def __init__(
        self,
        metric: str | None,
        mode: str | None,
        points_to_evaluate: Sequence[Mapping] | None,
        max_concurrent: int | None = None,
        use_early_stopped_trials: bool | None = None,
    ) -> None:
        super().__init__(metric, mode, points_to_evaluate, max_concurrent, use_early_stopped_trials)
        # Every point suggested (or told), in order: {"trial_id", "params", outcome key,
        # "live"}.
        self._records: list[dict[str, Any]] = []
        self._by_id: dict[str, dict[str, Any]] = {}

    # -- what a subclass implements ------------------------------------------

    def _outcome(self, value: float) -> float:
        """The outcome recorded (and told to the library) for the metric's ``value``."""
        return value

    def _ended(self, trial_id: str, record: dict[str, Any], result: dict | None) -> None:
        """Tells the library that the trial of ``record`` ended (``record``'s outcome
        is None: it failed; ``result``: its last result)."""
        raise NotImplementedError

    # -- records -----------------------------------------------------------------

    def _record(self, trial_id: str | None, params: dict[str, Any], live: bool = True) -> dict:
        """Records ``params`` suggested to ``trial_id`` (None: a point told outside any
        trial), running (outcome None); returns the record."""
        return self._keep(
            {"trial_id": trial_id, "params": params, self._outcome_key: None, "live": live}
        )

    def _keep(self, record: dict[str, Any]) -> dict[str, Any]:
        """Appends ``record`` to the records (the latest of its trial id); returns it."""
        self._records.append(record)
        if record["trial_id"] is not None:
            self._by_id[record["trial_id"]] = record
        return record

    def on_trial_complete(
        self, trial_id: str, result: dict | None = None, error: bool = False
    ) -> None:
        """Records the trial's outcome and tells the library; a trial that errors, ends
        without a result, or whose metric is not a finite number counts as failed (its
        outcome None). A trial that ended before and ran again (``resume=
        "ERRORED_ONLY"``) is a new record, if it has an outcome this time.

        Raises:
            ValueError: ``result`` lacks the metric.
        """
        record = self._by_id.get(trial_id)
        if record is None:
            logger.warning(
                "%s: trial %s was never suggested; ignored", type(self).__name__, trial_id
            )
            return
        value = None if error or not result else self._result_value(trial_id, result)
        outcome = None if value is None else self._outcome(value)
        if not record["live"]:
            if outcome is None:
                return
            record = self._keep(dict(record))
        record["live"], record[self._outcome_key] = False, outcome
        self._ended(trial_id, record, result)

    def observations(self) -> list[tuple[dict[str, Any], float | None]]:
        """Each ended point's parameters (the library's values by name) and outcome
        (None: failed), in order."""
        return [(r["params"], r[self._outcome_key]) for r in self._records if not r["live"]]

    # -- state (JSON) ----------------------------------------------------------

    def _records_state(self, points_used: int | None = None) -> dict:
        """The state: the records and how many of ``points_to_evaluate`` were used."""
        used = self._points_used if points_used is None else points_used
        return to_jsonable({"points_used": used, "trials": self._records})

    def _restored_records(self, state: Mapping) -> list[dict[str, Any]]:
        """The records of a ``_records_state``, checked (the subclass keeps them, with
        ``_keep``); takes its points used.

        Raises:
            ValueError: ``state`` is not one written for this search space.
        """
        try:
            self._restore_points(state)
            return [self._checked_record(r) for r in state["trials"]]
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(
                f"Not a state of {type(self).__name__} for this search space: {e}"
            ) from None

    def _checked_record(self, entry: Any) -> dict[str, Any]:
        key = self._outcome_key
        trial_id, params, outcome, live = (
            entry["trial_id"],
            entry["params"],
            entry[key],
            entry["live"],
        )
        if not isinstance(trial_id, str) and not (trial_id is None and self._anonymous_records):
            kind = "a string or null" if self._anonymous_records else "a string"
            raise TypeError(f"trial_id must be {kind}, got {trial_id!r}")
        if not isinstance(params, dict):
            raise TypeError(f"params must be an object, got {params!r}")
        names = self._param_names()
        if names is not None and not (
            set(params) <= set(names) if self._params_may_lack else set(params) == set(names)
        ):
            raise ValueError(f"params {sorted(params)} are not the parameters {sorted(names)}")
        if outcome is not None and (
            isinstance(outcome, bool)
            or not isinstance(outcome, int | float)
            or not math.isfinite(outcome)
        ):
            raise TypeError(f"{key} must be a finite number or null, got {outcome!r}")
        if not isinstance(live, bool):
            raise TypeError(f"live must be true or false, got {live!r}")
        return {"trial_id": trial_id, "params": params, key: outcome, "live": live}
