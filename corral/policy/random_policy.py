"""`RandomPolicy`: acts uniformly at random in its action space and never learns.

RLlib keeps one among its examples (`ray.rllib.examples.policy.random_policy`); corral's
AlphaStar league starts with such policies as the first opponents, and any league or
baseline may use it. It has no weights, so a league copies and syncs it for free.
"""

from __future__ import annotations

import copy
from typing import Any

import gymnasium as gym
import numpy as np

from corral.policy.policy import Policy
from corral.utils.spaces import unflatten_actions


class RandomPolicy(Policy):
    """Samples each action from the action space, with a generator seeded from numpy's
    (which a rollout worker seeds from `config["seed"]` and its index: workers draw
    differently and runs repeat).

    Tuple/Dict actions travel as the sampler keeps them, flat float32 rows, and reach
    the env nested (`to_env_actions`).
    """

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict) -> None:
        super().__init__(observation_space, action_space, config)
        # A copy to draw from: seeding the space itself would reseed the env's (shared) one.
        self._sampling_space = copy.deepcopy(action_space)
        self._sampling_space.seed(int(np.random.randint(2**31)))
        self._nested = isinstance(action_space, gym.spaces.Tuple | gym.spaces.Dict)

    def compute_actions(
        self,
        obs_batch: Any,
        state_batches: list | None = None,
        prev_action_batch: Any = None,
        prev_reward_batch: Any = None,
        info_batch: Any = None,
        episodes: list | None = None,
        explore: bool | None = None,
        timestep: int | None = None,
        **kwargs: Any,
    ) -> tuple[Any, list, dict]:
        n = len(obs_batch)
        samples = [self._sampling_space.sample() for _ in range(n)]
        if self._nested:  # RLlib's form: one nested action per row
            return samples, [], {}
        return np.asarray(samples), [], {}

    def to_env_actions(self, actions: np.ndarray, unsquash: bool, clip: bool) -> Any:
        """Actions for the env: nested ones rebuilt from their flat rows (sampled inside
        the space, so neither unsquashed nor clipped)."""
        if self._nested:
            return unflatten_actions(self.action_space, actions)
        return actions
