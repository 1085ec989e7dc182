"""What an env may return as a reward: a real number (Python's, numpy's, a 0-d array).

Text is refused even where it reads as a number ("1.0"): `float()` and numpy would convert
it silently, and an env that returns it has a bug the user should see (RLlib 1.13's env
check refused any reward that was not an int or a float).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def as_reward(reward: Any, call: str) -> float:
    """`reward` as a float.

    Args:
        reward: what the env (or an `ExternalEnv` / `PolicyClient` caller) gave.
        call: the call that gave it, for the message (e.g. "log_returns(...)").

    Raises:
        TypeError: `reward` is text or no number; the message names `call` and the value.
    """
    if not isinstance(reward, str | bytes):
        try:
            return float(reward)
        except (TypeError, ValueError):
            pass
    raise TypeError(f"{call}: the reward {reward!r} (a {type(reward).__name__}) is no number.")


def has_text(rewards: Iterable[Any]) -> bool:
    """Whether a sequence of rewards holds a `str` (which numpy would convert silently
    when writing it into a float array); one C-level pass, cheap enough per step."""
    return str in map(type, rewards)
