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
from corral.tune.search import (
    Choice,
    Domain,
    LogRandInt,
    LogUniform,
    Normal,
    Quantized,
    RandInt,
    Uniform,
)
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
# Samplers (`optuna.samplers` names) whose whole state is their random generators plus
# the study's trials: a restore of both continues them exactly.
_GENERATOR_ONLY_SAMPLERS = ("RandomSampler", "TPESampler")


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
    running are asked again with their parameters). The sampler's random generators
    (numpy ``RandomState``s, its own and those of the samplers it holds, e.g. TPE's
    random sampler) are saved too and restored into the sampler of the resuming call,
    the default one or yours: a sampler whose state is its generators and the trials
    (``RandomSampler``, ``TPESampler``) then goes on as without the interruption.
    Trials' system and user attributes (where samplers such as ``CmaEsSampler``,
    ``GridSampler`` or ``QMCSampler`` keep state) are not saved: restoring a state of
    such a sampler, of a sampler with no generator found, or into a sampler of
    another class warns that its suggestions may differ from an uninterrupted run.
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
        if isinstance(domain, LogRandInt):
            return distributions.IntDistribution(domain.lower, domain.upper - 1, log=True)
        if isinstance(domain, Quantized):
            inner = domain.domain
            if isinstance(inner, Uniform):
                return distributions.FloatDistribution(domain.qlower, domain.qupper, step=domain.q)
            if isinstance(inner, RandInt) or (isinstance(inner, LogRandInt) and domain.q == 1):
                log = isinstance(inner, LogRandInt)
                return distributions.IntDistribution(
                    int(domain.qlower), int(domain.qupper), log=log, step=int(domain.q)
                )
            if not isinstance(inner, Normal):
                raise ValueError(
                    f"OptunaSearch cannot search {name}={domain!r}: Optuna has no quantised "
                    "log scale (its step needs a linear one); use a q of 1 (ints), drop the "
                    "q, or use HyperOptSearch"
                )
        if isinstance(domain, Normal | Quantized):
            raise ValueError(
                f"OptunaSearch cannot search {name}={domain!r}: Optuna has no normal "
                "distribution; use bounds (tune.uniform) or HyperOptSearch"
            )
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

    def _setup(self, replayed: int = 0, restoring: bool = False) -> optuna.Study:
        """A fresh study (``restoring``: saved trials will be put in it; ``replayed``: the
        default sampler's seed is then derived from ``seed`` and this number)."""
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
        if self._evaluated_rewards and not (restoring or replayed):
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
        state: dict[str, Any] = {"points_used": self._points_used, "trials": trials}
        if self._study is not None:
            state["sampler"] = _sampler_state(self._study.sampler)
        return to_jsonable(state)

    def set_state(self, state: dict) -> None:
        """Replays a ``get_state`` into a fresh study: the ended trials are added, the
        running ones asked again with their parameters; the sampler's random generators
        are set to the saved ones (see the class docstring for what cannot be).

        Raises:
            ValueError: ``state`` is not one ``get_state`` wrote.
        """
        sampler_state = state.get("sampler") if isinstance(state, dict) else None
        try:
            entries = [_Entry.parse(e, self._ot) for e in state["trials"]]
            self._restore_points(state)
            if sampler_state is not None:
                _check_sampler_state(sampler_state)
        except (KeyError, TypeError, ValueError) as e:
            raise ValueError(f"Not a state of OptunaSearch: {e}") from None
        ended = [e for e in entries if e.state != "RUNNING"]
        # With the generators saved, the sampler goes on from them; without (a state
        # of an older corral), the default one starts from a seed derived from the
        # trials replayed, so that it does not draw its first points again.
        study = self._setup(replayed=0 if sampler_state is not None else len(ended), restoring=True)
        if sampler_state is not None:
            _restore_sampler_state(study.sampler, sampler_state)
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


