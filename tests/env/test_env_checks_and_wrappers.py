"""RLlib 1.13's standalone env check (`corral.utils.check_env`) and `ParallelPettingZooEnv`."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from corral.env.multi_agent_env import MultiAgentEnv, make_multi_agent
from corral.utils import check_env


class Line(gym.Env):
    """A one-dimensional env whose faults the tests switch on."""

    def __init__(self, fault=None):
        self.fault = fault
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        if self.fault == "reset_obs":
            return np.full(2, 5.0, np.float32), {}
        return np.zeros(2, np.float32), {}

    def step(self, action):
        obs = np.zeros(2, np.float32)
        if self.fault == "reward":
            return obs, "1.0", False, False, {}
        if self.fault == "four_tuple":
            return obs, 1.0, False, {}
        if self.fault == "shape":
            return np.zeros(3, np.float32), 1.0, False, False, {}
        return obs, 1.0, False, False, {}


def test_a_good_env_passes_in_each_form():
    check_env(gym.make("CartPole-v1"))
    check_env(make_multi_agent("CartPole-v1")({"num_agents": 2}))
    check_env(Line())


@pytest.mark.parametrize(
    ("fault", "message"),
    [
        ("reset_obs", r"observation collected from env.reset\(\) is not in the observation space"),
        ("reward", r"a reward that is integer or float: .* returned reward '1.0'"),
        ("four_tuple", r"step\(action\) returned"),
        ("shape", r"shape \(3,\), dtype float32; the space's shape \(2,\)"),
    ],
)
def test_each_fault_is_named(fault, message):
    with pytest.raises(ValueError, match=message):
        check_env(Line(fault))


def test_multi_agent_faults_and_other_objects():
    class NoAll(MultiAgentEnv):
        def __init__(self):
            super().__init__()
            self.possible_agents = self.agents = ["a"]
            self.observation_space = gym.spaces.Discrete(2)
            self.action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            return {"a": 0}, {}

        def step(self, action_dict):
            return {"a": 1}, {"a": 1.0}, {"a": False}, {"a": False}, {}

    with pytest.raises(ValueError, match="without the '__all__' key"):
        check_env(NoAll())
    with pytest.raises(ValueError, match="Env must be a gymnasium.Env"):
        check_env(object())


def test_parallel_pettingzoo_env():
    pytest.importorskip("pettingzoo", reason="PettingZoo is the `pettingzoo` extra")
    from pettingzoo.classic import rps_v2

    from corral.env.wrappers.pettingzoo_env import ParallelPettingZooEnv

    env = ParallelPettingZooEnv(rps_v2.parallel_env())
    obs, _ = env.reset(seed=0)
    assert set(obs) == set(env.possible_agents)
    check_env(env)
    with pytest.raises(TypeError, match="wrap it in PettingZooEnv"):
        ParallelPettingZooEnv(rps_v2.env())
    # RLlib 1.13's seed(): the next reset without a seed of its own is seeded by it.
    from mpe2 import simple_spread_v3

    env = ParallelPettingZooEnv(simple_spread_v3.parallel_env())
    first, _ = env.reset(seed=7)
    env.seed(7)
    again, _ = env.reset()
    assert all(np.array_equal(first[a], again[a]) for a in first)
    assert env.get_sub_environments is env.env.unwrapped


def test_reset_on_exception_wrapper():
    from corral.env.wrappers.exception_wrapper import (
        ResetOnExceptionWrapper,
        TooManyResetAttemptsException,
    )

    class Flaky(Line):
        def __init__(self, reset_failures):
            super().__init__()
            self.reset_failures = reset_failures
            self.resets = 0

        def reset(self, *, seed=None, options=None):
            self.resets += 1
            if self.resets <= self.reset_failures:
                raise RuntimeError("reset failed")
            return super().reset()

        def step(self, action):
            if action == 1:
                raise RuntimeError("step failed")
            return super().step(action)

    env = ResetOnExceptionWrapper(Flaky(reset_failures=2), max_reset_attempts=3)
    obs, _ = env.reset()
    assert env.unwrapped.resets == 3 and obs.shape == (2,)
    assert env.step(0)[1] == 1.0
    obs, reward, terminated, truncated, info = env.step(1)  # the step fails: a fresh episode
    assert (reward, terminated, truncated, info) == (0.0, False, True, {"__terminated__": True})
    with pytest.raises(TooManyResetAttemptsException, match=r"\(2\)"):
        ResetOnExceptionWrapper(Flaky(reset_failures=5), max_reset_attempts=2).reset()


def test_gym_env_creator_and_record_env_wrapper():
    from corral.env.env_context import EnvContext
    from corral.env.utils import gym_env_creator, record_env_wrapper
    from corral.utils.error import EnvError

    env = gym_env_creator(EnvContext({"max_episode_steps": 7}), "CartPole-v1")
    assert env.spec.max_episode_steps == 7
    assert record_env_wrapper(env, False, None, {}) is env
    with pytest.raises(EnvError, match="Unknown env 'CartPole-v9'"):
        gym_env_creator(EnvContext({}), "CartPole-v9")
    # An id of gym's time whose env Gymnasium keeps under a newer version: that id is named.
    with pytest.raises(EnvError, match="'Pendulum-v0'.* Gymnasium has this env as 'Pendulum-v1'"):
        gym_env_creator(EnvContext({}), "Pendulum-v0")
    with pytest.raises(EnvError, match="Did you mean: 'CartPole-v1'"):
        gym_env_creator(EnvContext({}), "CartPol-v1")
