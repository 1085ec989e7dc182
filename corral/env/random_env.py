"""An env with any observation and action spaces and random dynamics, for tests.

Observations are samples of the observation space, rewards are uniform in ``[-1, 1]``,
episodes last ``max_episode_len`` steps. Every action is checked against the action space,
so an env-side type or shape error in nested actions shows up at once.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class RandomEnv(gym.Env):
    """``RandomEnv(config)`` with ``config`` keys ``observation_space``, ``action_space``
    (defaults: ``Box(-1, 1, (4,))`` and ``Discrete(2)``) and ``max_episode_len`` (10)."""

    def __init__(self, config: dict | None = None) -> None:
        config = dict(config or {})
        self.observation_space = config.get(
            "observation_space", gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
        )
        self.action_space = config.get("action_space", gym.spaces.Discrete(2))
        self.max_episode_len = int(config.get("max_episode_len", 10))
        self._t = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        super().reset(seed=seed)
        if seed is not None:
            self.observation_space.seed(seed)
        self._t = 0
        return self.observation_space.sample(), {}

    def step(self, action: Any) -> tuple[Any, float, bool, bool, dict]:
        if not self.action_space.contains(action):
            raise ValueError(f"Action {action!r} is not in the action space {self.action_space}.")
        self._t += 1
        reward = float(self.np_random.uniform(-1.0, 1.0))
        truncated = self._t >= self.max_episode_len
        return self.observation_space.sample(), reward, False, truncated, {}
