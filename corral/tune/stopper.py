"""Ray Tune 1.13's stoppers (``ray.tune.stopper``), for ``tune.run(stop=...)``.

A stopper is called after each result as ``stopper(trial_id, result)`` (True: that trial
stops) and asked after each step of the loop ``stopper.stop_all()`` (True: every trial
stops, the waiting ones never start). ``tune.run`` also takes a dict of thresholds or a
plain function (``corral.tune.stopping``: the one rule for those); a stopper is the
object form. Any object with both methods works (a ``ray.tune.Stopper`` too).
"""

from __future__ import annotations

import datetime
import logging
import math
import statistics
import time
from collections import defaultdict, deque
from collections.abc import Callable
from typing import Any

from corral.tune.stopping import lookup_result

logger = logging.getLogger(__name__)

__all__ = [
    "CombinedStopper",
    "ExperimentPlateauStopper",
    "FunctionStopper",
    "MaximumIterationStopper",
    "NoopStopper",
    "Stopper",
    "TimeoutStopper",
    "TrialPlateauStopper",
]


class Stopper:
    """Base class of stoppers: override ``__call__`` and ``stop_all``."""

    def __call__(self, trial_id: str, result: dict) -> bool:
        """Whether the trial ``trial_id`` stops after ``result``."""
        raise NotImplementedError(f"{type(self).__name__} must implement __call__")

    def stop_all(self) -> bool:
        """Whether the whole experiment stops now."""
        raise NotImplementedError(f"{type(self).__name__} must implement stop_all")


class CombinedStopper(Stopper):
    """Stops a trial (or the experiment) when any of ``stoppers`` does. Every stopper
    sees every result (none is skipped because another already said stop)."""

    def __init__(self, *stoppers: Stopper) -> None:
        self._stoppers = stoppers

    def __call__(self, trial_id: str, result: dict) -> bool:
        return any([stopper(trial_id, result) for stopper in self._stoppers])

    def stop_all(self) -> bool:
        return any([stopper.stop_all() for stopper in self._stoppers])


class NoopStopper(Stopper):
    """Never stops anything."""

    def __call__(self, trial_id: str, result: dict) -> bool:
        return False

    def stop_all(self) -> bool:
        return False


class FunctionStopper(Stopper):
    """A ``function(trial_id, result) -> bool`` as a stopper (it never stops all)."""

    def __init__(self, function: Callable[[str, dict], bool]) -> None:
        self._fn = function

    def __call__(self, trial_id: str, result: dict) -> bool:
        return bool(self._fn(trial_id, result))

    def stop_all(self) -> bool:
        return False

    @classmethod
    def is_valid_function(cls, fn: Any) -> bool:
        """Whether ``fn`` is a plain function to wrap (not a stopper already).

        Raises:
            ValueError: a callable with a ``stop_all`` that is no ``Stopper`` (Ray Tune's
                rule: subclass ``Stopper`` to be taken as one).
        """
        is_function = callable(fn) and not isinstance(fn, Stopper)
        if is_function and hasattr(fn, "stop_all"):
            raise ValueError(
                f"{fn!r} has a stop_all but is not a corral.tune.Stopper: subclass Stopper "
                "so that it is taken as one"
            )
        return is_function


class MaximumIterationStopper(Stopper):
    """Stops each trial after ``max_iter`` results (counted by this stopper)."""

    def __init__(self, max_iter: int) -> None:
        if isinstance(max_iter, bool) or not isinstance(max_iter, int) or max_iter < 1:
            raise ValueError(f"max_iter must be an int >= 1, got {max_iter!r}")
        self._max_iter = max_iter
        self._iter: defaultdict[str, int] = defaultdict(int)

    def __call__(self, trial_id: str, result: dict) -> bool:
        self._iter[trial_id] += 1
        return self._iter[trial_id] >= self._max_iter

    def stop_all(self) -> bool:
        return False


