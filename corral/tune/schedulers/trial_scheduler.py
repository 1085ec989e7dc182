"""The scheduler interface of Ray Tune 1.13, and its default, ``FIFOScheduler``.

A scheduler sees every result of every trial (``on_trial_result``) and answers what the
trial does next: go on (``CONTINUE``), pause and let another trial train (``PAUSE``,
the trial is checkpointed and built again later) or end now (``STOP``). It also picks
which pending or paused trial starts when a slot is free (``choose_trial_to_run``).

``tune.run`` calls these hooks with its ``TrialRunner``
(``corral.tune.trial_runner``) as ``trial_runner``; ``trial_runner.get_trials()``
lists every trial of the run.
"""

from __future__ import annotations

from typing import Any

from corral.tune.trial import Trial


class TrialScheduler:
    """Decides, result by result, whether each trial goes on, pauses or stops."""

    CONTINUE = "CONTINUE"
    PAUSE = "PAUSE"
    STOP = "STOP"
    # The scheduler already acted on the trial (e.g. paused it itself): nothing to do.
    NOOP = "NOOP"

    # Whether the trials should train together (taking turns, an iteration each) when
    # `tune.run(max_concurrent_trials=...)` is not set; else one trial after another.
    # Population-based training needs its population alive at once.
    trains_trials_together = False

    _metric: str | None = None
    _mode: str | None = None

    @property
    def metric(self) -> str | None:
        """The result key the scheduler compares trials by."""
        return self._metric

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        """Takes ``tune.run``'s ``metric`` and ``mode`` where the scheduler has none;
        False when it already has a different one (Tune's rule: set them in one place)."""
        if self._metric and metric and self._metric != metric:
            return False
        if self._mode and mode and self._mode != mode:
            return False
        if metric:
            self._metric = metric
        if mode:
            self._mode = mode
        return True

    def on_trial_add(self, trial_runner: Any, trial: Trial) -> None:
        """A trial joined the run (before it starts)."""

    def on_trial_error(self, trial_runner: Any, trial: Trial) -> None:
        """A trial failed for good."""

    def on_trial_result(self, trial_runner: Any, trial: Trial, result: dict) -> str:
        """What ``trial`` does after ``result``: CONTINUE, PAUSE, STOP or NOOP."""
        raise NotImplementedError

    def on_trial_complete(self, trial_runner: Any, trial: Trial, result: dict) -> None:
        """A trial ended (its stop rule, ``done``, or this scheduler's STOP)."""

    def on_trial_remove(self, trial_runner: Any, trial: Trial) -> None:
        """A trial left the run without completing (ended while not running)."""

    def choose_trial_to_run(self, trial_runner: Any) -> Trial | None:
        """The trial to start (or resume) in a free slot; None: none now."""
        raise NotImplementedError

    def debug_string(self) -> str:
        """A line on the scheduler's state, for progress output."""
        return type(self).__name__

    def _metric_op(self) -> float:
        """+1 to compare results as they are (``mode="max"``), -1 to compare them negated.

        Raises:
            ValueError: the scheduler has no metric or no mode of "max" or "min".
        """
        if not self._metric or self._mode not in ("max", "min"):
            raise ValueError(
                f"{type(self).__name__} needs a metric and a mode of 'max' or 'min' (pass "
                f"them to it or to tune.run), got metric={self._metric!r}, mode={self._mode!r}"
            )
        return 1.0 if self._mode == "max" else -1.0


class FIFOScheduler(TrialScheduler):
    """Tune's default: trials start in the order they were made, each trains until its
    stop rule; pending trials start before paused ones resume."""

    def on_trial_result(self, trial_runner: Any, trial: Trial, result: dict) -> str:
        return TrialScheduler.CONTINUE

    def choose_trial_to_run(self, trial_runner: Any) -> Trial | None:
        for status in (Trial.PENDING, Trial.PAUSED):
            for trial in trial_runner.get_trials():
                if trial.status == status:
                    return trial
        return None
