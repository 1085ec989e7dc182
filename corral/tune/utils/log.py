"""``ray.tune.utils.log``: how much ``tune.run`` prints (its ``verbose``).

``tune.run`` sets the level at its start, as Ray Tune 1.13 does; progress reporters ask
``has_verbosity`` (a ``CLIReporter`` prints its trial table at the end from level 2 on,
and after every report from level 3 on).
"""

from __future__ import annotations

from enum import Enum


class Verbosity(Enum):
    """``tune.run(verbose=...)``'s levels (an int works the same)."""

    V0_MINIMAL = 0
    V1_EXPERIMENT = 1
    V2_TRIAL_NORM = 2
    V3_TRIAL_DETAILS = 3

    def __int__(self) -> int:
        return self.value


verbosity: Verbosity = Verbosity.V3_TRIAL_DETAILS


def set_verbosity(level: int | Verbosity) -> None:
    """Sets the level (``ValueError`` for an int outside 0..3)."""
    global verbosity
    verbosity = level if isinstance(level, Verbosity) else Verbosity(int(level))


def has_verbosity(level: int | Verbosity) -> bool:
    """Whether the level set is at least ``level``."""
    return int(verbosity) >= int(level)


__all__ = ["Verbosity", "has_verbosity", "set_verbosity"]