class ExperimentPlateauStopper(Stopper):
    """Stops the whole experiment once the ``top`` best values of ``metric`` seen so
    far (over all trials) have a standard deviation of at most ``std``, for more than
    ``patience`` results in a row.

    Args:
        metric: the result key to watch (nested keys joined by "/").
        std: the standard deviation (population) at or below which the top values
            have plateaued; a float > 0.
        top: how many of the best values to compare; an int > 1.
        mode: "min" or "max": which values are best.
        patience: how many more results to wait once plateaued; an int >= 0.
    """

    def __init__(
        self,
        metric: str,
        std: float = 0.001,
        top: int = 10,
        mode: str = "min",
        patience: int = 0,
    ) -> None:
        if mode not in ("min", "max"):
            raise ValueError(f"mode must be 'min' or 'max', got {mode!r}")
        if isinstance(top, bool) or not isinstance(top, int) or top <= 1:
            raise ValueError(f"top must be an int > 1, got {top!r}")
        if isinstance(patience, bool) or not isinstance(patience, int) or patience < 0:
            raise ValueError(f"patience must be an int >= 0, got {patience!r}")
        if not isinstance(std, float) or not std > 0:
            raise ValueError(f"std must be a float > 0, got {std!r}")
        self._metric, self._mode = metric, mode
        self._std, self._top, self._patience = std, top, patience
        self._iterations = 0
        self._top_values: list[float] = []

    def __call__(self, trial_id: str, result: dict) -> bool:
        value = lookup_result(result, self._metric)
        if value is None:
            raise ValueError(
                f"ExperimentPlateauStopper: the result of trial {trial_id} has no {self._metric!r}"
            )
        ranked = sorted([*self._top_values, value])
        self._top_values = ranked[: self._top] if self._mode == "min" else ranked[-self._top :]
        self._iterations = self._iterations + 1 if self.has_plateaued() else 0
        return self.stop_all()

    def has_plateaued(self) -> bool:
        """Whether the top values are ``top`` many and within ``std`` of each other."""
        return (
            len(self._top_values) == self._top and statistics.pstdev(self._top_values) <= self._std
        )

    def stop_all(self) -> bool:
        return self.has_plateaued() and self._iterations >= self._patience


class TrialPlateauStopper(Stopper):
    """Stops a trial whose last ``num_results`` values of ``metric`` have a standard
    deviation (population) below ``std``, once it has reported ``grace_period`` results.

    Args:
        metric: the result key to watch (nested keys joined by "/").
        std: the standard deviation below which the trial has plateaued.
        num_results: how many of the trial's latest values to compare.
        grace_period: no stop before this many results of the trial.
        metric_threshold: with ``mode``, the value the latest result must reach (at least
            it for "max", at most it for "min") before the trial may stop.
        mode: "min" or "max"; needed with ``metric_threshold``.
    """

    def __init__(
        self,
        metric: str,
        std: float = 0.01,
        num_results: int = 4,
        grace_period: int = 4,
        metric_threshold: float | None = None,
        mode: str | None = None,
    ) -> None:
        if metric_threshold is not None and mode not in ("min", "max"):
            raise ValueError(
                f"TrialPlateauStopper(metric_threshold=...) needs mode 'min' or 'max', got {mode!r}"
            )
        self._metric, self._mode = metric, mode
        self._std = std
        self._num_results = num_results
        self._grace_period = grace_period
        self._metric_threshold = metric_threshold
        self._iter: defaultdict[str, int] = defaultdict(int)
        self._trial_results: defaultdict[str, deque] = defaultdict(
            lambda: deque(maxlen=self._num_results)
        )

    def __call__(self, trial_id: str, result: dict) -> bool:
        value = lookup_result(result, self._metric)
        values = self._trial_results[trial_id]
        values.append(value)
        self._iter[trial_id] += 1
        if self._iter[trial_id] < self._grace_period or len(values) < self._num_results:
            return False
        if self._metric_threshold is not None and isinstance(value, int | float):
            if self._mode == "min" and value > self._metric_threshold:
                return False
            if self._mode == "max" and value < self._metric_threshold:
                return False
        try:
            spread = statistics.pstdev(values)
        except (TypeError, ValueError):
            spread = math.inf  # a value missing or not a number: no plateau
        return spread < self._std

    def stop_all(self) -> bool:
        return False


class TimeoutStopper(Stopper):
    """Stops every trial once ``timeout`` (seconds or a ``timedelta``) has passed,
    counted from the first ``stop_all()`` call (the first step of the loop)."""

    def __init__(self, timeout: float | datetime.timedelta) -> None:
        if isinstance(timeout, datetime.timedelta):
            seconds = timeout.total_seconds()
        elif isinstance(timeout, int | float) and not isinstance(timeout, bool):
            seconds = float(timeout)
        else:
            raise ValueError(
                f"timeout must be seconds or a datetime.timedelta, got {type(timeout).__name__}"
            )
        self._timeout_seconds = seconds
        self._budget = seconds
        self._last_check: float | None = None

    def __call__(self, trial_id: str, result: dict) -> bool:
        return False

    def stop_all(self) -> bool:
        now = time.monotonic()
        if self._last_check is not None:
            self._budget -= now - self._last_check
        self._last_check = now
        if self._budget <= 0:
            logger.info(
                "Reached the timeout of %s seconds: every trial stops", self._timeout_seconds
            )
            return True
        return False
