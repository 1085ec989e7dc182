"""RLlib 1.13's `ResetOnExceptionWrapper`: an env whose errors reset it instead of ending
the run.

corral's own way is the trainer key `restart_failed_sub_environments`, which recreates a
failed sub-env and drops its episode; this wrapper is for code that wraps its env itself.
"""

from __future__ import annotations

import logging
from typing import Any

import gymnasium as gym

logger = logging.getLogger(__name__)


class TooManyResetAttemptsException(Exception):
    """`reset()` failed `max_attempts` times in a row."""

    def __init__(self, max_attempts: int) -> None:
        super().__init__(
            f"Reached the maximum number of attempts ({max_attempts}) to reset an environment."
        )


class ResetOnExceptionWrapper(gym.Wrapper):
    """Retries a failing `reset()` up to `max_reset_attempts` times; a `step()` that raises
    resets the env and ends the episode as truncated (info `{"__terminated__": True}`;
    the observation is the new episode's first, as RLlib 1.13 returned it).

    Args:
        env: the env to wrap.
        max_reset_attempts: resets tried before `TooManyResetAttemptsException`.
    """

    def __init__(self, env: gym.Env, max_reset_attempts: int = 5) -> None:
        super().__init__(env)
        if isinstance(max_reset_attempts, bool) or not isinstance(max_reset_attempts, int):
            raise ValueError(f"max_reset_attempts must be an int, got {max_reset_attempts!r}")
        if max_reset_attempts < 1:
            raise ValueError(f"max_reset_attempts must be >= 1, got {max_reset_attempts}")
        self.max_reset_attempts = max_reset_attempts

    def reset(self, **kwargs: Any) -> Any:
        for attempt in range(1, self.max_reset_attempts + 1):
            try:
                return self.env.reset(**kwargs)
            except Exception:  # noqa: BLE001 - any error of the env: try again
                logger.exception(
                    "reset() raised (attempt %d of %d)", attempt, self.max_reset_attempts
                )
        raise TooManyResetAttemptsException(self.max_reset_attempts)

    def step(self, action: Any) -> Any:
        try:
            return self.env.step(action)
        except Exception:  # noqa: BLE001 - any error of the env: reset it
            logger.exception("step() raised; resetting the env")
            obs, _ = self.reset()
            return obs, 0.0, False, True, {"__terminated__": True}
