"""CartPole with the velocities hidden: solvable only with memory."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class StatelessCartPole(gym.Env):
    """CartPole-v1 observing only the cart position and the pole angle.

    Without the two velocities the state is not Markov: a feed-forward policy
    sees the same observation whether the pole is falling or rising, so it
    plateaus; an LSTM can infer the velocities from consecutive observations.
    """

    observation_space = gym.spaces.Box(
        np.array([-4.8, -0.42], np.float32), np.array([4.8, 0.42], np.float32)
    )
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config: dict | None = None) -> None:
        self.env = gym.make("CartPole-v1")

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple:
        obs, info = self.env.reset(seed=seed, options=options)
        return self._hide(obs), info

    def step(self, action: Any) -> tuple:
        obs, reward, terminated, truncated, info = self.env.step(action)
        return self._hide(obs), reward, terminated, truncated, info

    @staticmethod
    def _hide(obs: np.ndarray) -> np.ndarray:
        return np.array([obs[0], obs[2]], np.float32)
