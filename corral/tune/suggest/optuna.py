"""Ray Tune 1.13's ``ray.tune.suggest.optuna``: ``OptunaSearch``, suggestions from an
`Optuna <https://optuna.org>`_ study (the ``optuna`` extra: ``pip install
'corral[optuna]'``)."""

from __future__ import annotations

import json
import logging
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from corral.tune.logger import flatten_dict, to_jsonable
from corral.tune.result import TRAINING_ITERATION
from corral.tune.search import Choice, Domain, LogUniform, RandInt, Uniform
from corral.tune.suggest.library_searcher import (
    LibrarySearcher,
    coded_categories,
    import_library,
)

if TYPE_CHECKING:
    import optuna

logger = logging.getLogger(__name__)

# A define-by-run function slower than this is warned about: it should only suggest.
DEFINE_BY_RUN_WARN_THRESHOLD_S = 1.0
# The trial states a saved study may hold (a trial still running is asked again).
_STATES = ("COMPLETE", "PRUNED", "FAIL", "RUNNING")


class OptunaSearch(LibrarySearcher):
    """Suggests each trial's config from an Optuna study (``ask``), and tells the study
    each trial's result (``tell``): TPE by default.

    Args:
        space: the search space: corral search spaces (``{"lr": tune.loguniform(1e-4,
            1e-2)}``, converted by ``convert_search_space``), Optuna distributions by
            name (nested dicts name them by path joined by "/"), or a define-by-run
            function ``space(trial)`` that calls ``trial.suggest_*`` (and may return a
            dict of constants to put in the config). None: ``tune.run``'s config
            is the search space.
        metric: the result key to optimise (or ``tune.run(metric=...)``; default
            ``"_metric"``). One metric: lists (multi-objective) are not built.
        mode: "min" or "max" (or ``tune.run(mode=...)``).
        points_to_evaluate: configs to run first, in order (``study.enqueue_trial``);
            a point may leave parameters out, which the sampler then draws.
        sampler: the Optuna sampler (default ``TPESampler(seed=seed)``).
        seed: the seed of the default sampler (a sampler you pass seeds itself).
        evaluated_rewards: the metric's values of ``points_to_evaluate``, already known:
            the study is told them and those points are not run (needs a space of
            distributions, not a function).

    Intermediate results are reported to the trial (``trial.report``, at each
    ``training_iteration``; the study prunes nothing). A trial that errors is told as
    failed, one that ends without a result as pruned, one whose metric is not a finite
    number as failed.

    Its state for ``tune.run(resume=...)`` is JSON: every trial of the study (its
    parameters and distributions, state, values and intermediate values, and which
    ``tune.run`` trial it is), replayed into a fresh study on restore (trials still
    running are asked again with their parameters). What the study does not keep in its
    trials does not come back: the default sampler starts from a seed derived from
    ``seed`` and the number of trials replayed (so it does not repeat its first draws),
    a sampler you pass goes on as the resuming call made it, and trials' system and user
    attributes (where samplers such as ``CmaEsSampler`` keep their state) are not saved.
    """

    def __init__(
        self,
        space: Mapping[str, Any] | Callable[[optuna.Trial], dict | None] | None = None,
        metric: str | None = None,
        mode: str | None = None,
        points_to_evaluate: Sequence[Mapping] | None = None,
        sampler: optuna.samplers.BaseSampler | None = None,
        seed: int | None = None,
        evaluated_rewards: Sequence[float] | None = None,
    ) -> None:
        self._ot = import_library("optuna", "OptunaSearch")
        super().__init__(metric, mode, points_to_evaluate)
        if sampler is not None:
            if seed is not None:
                raise ValueError(
                    "OptunaSearch(seed=...) seeds the TPESampler it makes when given no "
                    "sampler: seed the sampler you pass itself"
                )
            if not isinstance(sampler, self._ot.samplers.BaseSampler):
                raise TypeError(
                    f"OptunaSearch(sampler=...) takes an optuna.samplers.BaseSampler, got "
                    f"{sampler!r}"
                )
        if evaluated_rewards is not None:
            if not isinstance(evaluated_rewards, list | tuple) or len(evaluated_rewards) != len(
                self._points
            ):
                raise ValueError(
                    f"OptunaSearch(evaluated_rewards=...) takes one value per point of "
                    f"points_to_evaluate ({len(self._points)}), got {evaluated_rewards!r}"
                )
            if callable(space):
                raise TypeError(
                    "OptunaSearch(evaluated_rewards=...) needs a space of distributions or "
                    "corral search spaces, not a define-by-run function"
                )
        self._sampler = sampler
        self._seed = seed
        self._evaluated_rewards = list(evaluated_rewards) if evaluated_rewards else None
        self._study: optuna.Study | None = None
        self._live: dict[str, optuna.Trial] = {}  # tune.run trial id -> its running trial
        self._numbers: dict[str, int] = {}  # tune.run trial id -> its study trial number
        self._take_space(space)

    # -- the search space ----------------------------------------------------

    @classmethod
    def _to_library(cls, name: str, domain: Domain) -> Any:
        distributions = import_library("optuna", cls.__name__).distributions
        if isinstance(domain, Choice):
            coded = coded_categories(domain)
            choices = list(range(len(coded))) if coded is not None else domain.categories
            return distributions.CategoricalDistribution(choices)
        if isinstance(domain, Uniform):
            return distributions.FloatDistribution(domain.lower, domain.upper)
        if isinstance(domain, LogUniform):
            return distributions.FloatDistribution(domain.lower, domain.upper, log=True)
        if isinstance(domain, RandInt):
            return distributions.IntDistribution(domain.lower, domain.upper - 1)
        raise ValueError(f"OptunaSearch cannot search {name}={domain!r}")

    def _own_space(self, space: Any) -> Any:
        if callable(space):
            return space
        if isinstance(space, Mapping):
            flat = flatten_dict(space)
            for key, value in flat.items():
                if not isinstance(value, self._ot.distributions.BaseDistribution):
                    raise TypeError(
                        f"OptunaSearch's space maps names to Optuna distributions (or corral "
                        f"search spaces), got {key}={value!r}"
                    )
            return flat
        raise TypeError(
            "OptunaSearch(space=...) takes a dict (of Optuna distributions or corral search "
            f"spaces) or a define-by-run function, got {space!r}"
        )

    def _param_names(self) -> list[str] | None:
        return None if callable(self._space) else list(self._space or ())

    # -- the study -------------------------------------------------------------

    def _setup(self, replayed: int = 0) -> optuna.Study:
        """A fresh study (``replayed``: how many saved trials will be put in it)."""
        self._check_ready(RuntimeError)
        ot = self._ot
        sampler = self._sampler
        if sampler is None:
            seed = self._seed
            if seed is not None and replayed:
                seed = int(np.random.SeedSequence([seed, replayed]).generate_state(1)[0])
            sampler = ot.samplers.TPESampler(seed=seed)
        self._study = study = ot.create_study(
            sampler=sampler,
            pruner=ot.pruners.NopPruner(),
            direction="minimize" if self._mode == "min" else "maximize",
        )
        self._live, self._numbers = {}, {}
        if self._evaluated_rewards and not replayed:
            for point, reward in zip(self._points, self._evaluated_rewards):
                self.add_evaluated_point(dict(point), reward)
            self._points_used = len(self._points)
        return study

    def _study_ready(self) -> optuna.Study:
        return self._study if self._study is not None else self._setup()

    def suggest(self, trial_id: str) -> dict | None:
        study = self._study_ready()
        point = self._next_point()
        if point is not None:
            study.enqueue_trial(self._encoded_point(point))
        if callable(self._space):
            trial = study.ask()
            params = self._define_by_run(trial)
        else:
            trial = study.ask(fixed_distributions=self._space)
            params = dict(trial.params)
        self._live[trial_id] = trial
        self._numbers[trial_id] = trial.number
        return self._suggestion(params)

    def _define_by_run(self, trial: optuna.Trial) -> dict[str, Any]:
        start = time.monotonic()
        constants = self._space(trial)
        if time.monotonic() - start > DEFINE_BY_RUN_WARN_THRESHOLD_S:
            warnings.warn(
                "OptunaSearch's define-by-run function took over "
                f"{DEFINE_BY_RUN_WARN_THRESHOLD_S} s: it should only suggest values; the "
                "training goes in the trainable",
                stacklevel=3,
            )
        if constants is not None and not (
            isinstance(constants, dict) and all(isinstance(k, str) for k in constants)
        ):
            raise TypeError(
                "OptunaSearch's define-by-run function must return None or a dict with str "
                f"keys (constants of the config), got {constants!r}"
            )
        return {**trial.params, **(constants or {})}

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        """Reports the metric to the trial as its intermediate value at the result's
        ``training_iteration`` (a result without the metric is skipped)."""
        trial = self._live.get(trial_id)
        if trial is None or self._metric not in result:
            return
        value = self._result_value(trial_id, result)
        if value is not None:
            trial.report(value, int(result.get(TRAINING_ITERATION, 0)))

    def on_trial_complete(
        self, trial_id: str, result: dict | None = None, error: bool = False
    ) -> None:
        """Tells the study the trial's metric (complete), or that it failed (an error, a
        metric that is not a finite number) or was pruned (no result).

        Raises:
            ValueError: ``result`` lacks the metric.
        """
        number = self._numbers.get(trial_id)
        if number is None:
            logger.warning("OptunaSearch: trial %s was never suggested; ignored", trial_id)
            return
        value = None if error or not result else self._result_value(trial_id, result)
        states = self._ot.trial.TrialState
        trial = self._live.pop(trial_id, None)
        study = self._study_ready()
        if trial is not None:
            if value is not None:
                study.tell(trial, value, state=states.COMPLETE)
            else:
                study.tell(trial, state=states.FAIL if error or result else states.PRUNED)
        elif value is not None:
            # It ended before and ran again (resume="ERRORED_ONLY"): a new observation.
            ended = study.get_trials(deepcopy=False)[number]
            self._add_trial(states.COMPLETE, [value], ended.params, ended.distributions)
            self._numbers[trial_id] = len(study.get_trials(deepcopy=False)) - 1

    def add_evaluated_point(
        self,
        parameters: dict,
        value: float,
        error: bool = False,
        pruned: bool = False,
        intermediate_values: list[float] | None = None,
    ) -> None:
        """Tells the study of a config evaluated outside it: ``parameters`` (a config:
        keys outside the search space are ignored; every parameter must be there),
        its metric's ``value``, whether it failed or was pruned, and the values it
        reported on the way.

        Raises:
            TypeError: the space is a define-by-run function.
            ValueError: ``parameters`` lacks a parameter or holds a value its search
                space cannot give.
        """
        if callable(self._space):
            raise TypeError(
                "OptunaSearch.add_evaluated_point needs a space of distributions or corral "
                "search spaces, not a define-by-run function"
            )
        self._study_ready()
        params = self._encoded_point(parameters, ignore_unknown=True)
        states = self._ot.trial.TrialState
        finite = value is not None and np.isfinite(value)
        if error or (not pruned and not finite):
            state, values = states.FAIL, None
        else:
            state = states.PRUNED if pruned else states.COMPLETE
            values = [float(value)] if finite else None
        steps = {i: float(v) for i, v in enumerate(intermediate_values or ()) if np.isfinite(v)}
        self._add_trial(state, values, params, {k: self._space[k] for k in params}, steps)

    def _add_trial(
        self,
        state: Any,
        values: list[float] | None,
        params: Mapping[str, Any],
        distributions: Mapping[str, Any],
        intermediate_values: Mapping[int, float] | None = None,
    ) -> None:
        assert self._study is not None
        self._study.add_trial(
            self._ot.trial.create_trial(
                state=state,
                values=values,
                params=dict(params),
                distributions=dict(distributions),
                intermediate_values=dict(intermediate_values or {}),
            )
        )

    # -- state (JSON) ----------------------------------------------------------

    def get_state(self) -> dict:
        """The study's trials (parameters, distributions, state, values, intermediate
        values, ``tune.run`` trial id) and how many of ``points_to_evaluate`` were used."""
        trials = []
        if self._study is not None:
            ids = {number: trial_id for trial_id, number in self._numbers.items()}
            distribution_to_json = self._ot.distributions.distribution_to_json
            for trial in self._study.get_trials(deepcopy=False):
                if trial.state.name not in _STATES:
                    continue
                trials.append(
                    {
                        "trial_id": ids.get(trial.number),
                        "state": trial.state.name,
                        "params": trial.params,
                        "distributions": {
                            k: json.loads(distribution_to_json(d))
                            for k, d in trial.distributions.items()
                        },
                        "values": trial.values,
                        "intermediate_values": sorted(trial.intermediate_values.items()),
                    }
                )
        return to_jsonable({"points_used": self._points_used, "trials": trials})

    def set_state(self, state: dict) -> None:
        """Replays a ``get_state`` into a fresh study: the ended trials are added, the
        running ones asked again with their parameters.

        Raises:
            ValueError: ``state`` is not one ``get_state`` wrote.
        """
        try:
            entries = [_Entry.parse(e, self._ot) for e in state["trials"]]
            self._restore_points(state)
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"Not a state of OptunaSearch: {e}") from None
        ended = [e for e in entries if e.state != "RUNNING"]
        study = self._setup(replayed=len(ended))
        states = self._ot.trial.TrialState
        for number, entry in enumerate(ended):
            self._add_trial(
                states[entry.state],
                entry.values,
                entry.params,
                entry.distributions,
                entry.intermediate_values,
            )
            if entry.trial_id is not None:
                self._numbers[entry.trial_id] = number
        for entry in entries:
            if entry.state != "RUNNING" or entry.trial_id is None:
                continue
            study.enqueue_trial(entry.params)
            trial = study.ask(fixed_distributions=entry.distributions)
            for step, value in entry.intermediate_values.items():
                trial.report(value, step)
            self._live[entry.trial_id] = trial
            self._numbers[entry.trial_id] = trial.number


