"""RLlib's ``TimerStat``: times a code block (``with timer: ...``) over a sliding window."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

__all__ = ["TimerStat"]


class TimerStat:
    """A running mean of how long a ``with`` block took (not thread-safe, as RLlib's).

    Args:
        window_size: how many of the latest durations (and unit counts) are kept.
    """

    def __init__(self, window_size: int = 10) -> None:
        self._window_size = window_size
        self._samples: list[float] = []
        self._units_processed: list[float] = []
        self._start_time: float | None = None
        self._total_time = 0.0
        self.count = 0

    def __enter__(self) -> None:
        assert self._start_time is None, "concurrent updates not supported"
        self._start_time = time.time()

    def __exit__(self, *exc: Any) -> None:
        assert self._start_time is not None
        self.push(time.time() - self._start_time)
        self._start_time = None

    @property
    def running(self) -> bool:
        """Whether a `with` block of this timer is under way (corral's own timing of the
        same work inside it then stays out: the block times it)."""
        return self._start_time is not None

    def push(self, time_delta: float) -> None:
        """Records one duration (seconds)."""
        self._samples.append(time_delta)
        if len(self._samples) > self._window_size:
            self._samples.pop(0)
        self.count += 1
        self._total_time += time_delta

    def push_units_processed(self, n: float) -> None:
        """Records how many units (e.g. steps) the latest block processed."""
        self._units_processed.append(n)
        if len(self._units_processed) > self._window_size:
            self._units_processed.pop(0)

    def has_units_processed(self) -> bool:
        return len(self._units_processed) > 0

    @property
    def mean(self) -> float:
        """Mean duration over the window (0 when empty)."""
        return float(np.mean(self._samples)) if self._samples else 0.0

    @property
    def mean_units_processed(self) -> float:
        return float(np.mean(self._units_processed)) if self._units_processed else 0.0

    @property
    def mean_throughput(self) -> float:
        """Units processed per second over the window."""
        total = float(sum(self._samples))
        return float(sum(self._units_processed)) / total if total else 0.0
