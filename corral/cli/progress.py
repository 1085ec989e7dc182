"""``corral train``'s live display: one line per iteration, rewritten in place on a terminal."""

from __future__ import annotations

import shutil
from collections.abc import Mapping
from typing import IO, Any

from corral.tune.result import (
    EPISODE_REWARD_MAX,
    EPISODE_REWARD_MEAN,
    EPISODE_REWARD_MIN,
    EVALUATION_REWARD_MEAN,
    TIME_THIS_ITER_S,
    TIME_TOTAL_S,
    TIMESTEPS_THIS_ITER,
    TIMESTEPS_TOTAL,
    TRAINING_ITERATION,
)
from corral.tune.stopping import is_number, lookup_result


class ProgressDisplay:
    """Shows one line per training iteration.

    On a terminal the line is rewritten in place (``\\r``) so that a long run
    does not scroll; in a log file or pipe every iteration gets its own line,
    which is what a later reader of that log needs.
    """

    def __init__(
        self, stream: IO[str], enabled: bool = True, stop: Mapping[str, float] | None = None
    ) -> None:
        self.stream = stream
        self.enabled = enabled
        self.live = enabled and _is_tty(stream)
        self.stop = dict(stop or {})
        self._pending = False
        self._last_evaluation: dict[str, float] = {}  # by label

    def update(self, result: Mapping, label: str = "") -> None:
        """Shows the figures of one iteration's result (after ``label``, e.g. the trial's
        name when several trials take turns)."""
        if not self.enabled:
            return
        evaluation = lookup_result(result, EVALUATION_REWARD_MEAN)
        if is_number(evaluation):
            self._last_evaluation[label] = evaluation
        last = self._last_evaluation.get(label)
        line = label + format_progress(result, last, time_left(self.stop, result))
        if self.live:
            width = shutil.get_terminal_size().columns - 1
            self.stream.write("\r" + line[:width] + "\x1b[K")
            self._pending = True
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def message(self, text: str) -> None:
        """Prints a line of its own (e.g. "checkpoint saved") without breaking the live line."""
        self.end_line()
        self.stream.write(text + "\n")
        self.stream.flush()

    def end_line(self) -> None:
        """Moves past the live line so that what follows starts on a new line."""
        if self._pending:
            self.stream.write("\n")
            self.stream.flush()
            self._pending = False


def _is_tty(stream: IO[str]) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def format_progress(
    result: Mapping, last_evaluation: float | None = None, left: float | None = None
) -> str:
    """One progress line, e.g.
    ``iter 3 | steps 768 | reward 21.4 [9, 60] | eval 80.0 | 912 steps/s | 0:00:02 | 0:00:30 left``.

    ``eval`` is this iteration's evaluation return, else ``last_evaluation`` (the
    latest one); ``left`` is the estimated time to the nearest stop criterion.
    """
    parts = [
        f"iter {result.get(TRAINING_ITERATION, 0)}",
        f"steps {result.get(TIMESTEPS_TOTAL) or 0:,}",
        f"reward {_fmt(result.get(EPISODE_REWARD_MEAN))} "
        f"[{_fmt(result.get(EPISODE_REWARD_MIN))}, {_fmt(result.get(EPISODE_REWARD_MAX))}]",
    ]
    evaluation = lookup_result(result, EVALUATION_REWARD_MEAN)
    if not is_number(evaluation):
        evaluation = last_evaluation
    if evaluation is not None:
        parts.append(f"eval {_fmt(evaluation)}")
    parts.append(f"{_steps_per_second(result):,.0f} steps/s")
    parts.append(format_duration(result.get(TIME_TOTAL_S) or 0.0))
    if left is not None:
        parts.append(f"{format_duration(left)} left")
    return " | ".join(parts)


# Stop keys whose progress grows steadily with time, so the time to reach them can be estimated.
_PROGRESS_KEYS = (TIMESTEPS_TOTAL, TRAINING_ITERATION, TIME_TOTAL_S)


def time_left(stop: Mapping[str, float], result: Mapping) -> float | None:
    """Seconds until the first of the steadily growing stop criteria is reached (None: none).

    Return criteria (e.g. ``evaluation/episode_reward_mean``) may end the run
    earlier; no one can say when.
    """
    elapsed = result.get(TIME_TOTAL_S) or 0.0
    estimates = []
    for key in _PROGRESS_KEYS:
        threshold, value = stop.get(key), result.get(key)
        if is_number(threshold) and is_number(value) and value > 0 and elapsed > 0:
            estimates.append(max(0.0, (threshold - value) * elapsed / value))
    return min(estimates) if estimates else None


def _steps_per_second(result: Mapping) -> float:
    seconds = result.get(TIME_THIS_ITER_S) or 0.0
    return (result.get(TIMESTEPS_THIS_ITER) or 0) / seconds if seconds > 0 else 0.0


def _fmt(value: Any) -> str:
    return f"{value:.1f}" if is_number(value) else "n/a"


def format_duration(seconds: float) -> str:
    """``h:mm:ss``, the way elapsed training time is usually read."""
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"
