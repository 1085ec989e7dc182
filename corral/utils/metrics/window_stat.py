"""RLlib's ``WindowStat``: mean/std/quantiles of the last ``n`` values of one metric."""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["WindowStat"]


class WindowStat:
    """Keeps the last `n` values pushed under `name`.

    Args:
        name: the metric's name (the keys of :meth:`stats` start with it).
        n: the window size.
    """

    def __init__(self, name: str, n: int) -> None:
        self.name = name
        self.items: list[Any] = [None] * n
        self.idx = 0
        self.count = 0

    def push(self, obj: Any) -> None:
        """Adds a value (replacing the oldest once the window is full)."""
        self.items[self.idx] = obj
        self.idx += 1
        self.count += 1
        self.idx %= len(self.items)

    def mean(self) -> float:
        """The (NaN-ignoring) mean of the window (NaN while it is empty)."""
        return float(np.nanmean(self.items[: self.count])) if self.count else float("nan")

    def std(self) -> float:
        """The (NaN-ignoring) standard deviation of the window (NaN while it is empty)."""
        return float(np.nanstd(self.items[: self.count])) if self.count else float("nan")

    def quantiles(self) -> list[float]:
        """The 0, 10, 50, 90 and 100 percentiles of the window ([] while it is empty)."""
        if not self.count:
            return []
        return np.nanpercentile(self.items[: self.count], [0, 10, 50, 90, 100]).tolist()

    def stats(self) -> dict[str, Any]:
        """``<name>_count``, ``_mean``, ``_std``, ``_quantiles`` of the window."""
        return {
            self.name + "_count": int(self.count),
            self.name + "_mean": self.mean(),
            self.name + "_std": self.std(),
            self.name + "_quantiles": self.quantiles(),
        }