def _sampler_generators(sampler: Any) -> dict[str, np.random.RandomState]:
    """The numpy ``RandomState``s of ``sampler`` by attribute path ("_rng",
    "_random_sampler._rng"): its own (Optuna's ``LazyRandomState`` wrappers included) and
    those of the samplers it holds."""
    from optuna.samplers import BaseSampler

    found: dict[str, np.random.RandomState] = {}
    seen: set[int] = set()

    def walk(obj: Any, prefix: str) -> None:
        if id(obj) in seen:
            return
        seen.add(id(obj))
        for name, value in sorted(vars(obj).items()):
            path = f"{prefix}{name}"
            if isinstance(value, np.random.RandomState):
                found[path] = value
            elif isinstance(getattr(type(value), "rng", None), property) and hasattr(value, "_rng"):
                # Optuna's LazyRandomState: its generator, made now if not yet.
                rng = value.rng
                if isinstance(rng, np.random.RandomState):
                    found[path] = rng
            elif isinstance(value, BaseSampler):
                walk(value, f"{path}.")

    walk(sampler, "")
    return found


def _sampler_state(sampler: Any) -> dict[str, Any]:
    """JSON-able: the sampler's class and each generator's MT19937 state."""
    generators = {}
    for path, rng in _sampler_generators(sampler).items():
        kind, key, pos, has_gauss, gauss = rng.get_state(legacy=True)
        generators[path] = {
            "kind": kind,
            "key": np.asarray(key).tolist(),
            "pos": int(pos),
            "has_gauss": int(has_gauss),
            "gauss": float(gauss),
        }
    cls = type(sampler)
    return {"class": f"{cls.__module__}.{cls.__qualname__}", "generators": generators}


def _check_sampler_state(state: Any) -> None:
    if not isinstance(state, dict) or not isinstance(state.get("class"), str):
        raise TypeError(f"sampler must be an object with a class name, got {state!r}")
    generators = state.get("generators")
    if not isinstance(generators, dict):
        raise TypeError("sampler.generators must be an object")
    for path, g in generators.items():
        if not isinstance(g, dict) or g.get("kind") != "MT19937":
            raise ValueError(f"sampler generator {path!r} is not an MT19937 state: {g!r}")
        if not isinstance(g.get("key"), list) or len(g["key"]) != 624:
            raise ValueError(f"sampler generator {path!r} needs a key of 624 words")


def _restore_sampler_state(sampler: Any, state: dict[str, Any]) -> None:
    """Sets ``sampler``'s generators to the saved ones; warns where the restored sampler
    cannot go on as the saved one would have."""
    from optuna import samplers

    cls = type(sampler)
    name = f"{cls.__module__}.{cls.__qualname__}"
    saved = state["generators"]
    if state["class"] != name:
        warnings.warn(
            f"OptunaSearch: the saved state is of a {state['class']}, the resuming call "
            f"passes a {name}: its random generators are not restored, and its "
            "suggestions differ from an uninterrupted run.",
            stacklevel=3,
        )
        return
    generators = _sampler_generators(sampler)
    if set(generators) != set(saved):
        warnings.warn(
            f"OptunaSearch: the {name} of the resuming call holds random generators "
            f"{sorted(generators)}, the saved one {sorted(saved)}: they are not restored, "
            "and its suggestions differ from an uninterrupted run.",
            stacklevel=3,
        )
        return
    for path, g in saved.items():
        key = np.asarray(g["key"], dtype=np.uint32)
        generators[path].set_state(("MT19937", key, g["pos"], g["has_gauss"], g["gauss"]))
    if not saved:
        warnings.warn(
            f"OptunaSearch: no random generator was found in the {name}, and the rest of "
            "its state cannot be saved without pickle: its suggestions after the restore "
            "may differ from an uninterrupted run.",
            stacklevel=3,
        )
    elif not any(getattr(samplers, n) is cls for n in _GENERATOR_ONLY_SAMPLERS):
        warnings.warn(
            f"OptunaSearch: the {name}'s random generators are restored, but the rest of "
            "its state (kept in trials' system or user attributes, or in the sampler "
            "itself) cannot be saved without pickle: its suggestions after the restore "
            "may differ from an uninterrupted run.",
            stacklevel=3,
        )


def _number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"expected a number, got {value!r}")
    return float(value)


__all__ = ["OptunaSearch"]
