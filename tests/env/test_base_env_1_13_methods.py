"""RLlib 1.13's `BaseEnv` methods (spaces, `*_space_contains`, `*_space_sample`,
`get_unwrapped`, `last`) and `VectorEnv`'s `get_unwrapped` / `wrap`."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from corral.env.base_env import DUMMY_AGENT_ID, convert_to_base_env
from corral.env.multi_agent_env import make_multi_agent
from corral.env.vector_env import VectorEnv


def cartpole_base_env(n=2):
    return convert_to_base_env(
        gym.make("CartPole-v1"), make_env=lambda i: gym.make("CartPole-v1"), num_envs=n
    )


def test_single_agent_spaces_contains_and_samples():
    env = cartpole_base_env()
    assert env.observation_space.shape == (4,) and env.action_space.n == 2
    assert env.get_unwrapped() == env.get_sub_environments() and len(env.get_unwrapped()) == 2
    action = env.action_space_sample()
    assert set(action) == {0} and set(action[0]) == {DUMMY_AGENT_ID}
    assert env.action_space.contains(action[0][DUMMY_AGENT_ID])
    obs = env.observation_space_sample()
    assert env.observation_space_contains(obs)
    assert env.action_space_contains({0: {DUMMY_AGENT_ID: 1}, 1: {DUMMY_AGENT_ID: 0}})
    assert not env.action_space_contains({0: {DUMMY_AGENT_ID: 5}})
    assert not env.action_space_contains({0: {"someone_else": 1}})
    bad_obs = np.full(4, 1e9, np.float32)
    assert not env.observation_space_contains({0: {DUMMY_AGENT_ID: bad_obs}})


def test_a_subclass_may_set_its_spaces():
    env = cartpole_base_env(1)
    env.observation_space = gym.spaces.Box(-1, 1, (2,))
    assert env.observation_space.shape == (2,)
    assert env.action_space.n == 2  # still the sub-env's


def test_last_repeats_the_last_poll():
    env = cartpole_base_env()
    assert env.last() == ({}, {}, {}, {}, {})
    polled = env.poll()
    assert env.last() is polled
    env.send_actions({0: {DUMMY_AGENT_ID: 0}, 1: {DUMMY_AGENT_ID: 1}})
    obs, rewards, dones, infos, _ = env.poll()
    assert env.last()[1] == rewards == {0: {DUMMY_AGENT_ID: 1.0}, 1: {DUMMY_AGENT_ID: 1.0}}


def test_multi_agent_base_env_delegates_to_its_first_sub_env():
    cls = make_multi_agent("CartPole-v1")
    env = convert_to_base_env(cls({"num_agents": 2}))
    assert env.get_agent_ids() == {0, 1}
    sample = env.action_space_sample()
    assert set(sample) == {0} and set(sample[0]) == {0, 1}
    assert env.action_space_contains(sample)
    assert not env.action_space_contains({0: {0: 7}})
    assert set(env.observation_space_sample([1])[0]) == {1}
    assert env.observation_space.shape == (4,)


def test_vector_env_get_unwrapped_and_wrap(caplog):
    vec = VectorEnv.wrap(make_env=lambda i: gym.make("CartPole-v1"), existing_envs=[], num_envs=2)
    assert "VectorEnv.vectorize_gym_envs()" in caplog.text  # deprecated, as in RLlib 1.13
    assert vec.num_envs == 2 and len(vec.get_unwrapped()) == 2
    assert vec.get_unwrapped() == vec.get_sub_environments()
