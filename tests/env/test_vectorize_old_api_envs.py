"""`VectorEnv.vectorize_gym_envs` over old gym API envs, and RLlib 1.13's
`worker.async_env.vector_env`."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from corral.env.vector_env import VectorEnv
from corral.evaluation.rollout_worker import RolloutWorker
from corral.policy.random_policy import RandomPolicy


class OldCounter:
    """The old gym API (reset() -> obs, step() -> 4-tuple), without gym installed."""

    observation_space = gym.spaces.Discrete(3)
    action_space = gym.spaces.Discrete(2)
    metadata: dict = {}

    def __init__(self) -> None:
        self.t = 0

    def reset(self):
        self.t = 0
        return 0

    def step(self, action):
        self.t += 1
        return self.t % 3, 1.0, self.t >= 2, {"t": self.t}


def test_vectorized_old_api_envs_step_as_rllib_s_vector_env():
    with pytest.warns(UserWarning, match="old gym API"):  # converted, as workers convert
        env = VectorEnv.vectorize_gym_envs(make_env=lambda i: OldCounter(), num_envs=3)
    assert env.vector_reset() == [0, 0, 0]
    obs, rewards, dones, infos = env.vector_step([0, 1, 0])
    assert obs == [1, 1, 1] and rewards == [1.0, 1.0, 1.0] and dones == [False] * 3
    assert [i["t"] for i in infos] == [1, 1, 1]


def test_async_env_vector_env_is_the_worker_s_vector_env():
    worker = RolloutWorker(
        env_creator=lambda ctx: gym.make("CartPole-v1"), policy_spec=RandomPolicy, num_envs=2
    )
    vector_env = worker.async_env.vector_env
    assert vector_env is worker.async_env and len(vector_env.envs) == 2
    assert np.shape(vector_env.vector_reset()) == (2, 4)
