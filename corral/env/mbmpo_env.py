"""Classic-control envs with a batched reward function, for model-based algorithms (MB-MPO).

RLlib 1.13's ``examples/env/mbmpo_env.py`` on Gymnasium: MB-MPO steps learned dynamics models
instead of the env and rewards those steps with the env's own ``reward(obs, action,
obs_next)``, which takes batches (one row per transition) and returns one reward per row.
Registered as ``"CartPoleWithReward"`` and ``"PendulumWithReward"``. The env's
``env_config`` may set ``max_episode_steps`` (the registered Gymnasium ids' time limits by
default) and ``render_mode``. (RLlib's MuJoCo wrappers, HalfCheetah and Hopper, are not
here: they need MuJoCo.)
"""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium.envs.classic_control import CartPoleEnv, PendulumEnv


class _TimeLimit:
    """Truncates an episode after `max_episode_steps` steps (what `gymnasium.make` adds to
    the registered ids, which a class built directly lacks)."""

    max_episode_steps: int
    _elapsed = 0

    def _set_time_limit(self, config: Any, default: int) -> None:
        steps = (config or {}).get("max_episode_steps", default)
        if isinstance(steps, bool) or not isinstance(steps, int) or steps < 1:
            raise ValueError(f"`max_episode_steps` must be an int >= 1, got {steps!r}.")
        self.max_episode_steps = steps

    def _count_step(self, truncated: bool) -> bool:
        self._elapsed += 1
        return truncated or self._elapsed >= self.max_episode_steps


class CartPoleWrapper(_TimeLimit, CartPoleEnv):
    """CartPole (as ``CartPole-v1``: 500 steps at most) with a batched `reward` and `done`.

    Args:
        config: the env config: ``max_episode_steps`` (500), ``render_mode``.
    """

    def __init__(self, config: Any = None) -> None:
        CartPoleEnv.__init__(self, render_mode=(config or {}).get("render_mode"))
        self._set_time_limit(config, 500)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        self._elapsed = 0
        return super().reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple:
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated, self._count_step(truncated), info

    def _out_of_bounds(self, obs: np.ndarray) -> np.ndarray:
        x, theta = obs[:, 0], obs[:, 2]
        return (np.abs(x) > self.x_threshold) | (np.abs(theta) > self.theta_threshold_radians)

    def reward(self, obs: np.ndarray, action: np.ndarray, obs_next: np.ndarray) -> np.ndarray:
        """1 for each transition whose next state (cart position, pole angle) is within
        bounds, 0 otherwise (RLlib's rule)."""
        return 1.0 - self._out_of_bounds(np.asarray(obs_next)).astype(np.float32)

    def done(self, obs_next: np.ndarray) -> np.ndarray:
        """Whether each next state is out of bounds (the episode ends there)."""
        return self._out_of_bounds(np.asarray(obs_next))


class PendulumWrapper(_TimeLimit, PendulumEnv):
    """Pendulum (as ``Pendulum-v1``: 200 steps) with a batched `reward`.

    Args:
        config: the env config: ``max_episode_steps`` (200), ``render_mode``, ``g`` (10.0).
    """

    def __init__(self, config: Any = None) -> None:
        config = config or {}
        PendulumEnv.__init__(self, render_mode=config.get("render_mode"), g=config.get("g", 10.0))
        self._set_time_limit(config, 200)

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        self._elapsed = 0
        return super().reset(seed=seed, options=options)

    def step(self, action: Any) -> tuple:
        obs, reward, terminated, truncated, info = super().step(action)
        return obs, reward, terminated, self._count_step(truncated), info

    def reward(self, obs: np.ndarray, action: np.ndarray, obs_next: np.ndarray) -> np.ndarray:
        """Minus Pendulum's cost of each transition, from the observation before the step
        ``[cos(theta), sin(theta), theta_dot]`` and the torque (clipped to its bound):
        ``angle_normalize(theta)**2 + 0.1 * theta_dot**2 + 0.001 * torque**2``."""
        obs = np.asarray(obs)
        theta = np.arctan2(np.clip(obs[:, 1], -1.0, 1.0), np.clip(obs[:, 0], -1.0, 1.0))
        torque = np.clip(
            np.asarray(action).reshape(len(obs), -1)[:, 0], -self.max_torque, self.max_torque
        )
        costs = self.angle_normalize(theta) ** 2 + 0.1 * obs[:, 2] ** 2 + 0.001 * torque**2
        return -costs

    @staticmethod
    def angle_normalize(x: np.ndarray) -> np.ndarray:
        """`x` wrapped into [-pi, pi)."""
        return ((x + np.pi) % (2 * np.pi)) - np.pi


__all__ = ["CartPoleWrapper", "PendulumWrapper"]
