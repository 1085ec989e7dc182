"""Ray Tune 1.13's ``ray.tune.suggest.ax``: ``AxSearch``, suggestions from `Ax
<https://ax.dev>`_ (Bayesian optimisation with BoTorch after quasi-random Sobol points; the
``ax`` extra: ``pip install 'corral[ax]'``).

Ray Tune 1.13 drove Ax's ``AxClient``, which Ax deprecated (it leaves Ax in 1.4); corral
drives its successor, ``ax.api.client.Client``, and takes Ray Tune's arguments: the
``AxClient`` parameter dicts of ``space``, ``parameter_constraints`` and
``outcome_constraints`` mean what they meant there.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import math
import re
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from corral.tune.search import Choice, Domain, LogRandInt, LogUniform, RandInt, Uniform
from corral.tune.suggest.library_searcher import (
    RecordingSearcher,
    import_library,
    plain,
)

logger = logging.getLogger(__name__)

# What an ``AxClient`` parameter dict of Ray Tune's ``space`` may hold.
_PARAMETER_KEYS = {
    "name",
    "type",
    "bounds",
    "values",
    "value",
    "value_type",
    "log_scale",
    "is_ordered",
    "is_task",
    "digits",
    "sort_values",
}
# Ray Tune's ``**ax_kwargs`` went to ``AxClient``; these are its arguments that the
# ``Client`` has no counterpart for.
_AXCLIENT_ONLY = {
    "generation_strategy",
    "db_settings",
    "enforce_sequential_optimization",
    "torch_device",
    "verbose_logging",
    "suppress_storage_errors",
    "early_stopping_strategy",
    "global_stopping_strategy",
}


def _value_type(values: Sequence[Any]) -> str:
    """Ax's ``parameter_type`` of ``values`` ("bool", "int", "float" or "str")."""
    if all(isinstance(v, bool) for v in values):
        return "bool"
    if all(isinstance(v, int) and not isinstance(v, bool) for v in values):
        return "int"
    if all(isinstance(v, int | float) and not isinstance(v, bool) for v in values):
        return "float"
    if all(isinstance(v, str) for v in values):
        return "str"
    raise ValueError(f"values of one type (bool, int, float or str), got {list(values)!r}")


def _objective_name(metric: str) -> str:
    """The name Ax knows the metric by: Ax reads objectives as expressions, so what is
    not a letter, digit or "_" (a nested result key's "/") becomes "_"."""
    name = re.sub(r"\W", "_", metric)
    return f"_{name}" if name[:1].isdigit() else name


