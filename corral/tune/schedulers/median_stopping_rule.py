"""The median stopping rule (Golovin et al. 2017, Google Vizier), as Ray Tune 1.13's
``MedianStoppingRule``: a trial stops when its best result so far is worse than the
median of the other trials' running means at the same point."""

from __future__ import annotations

import collections
import math
import statistics
from typing import Any

from corral.tune.schedulers.trial_scheduler import FIFOScheduler, TrialScheduler
from corral.tune.trial import Trial


class MedianStoppingRule(FIFOScheduler):
    """Stops (or pauses) a trial whose best result is below the median of the others'
    running means.

    Args:
        time_attr: the result key that measures training progress (it should grow).
        metric: the result key to compare (or ``tune.run(metric=...)``).
        mode: "max" or "min" (or ``tune.run(mode=...)``).
        grace_period: no trial stops before this much ``time_attr``; results before it are
            left out of the running means.
        min_samples_required: how many other trials must have reached this point.
        min_time_slice: Ray Tune's minimum time a resumed trial runs before another
            takes its slot; accepted (corral's trials take turns an iteration at a time).
        hard_stop: stop the trial (False: pause it; it resumes later and is not judged
            again).
    """

    def __init__(
        self,
        time_attr: str = "time_total_s",
        metric: str | None = None,
        mode: str | None = None,
        grace_period: float = 60.0,
        min_samples_required: int = 3,
        min_time_slice: float = 0,
        hard_stop: bool = True,
    ) -> None:
        if mode not in (None, "max", "min"):
            raise ValueError(f"mode must be 'max' or 'min', got {mode!r}")
        if isinstance(min_samples_required, bool) or not isinstance(min_samples_required, int):
            raise ValueError(f"min_samples_required must be an int, got {min_samples_required!r}")
        self._time_attr = time_attr
        self._metric, self._mode = metric, mode
        self._grace_period = grace_period
        self._min_samples_required = min_samples_required
        self._min_time_slice = min_time_slice
        self._hard_stop = hard_stop
        self._stopped: set[str] = set()
        # trial_id -> its results' (time, value), value higher-is-better.
        self._results: dict[str, list[tuple[float, float]]] = collections.defaultdict(list)

    def on_trial_add(self, trial_runner: Any, trial: Trial) -> None:
        self._metric_op()  # a clear error now rather than at the first result

    def on_trial_result(self, trial_runner: Any, trial: Trial, result: dict) -> str:
        if self._time_attr not in result or self._metric not in result:
            return TrialScheduler.CONTINUE
        if trial.trial_id in self._stopped:
            return TrialScheduler.CONTINUE  # paused once (hard_stop=False): runs on
        now = result[self._time_attr]
        self._record(trial, result)
        if now <= self._grace_period:
            return TrialScheduler.CONTINUE
        means = [
            self._running_mean(tid, now)
            for tid, results in self._results.items()
            if tid != trial.trial_id and results[-1][0] >= now
        ]
        means = [m for m in means if not math.isnan(m)]
        if len(means) < self._min_samples_required:
            return TrialScheduler.CONTINUE
        median = statistics.median(means)
        best = max(value for _, value in self._results[trial.trial_id])
        if best < median:
            self._stopped.add(trial.trial_id)
            return TrialScheduler.STOP if self._hard_stop else TrialScheduler.PAUSE
        return TrialScheduler.CONTINUE

    def on_trial_complete(self, trial_runner: Any, trial: Trial, result: dict) -> None:
        if self._time_attr in result and self._metric in result:
            results = self._results[trial.trial_id]
            if not results or results[-1][0] != result[self._time_attr]:
                self._record(trial, result)

    def _record(self, trial: Trial, result: dict) -> None:
        value = self._metric_op() * result[self._metric]
        self._results[trial.trial_id].append((result[self._time_attr], value))

    def _running_mean(self, trial_id: str, now: float) -> float:
        """The mean of a trial's results from the grace period up to ``now``."""
        scoped = [v for t, v in self._results[trial_id] if self._grace_period <= t <= now]
        return statistics.fmean(scoped) if scoped else math.nan

    def debug_string(self) -> str:
        return f"Using MedianStoppingRule: num_stopped={len(self._stopped)}."