class _Entry:
    """One saved trial of ``OptunaSearch.get_state``, checked."""

    def __init__(
        self,
        trial_id: str | None,
        state: str,
        params: dict[str, Any],
        distributions: dict[str, Any],
        values: list[float] | None,
        intermediate_values: dict[int, float],
    ) -> None:
        self.trial_id = trial_id
        self.state = state
        self.params = params
        self.distributions = distributions
        self.values = values
        self.intermediate_values = intermediate_values

    @classmethod
    def parse(cls, entry: Any, ot: Any) -> _Entry:
        trial_id, state = entry["trial_id"], entry["state"]
        if trial_id is not None and not isinstance(trial_id, str):
            raise TypeError(f"trial_id must be a string or null, got {trial_id!r}")
        if state not in _STATES:
            raise ValueError(f"state must be one of {_STATES}, got {state!r}")
        params, distributions = entry["params"], entry["distributions"]
        if not isinstance(params, dict) or not isinstance(distributions, dict):
            raise TypeError("params and distributions must be objects")
        if set(params) != set(distributions):
            raise ValueError(f"params {sorted(params)} and distributions differ")
        values = entry["values"]
        if values is not None:
            values = [_number(v) for v in values]
        steps = {int(step): _number(v) for step, v in entry["intermediate_values"]}
        return cls(
            trial_id,
            state,
            params,
            {
                k: ot.distributions.json_to_distribution(json.dumps(d))
                for k, d in distributions.items()
            },
            values,
            steps,
        )


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a number, got {value!r}")
    return float(value)


__all__ = ["OptunaSearch"]