class AxSearch(RecordingSearcher):
    """Suggests each trial's config with an Ax ``Client`` (``get_next_trials``) and gives it
    each trial's metric (``complete_trial``).

    Args:
        space: the search space: corral search spaces (``{"lr": tune.loguniform(1e-4,
            1e-2)}``, converted by ``convert_search_space``), or Ray Tune's list of
            ``AxClient`` parameter dicts (``{"name": "lr", "type": "range", "bounds":
            [1e-4, 1e-2], "log_scale": True}``, ``"choice"`` with ``"values"``,
            ``"fixed"`` with ``"value"``) or of Ax's ``RangeParameterConfig`` /
            ``ChoiceParameterConfig``. None: ``tune.run``'s config is the search space.
        metric: the result key to optimise (or ``tune.run(metric=...)``; default
            ``"_metric"``).
        mode: "min" or "max" (or ``tune.run(mode=...)``).
        points_to_evaluate: configs to run first, in order (attached to the experiment);
            each gives a value for every parameter.
        parameter_constraints: Ax's linear constraints between parameters (``"x1 + x2 <=
            1"``, ``"x3 >= x4"``).
        outcome_constraints: Ax's constraints on other result keys (``"m1 <= 3"``): each
            metric they name must be in every trial's last result.
        ax_client: Ray Tune's ready-made ``AxClient``, refused (Ax deprecated it; pass its
            search space and constraints here instead).
        **ax_kwargs: ``random_seed`` (seeds Sobol and BoTorch) and the arguments of the
            ``Client``'s ``configure_generation_strategy`` (``method="fast"``,
            ``"quality"`` or ``"random_search"``, ``initialization_budget``, ...). The
            ``AxClient`` arguments without a counterpart (``generation_strategy``,
            ``enforce_sequential_optimization``, ...) are refused.

    Ax's default strategy suggests a centre point and Sobol points first (five by
    default, ``initialization_budget``), then fits a Gaussian process for each
    suggestion (a fraction of a second for a few continuous parameters, seconds with
    choices and integers). It waits (no suggestion) until its first points have results
    before it fits one. A choice is searched by the index of its category. A trial that
    errors, ends without a result, or whose metric (or a constrained metric) is not a
    finite number is marked failed.

    Its state for ``tune.run(resume=...)`` is JSON: each trial's parameters, metric and
    constrained metrics, in order; on restore they are attached to a fresh experiment
    (the running ones as running), whose random draws start from a seed derived from
    ``random_seed`` and the number of trials restored.
    """

    _point_needs_every_param = True
    _point_choices_as_indices = True
    _suggests_choice_indices = True

    def __init__(
        self,
        space: Mapping[str, Any] | Sequence[Any] | None = None,
        metric: str | None = None,
        mode: str | None = None,
        points_to_evaluate: Sequence[Mapping] | None = None,
        parameter_constraints: Sequence[str] | None = None,
        outcome_constraints: Sequence[str] | None = None,
        ax_client: Any = None,
        **ax_kwargs: Any,
    ) -> None:
        import_library("ax", "AxSearch")
        self._ax = importlib.import_module("ax.api.client")
        self._configs = importlib.import_module("ax.api.configs")
        errors = importlib.import_module("ax.exceptions.core")
        strategy_errors = importlib.import_module("ax.exceptions.generation_strategy")
        # What Ax raises when it waits for running trials' results.
        self._waits = (errors.DataRequiredError, strategy_errors.MaxParallelismReachedException)
        max_concurrent = ax_kwargs.pop("max_concurrent", None)
        use_early_stopped_trials = ax_kwargs.pop("use_early_stopped_trials", None)
        super().__init__(metric, mode, points_to_evaluate, max_concurrent, use_early_stopped_trials)
        if ax_client is not None:
            raise NotImplementedError(
                "AxSearch(ax_client=...) is not built: Ax deprecated AxClient (it leaves Ax "
                "in 1.4) and corral drives its Client; pass the experiment's space, "
                "parameter_constraints and outcome_constraints to AxSearch instead"
            )
        seed = ax_kwargs.pop("random_seed", None)
        if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
            raise TypeError(f"AxSearch(random_seed=...) takes an int, got {seed!r}")
        self._seed: int | None = seed
        accepted = set(inspect.signature(self._ax.Client.configure_generation_strategy).parameters)
        accepted.discard("self")
        unknown = sorted(set(ax_kwargs) - accepted)
        if unknown:
            dropped = [k for k in unknown if k in _AXCLIENT_ONLY]
            raise TypeError(
                f"AxSearch got unexpected arguments: {', '.join(unknown)}"
                + (
                    f" ({', '.join(dropped)}: AxClient's, which Ax deprecated; corral drives "
                    "its Client)"
                    if dropped
                    else ""
                )
                + f"; it takes random_seed and the Client's configure_generation_strategy "
                f"arguments: {', '.join(sorted(accepted))}"
            )
        self._strategy = ax_kwargs
        self._parameter_constraints = list(parameter_constraints or ())
        self._outcome_constraints = list(outcome_constraints or ())
        for name, given in (
            ("parameter_constraints", self._parameter_constraints),
            ("outcome_constraints", self._outcome_constraints),
        ):
            if not all(isinstance(c, str) for c in given):
                raise TypeError(f"AxSearch({name}=...) takes a list of str, got {given!r}")
        self._client: Any = None  # made at the first suggestion
        self._constrained: list[str] = []  # the result keys outcome_constraints name
        self._index: dict[str, int] = {}  # running trial id -> Ax's trial index
        self._replayed = 0  # trials restored (for the seed)
        self._take_space(space)

    # -- the search space ----------------------------------------------------

    @classmethod
    def _to_library(cls, name: str, domain: Domain) -> Any:
        import_library("ax", cls.__name__)
        configs = importlib.import_module("ax.api.configs")
        if isinstance(domain, Choice):
            # (Searched by index; ordered where the categories are increasing numbers.)
            categories = domain.categories
            numeric = all(
                isinstance(c, int | float) and not isinstance(c, bool) for c in categories
            )
            ordered = numeric and list(categories) == sorted(categories)
            return configs.ChoiceParameterConfig(
                name=name,
                values=list(range(len(categories))),
                parameter_type="int",
                is_ordered=ordered and len(categories) > 1,
            )
        if isinstance(domain, Uniform | LogUniform):
            return configs.RangeParameterConfig(
                name=name,
                bounds=(float(domain.lower), float(domain.upper)),
                parameter_type="float",
                scaling="log" if isinstance(domain, LogUniform) else "linear",
            )
        if isinstance(domain, RandInt | LogRandInt):
            return configs.RangeParameterConfig(
                name=name,
                bounds=(int(domain.lower), int(domain.upper) - 1),
                parameter_type="int",
                scaling="log" if isinstance(domain, LogRandInt) else "linear",
            )
        raise ValueError(
            f"{cls.__name__} cannot search {name}={domain!r}: use choice, uniform, "
            "loguniform, randint or lograndint (Ax has no quantised or normal parameters)"
        )

    def _own_space(self, space: Any) -> Any:
        configs = self._configs
        if not isinstance(space, list | tuple) or not space:
            raise TypeError(
                "AxSearch(space=...) takes corral search spaces (a dict) or a list of Ax "
                f"parameters (AxClient's dicts, RangeParameterConfig, ...), got {space!r}"
            )
        out: dict[str, Any] = {}
        for parameter in space:
            if isinstance(parameter, configs.RangeParameterConfig | configs.ChoiceParameterConfig):
                config = parameter
            elif isinstance(parameter, Mapping):
                config = self._from_axclient(parameter)
            else:
                raise TypeError(
                    "AxSearch's space holds Ax parameters (AxClient's dicts, "
                    f"RangeParameterConfig, ChoiceParameterConfig), got {parameter!r}"
                )
            if config.name in out:
                raise ValueError(f"AxSearch's space names {config.name!r} twice")
            out[config.name] = config
        return out

    def _from_axclient(self, parameter: Mapping) -> Any:
        """One of Ray Tune's ``AxClient`` parameter dicts as the ``Client``'s config (a
        fixed parameter: a choice of its one value)."""
        configs = self._configs
        unknown = sorted(set(parameter) - _PARAMETER_KEYS)
        name, kind = parameter.get("name"), parameter.get("type")
        try:
            if unknown:
                raise ValueError(f"unknown keys {unknown}")
            if not isinstance(name, str) or not name:
                raise ValueError("a 'name' (str)")
            if kind == "range":
                low, high = parameter["bounds"]
                value_type = parameter.get("value_type") or _value_type([low, high])
                return configs.RangeParameterConfig(
                    name=name,
                    bounds=(low, high),
                    parameter_type=value_type,
                    scaling="log" if parameter.get("log_scale") else "linear",
                )
            if kind in ("choice", "fixed"):
                values = list(parameter["values"]) if kind == "choice" else [parameter["value"]]
                return configs.ChoiceParameterConfig(
                    name=name,
                    values=values,
                    parameter_type=parameter.get("value_type") or _value_type(values),
                    is_ordered=parameter.get("is_ordered"),
                )
            raise ValueError(f"type 'range', 'choice' or 'fixed', got {kind!r}")
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(
                f"AxSearch's space: {dict(parameter)!r} is not an Ax parameter ({e})"
            ) from None

    def _param_names(self) -> list[str] | None:
        return list(self._space or ())

    # -- Ax's client -----------------------------------------------------------

    def _ready(self) -> Any:
        if self._client is None:
            self._check_ready(RuntimeError)
            self._client = self._make_client()
        return self._client

    def _make_client(self) -> Any:
        """A fresh ``Client`` with the experiment, its objective and strategy (seeded
        anew after a restore, not to repeat the first draws)."""
        seed = self._seed
        if seed is not None and self._replayed:
            seed = int(np.random.SeedSequence([seed, self._replayed]).generate_state(1)[0])
        assert self._metric is not None
        name = _objective_name(self._metric)
        client = self._ax.Client(random_seed=seed)
        try:
            client.configure_experiment(
                parameters=list(self._space.values()),
                parameter_constraints=self._parameter_constraints or None,
            )
            client.configure_optimization(
                objective=f"-{name}" if self._mode == "min" else name,
                outcome_constraints=self._outcome_constraints or None,
            )
            if self._strategy:
                client.configure_generation_strategy(**self._strategy)
            parse = importlib.import_module(
                "ax.api.utils.instantiation.from_string"
            ).optimization_config_from_string
            names = parse(
                objective_str=name, outcome_constraint_strs=self._outcome_constraints
            ).metric_names
        except Exception as e:  # (Ax's UserInputError and others: one clear error)
            raise ValueError(f"AxSearch: Ax refused the experiment ({e})") from e
        self._constrained = sorted(n for n in names if n != name)
        return client

    # -- suggestions and results ---------------------------------------------

    def suggest(self, trial_id: str) -> dict | None:
        client = self._ready()
        point = self._next_point()
        if point is not None:
            params = plain(self._encoded_point(point))
            index = client.attach_trial(params)
        else:
            try:
                trials = client.get_next_trials(max_trials=1)
            except self._waits:
                trials = {}
            if not trials:
                return None  # (Ax waits for running trials' results)
            ((index, params),) = trials.items()
            params = plain(dict(params))
        self._record(trial_id, params)
        self._index[trial_id] = index
        return self._suggestion(params)

    def on_trial_complete(
        self, trial_id: str, result: dict | None = None, error: bool = False
    ) -> None:
        """As ``RecordingSearcher.on_trial_complete``; Ax is told the metric and the
        constrained metrics (``complete_trial``), or that the trial failed.

        Raises:
            ValueError: ``result`` lacks the metric or a constrained metric.
        """
        if result and not error:
            missing = [n for n in self._constrained if n not in result]
            if missing:
                raise ValueError(
                    f"AxSearch's outcome_constraints name {', '.join(missing)}, which trial "
                    f"{trial_id}'s result lacks: report it from the trainable"
                )
        super().on_trial_complete(trial_id, result, error)

    def _ended(self, trial_id: str, record: dict[str, Any], result: dict | None) -> None:
        outcomes = {}
        if record["value"] is not None and result is not None:
            outcomes = {n: _finite(result[n]) for n in self._constrained}
            if any(v is None for v in outcomes.values()):
                logger.warning(
                    "AxSearch: trial %s ended with a constrained metric that is not a finite "
                    "number (%s): it counts as failed",
                    trial_id,
                    {n: result[n] for n in self._constrained},
                )
                record["value"], outcomes = None, {}
        record["outcomes"] = outcomes
        client = self._ready()
        index = self._index.pop(trial_id, None)
        if index is None:
            # (It ended before and ran again, resume="ERRORED_ONLY": a new Ax trial.)
            index = client.attach_trial(record["params"])
        self._tell(client, index, record)

    def _tell(self, client: Any, index: int, record: Mapping[str, Any]) -> None:
        """Completes Ax's trial ``index`` with the record's metrics, or marks it failed."""
        if record["value"] is None:
            client.mark_trial_failed(index)
        else:
            assert self._metric is not None
            raw = {_objective_name(self._metric): record["value"], **record["outcomes"]}
            client.complete_trial(index, raw_data=raw)

    # -- state (JSON) ----------------------------------------------------------

    def get_state(self) -> dict:
        """Every trial suggested, in order (its trial id, parameters, metric, constrained
        metrics and whether it runs), and how many of ``points_to_evaluate`` were used."""
        return self._records_state()

    def set_state(self, state: dict) -> None:
        """Attaches every trial of a ``get_state`` to a fresh experiment, in order (the
        ended ones completed or failed, the running ones running).

        Raises:
            ValueError: ``state`` is not one ``get_state`` wrote for this search space.
        """
        records = self._restored_records(state)
        self._replayed = len(records)
        self._client = None
        client = self._ready()
        self._records, self._by_id, self._index = [], {}, {}
        for record in records:
            self._keep(record)
            index = client.attach_trial(record["params"])
            if record["live"]:
                self._index[record["trial_id"]] = index
            else:
                self._tell(client, index, record)

    def _checked_record(self, entry: Any) -> dict[str, Any]:
        record = super()._checked_record(entry)
        outcomes = entry.get("outcomes", {}) if isinstance(entry, Mapping) else {}
        if not isinstance(outcomes, dict) or not all(
            isinstance(k, str) and _finite(v) is not None for k, v in outcomes.items()
        ):
            raise TypeError(f"outcomes must map names to finite numbers, got {outcomes!r}")
        record["outcomes"] = outcomes
        return record


def _finite(value: Any) -> float | None:
    """``value`` as a finite float; None if it is not one."""
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


__all__ = ["AxSearch"]
