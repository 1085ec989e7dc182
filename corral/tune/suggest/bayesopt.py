"""Ray Tune 1.13's ``ray.tune.suggest.bayesopt``: ``BayesOptSearch``, suggestions from
`BayesianOptimization <https://github.com/bayesian-optimization/BayesianOptimization>`_
(a Gaussian process over continuous parameters; the ``bayesopt`` extra: ``pip install
'corral[bayesopt]'``)."""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from corral.tune.search import Domain, LogUniform, Uniform
from corral.tune.suggest.ask_tell import AskTellSearcher
from corral.tune.suggest.library_searcher import import_library
from corral.tune.suggest.suggestion import Searcher
from corral.tune.suggest.variant_generator import unflatten_dict

logger = logging.getLogger(__name__)


class BayesOptSearch(AskTellSearcher):
    """Suggests each trial's config with BayesianOptimization's Gaussian process (its
    ``suggest`` with a utility function) and registers each trial's metric (negated for
    ``mode="min"``: the library maximises).

    Args:
        space: the search space: corral ``uniform`` (and ``loguniform``, searched
            linearly between its bounds, with a warning) search spaces, or ``(low,
            high)`` bounds by name. None: ``tune.run``'s config is the search space.
            Choices and integers are refused.
        metric: the result key to optimise (or ``tune.run(metric=...)``; default
            ``"_metric"``).
        mode: "min" or "max" (or ``tune.run(mode=...)``).
        points_to_evaluate: configs to run first, in order; each gives a value for
            every parameter.
        utility_kwargs: the utility function's ``kind`` ("ucb", "ei" or "poi"),
            ``kappa`` and ``xi`` (default ``{"kind": "ucb", "kappa": 2.576, "xi": 0.0}``).
        random_state: the seed of the library's random draws.
        random_search_steps: how many trials are drawn at random before the Gaussian
            process models them: their results are held back until they all ended
            (no more trials are suggested meanwhile).
        verbose: the library's verbosity.
        patience: once a config (values rounded to ``repeat_float_precision`` digits)
            was suggested more than this many times, the search is finished.
        skip_duplicate: a config suggested before is not run again (the suggestion is
            skipped: asked again later).
        analysis: an ``ExperimentAnalysis`` of earlier trials (their configs and last
            results) to register before the first suggestion.
        max_concurrent: Ray Tune's old argument, refused (``ConcurrencyLimiter``).
        use_early_stopped_trials: Ray Tune's old argument; False is refused.

    A trial that errors, ends without a result, or whose metric is not a finite number
    is not registered.

    Its state for ``tune.run(resume=...)`` is JSON: every point's parameters and loss,
    in order, registered again in a fresh optimizer on restore (whose random draws start
    from a seed derived from ``random_state`` and the number of points replayed).
    """

    def __init__(
        self,
        space: Mapping[str, Any] | None = None,
        metric: str | None = None,
        mode: str | None = None,
        points_to_evaluate: Sequence[Mapping] | None = None,
        utility_kwargs: Mapping[str, Any] | None = None,
        random_state: int = 42,
        random_search_steps: int = 10,
        verbose: int = 0,
        patience: int = 5,
        skip_duplicate: bool = True,
        analysis: Any = None,
        max_concurrent: int | None = None,
        use_early_stopped_trials: bool | None = None,
    ) -> None:
        self._byo = import_library("bayes_opt", "BayesOptSearch", "bayesopt")
        super().__init__(metric, mode, points_to_evaluate, max_concurrent, use_early_stopped_trials)
        for what, value, least in (
            ("random_search_steps", random_search_steps, 0),
            ("patience", patience, 1),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < least:
                raise ValueError(f"{what} must be an int >= {least}, got {value!r}")
        if isinstance(random_state, bool) or not isinstance(random_state, int | type(None)):
            raise ValueError(f"random_state must be an int or None, got {random_state!r}")
        utility = {"kind": "ucb", "kappa": 2.576, "xi": 0.0, **(utility_kwargs or {})}
        if utility["kind"] not in ("ucb", "ei", "poi"):
            raise ValueError(
                f"utility_kwargs' kind must be 'ucb', 'ei' or 'poi', got {utility['kind']!r}"
            )
        unknown = sorted(set(utility) - {"kind", "kappa", "xi"})
        if unknown:
            raise ValueError(
                f"utility_kwargs takes kind, kappa and xi, got {', '.join(map(str, unknown))}"
            )
        self._utility = self._byo.UtilityFunction(**utility)
        self._random_state = random_state
        self._random_search_steps = random_search_steps
        self._verbose = verbose
        self._patience = patience
        self._skip_duplicate = bool(skip_duplicate)
        # The digits a config's floats are rounded to when comparing configs.
        self.repeat_float_precision = 5
        self._analysis = analysis
        self._opt: Any = None
        self._replayed = 0  # how many points a restore replays
        self._held: list[tuple[dict[str, Any], float]] = []  # results of the random steps
        self._told = 0  # how many results were registered or held
        self._seen: Counter[str] = Counter()  # how often each config was suggested
        self._take_space(space)

    # -- the search space ----------------------------------------------------

    @classmethod
    def _to_library(cls, name: str, domain: Domain) -> Any:
        if isinstance(domain, LogUniform):
            logger.warning(
                "BayesOptSearch searches %s=%r between its bounds linearly (BayesOpt has no "
                "log scale)",
                name,
                domain,
            )
        if isinstance(domain, Uniform | LogUniform):
            return (domain.lower, domain.upper)
        raise ValueError(
            f"BayesOptSearch searches continuous parameters only (uniform, loguniform), "
            f"not {name}={domain!r}: use tune.uniform, or another searcher"
        )

    def _own_space(self, space: Any) -> Any:
        if not isinstance(space, Mapping) or not space:
            raise TypeError(
                "BayesOptSearch(space=...) takes a dict of (low, high) bounds (or corral "
                f"search spaces), got {space!r}"
            )
        out = {}
        for key, value in space.items():
            if not (
                isinstance(value, tuple | list)
                and len(value) == 2
                and all(isinstance(v, int | float) and not isinstance(v, bool) for v in value)
                and value[0] < value[1]
            ):
                raise TypeError(
                    f"BayesOptSearch's space maps names to (low, high) bounds, got {key}={value!r}"
                )
            out[str(key)] = (float(value[0]), float(value[1]))
        return out

    def _fits_own(self, key: str, value: Any) -> bool:
        low, high = self._space[key]
        return (
            isinstance(value, int | float) and not isinstance(value, bool) and low <= value <= high
        )

    def _param_names(self) -> list[str] | None:
        return list(self._space or ())

    # -- the optimizer -------------------------------------------------------

    def _start(self) -> None:
        seed = self._random_state
        if seed is not None and self._replayed:
            # (Restored: not the first draws again, which would repeat the first trials.)
            seed = int(np.random.SeedSequence([seed, self._replayed]).generate_state(1)[0])
        self._opt = self._byo.BayesianOptimization(
            f=None, pbounds=dict(self._space), verbose=self._verbose, random_state=seed
        )
        self._held, self._told, self._seen = [], 0, Counter()

    def set_state(self, state: dict) -> None:
        """As ``AskTellSearcher.set_state``; the restored optimizer's draws start from a
        seed derived from ``random_state`` and the number of points replayed."""
        trials = state.get("trials") if isinstance(state, Mapping) else None
        self._replayed = len(trials) if isinstance(trials, list) else 0
        super().set_state(state)

    def _warm_start(self) -> None:
        if self._analysis is not None:
            self.register_analysis(self._analysis)

    def register_analysis(self, analysis: Any) -> None:
        """Registers the trials of ``analysis`` (an ``ExperimentAnalysis``): each one's
        config and last result (those without the metric are skipped)."""
        self._ready()
        names = self._param_names() or []
        for trial in analysis.trials:
            result, config = trial.last_result or {}, trial.config
            if self._metric not in result:
                continue
            point = {n: _at_path(config, n) for n in names}
            if any(v is None for v in point.values()):
                continue
            value = self._result_value(trial.trial_id, result)
            if value is not None:
                self._tell_point(unflatten_dict(point), value)

    def _key(self, params: Mapping[str, Any]) -> str:
        digits = self.repeat_float_precision
        return json.dumps({k: f"{float(v):.{digits}f}" for k, v in params.items()}, sort_keys=True)

    def _ask(self) -> tuple[dict[str, Any], Any] | str | None:
        running = sum(r["live"] for r in self._records)
        if self._told < self._random_search_steps and self._told + running >= (
            self._random_search_steps
        ):
            return None  # the random steps wait for their results
        params = {k: float(v) for k, v in self._opt.suggest(self._utility).items()}
        key = self._key(params)
        seen = key in self._seen
        self._seen[key] += 1
        if self._seen[key] > self._patience:
            return Searcher.FINISHED
        if seen and self._skip_duplicate:
            logger.info("BayesOptSearch: skipping a config suggested before: %s", params)
            return None
        self._seen[key] -= 1  # (counted again by _asked)
        return params, None

    def _asked(self, params: dict[str, Any]) -> None:
        self._seen[self._key(params)] += 1

    def _tell(self, params: dict[str, Any], handle: Any, loss: float) -> None:
        self._told += 1
        if self._told <= self._random_search_steps:
            self._held.append((params, -loss))
            if self._told < self._random_search_steps:
                return
            held, self._held = self._held, []
        else:
            held = [(params, -loss)]
        # (BayesOpt holds one value per point: NotUniqueError, KeyError before 1.4.)
        duplicate = (KeyError, getattr(self._byo.util, "NotUniqueError", KeyError))
        for point, target in held:
            try:
                self._opt.register(point, target)
            except duplicate:
                logger.info("BayesOptSearch: %s was registered before; not again", point)


def _at_path(config: Mapping, name: str) -> Any:
    value: Any = config
    for key in name.split("/"):
        if not isinstance(value, Mapping) or key not in value:
            return None
        value = value[key]
    return value


__all__ = ["BayesOptSearch"]
