"""RLlib 1.13's checks of `check_env` and its parts beyond the basic ones (see
tests/env/test_env_checks_and_wrappers.py): missing spaces, the multi-agent space
helpers and agent ids, and a `BaseEnv` checked through `try_reset` / `poll`."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from corral.env.base_env import convert_to_base_env
from corral.env.multi_agent_env import MultiAgentEnvWrapper, make_multi_agent
from corral.utils.pre_checks.env import (
    check_base_env,
    check_env,
    check_gym_environments,
    check_multiagent_environments,
)

TwoCartPoles = make_multi_agent("CartPole-v1")
FAR = np.full(4, 1e6, np.float32)  # outside CartPole's observation space


class OldApiEnv:
    """An old gym API env (duck-typed) whose spaces the test replaces."""

    def __init__(self):
        self.observation_space = gym.spaces.Discrete(2)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self):
        return 0

    def step(self, action):
        return 0, 1.0, False, {}


def two_agents():
    return TwoCartPoles({"num_agents": 2})


def base_env():
    return MultiAgentEnvWrapper(None, [two_agents(), two_agents()], 2)


def test_missing_spaces_are_an_attribute_error():
    class NoSpaces:
        pass

    with pytest.raises(AttributeError, match="must have observation_space"):
        check_gym_environments(NoSpaces())
    half = NoSpaces()
    half.observation_space = gym.spaces.Discrete(2)
    with pytest.raises(AttributeError, match="must have action_space"):
        check_gym_environments(half)


@pytest.mark.parametrize("attr", ["observation_space", "action_space"])
@pytest.mark.parametrize("old_gym", [False, True])
def test_an_old_api_env_with_a_non_space_is_named(attr, old_gym):
    if old_gym:  # a `gym.Env` (converted by Shimmy, which fails on a non-space unclearly)
        old = pytest.importorskip("gym")
        env = type("OldGymEnv", (OldApiEnv, old.Env), {})()
    else:
        env = OldApiEnv()
    setattr(env, attr, "not a space")
    with pytest.raises(ValueError, match=f"must be a gym.space .*'s {attr} is 'not a space'"):
        check_env(env)


def test_an_old_gym_env_converted_by_shimmy_is_named_by_its_own_class():
    old = pytest.importorskip("gym")

    class BadResetGymEnv(old.Env):
        observation_space = old.spaces.Discrete(2)
        action_space = old.spaces.Discrete(2)

        def reset(self):
            return 5  # outside Discrete(2)

        def step(self, action):
            return 0, 1.0, False, {}

    with pytest.raises(
        ValueError, match=r"The observation collected from env.reset\(\) .* of env .*BadResetGymEnv"
    ) as e:
        check_env(BadResetGymEnv())
    assert "GymV21CompatibilityV0" not in str(e.value)


def test_each_checker_refuses_other_env_types():
    with pytest.raises(ValueError, match="The passed env is not a MultiAgentEnv"):
        check_multiagent_environments(gym.make("CartPole-v1"))
    with pytest.raises(ValueError, match="The passed env is not a BaseEnv"):
        check_base_env(gym.make("CartPole-v1"))


def test_good_multi_agent_and_base_envs_pass():
    check_env(two_agents())
    check_env(base_env())
    check_env(convert_to_base_env(gym.make("CartPole-v1")))


def test_multi_agent_space_helpers_are_checked():
    def broken(x):
        raise RuntimeError("broken")

    env = two_agents()
    env.observation_space_contains = broken
    with pytest.raises(ValueError, match="observation_space_contains function has some error"):
        check_env(env)
    env = two_agents()
    env.action_space_sample = lambda *_: {0: 2, 1: 2}  # outside Discrete(2)
    with pytest.raises(ValueError, match=r"action collected from action_space_sample\(\)"):
        check_env(env)
    env = two_agents()
    env.observation_space_sample = lambda *_: {0: FAR, 1: FAR}
    with pytest.raises(ValueError, match=r"observation collected from observation_space_sample"):
        check_env(env)


def test_multi_agent_dicts_are_checked_per_agent():
    env = two_agents()
    env.reset = lambda *, seed=None, options=None: ({0: np.zeros(4, np.float32), 7: FAR}, {})
    with pytest.raises(
        ValueError, match=r"returned by reset\(\) has agent_ids that are not .*\[7\]"
    ):
        check_env(env)
    obs = {0: np.zeros(4, np.float32), 1: np.zeros(4, np.float32)}
    for bad, message in [
        ((obs, {0: 1.0}, {0: "no", "__all__": False}, {"__all__": False}, {}), "terminated 'no'"),
        ((obs, {0: 1.0}, {"__all__": False}, {"__all__": False}, {0: "x"}), "info 'x' for agent"),
    ]:
        env = two_agents()
        env.step = lambda actions, bad=bad: bad
        with pytest.raises(ValueError, match=message):
            check_env(env)


@pytest.mark.parametrize(
    ("step", "message"),
    [
        ((0, "1.0", False, {}), r"a reward that is integer or float: .* reward '1.0'"),
        ((0, 1.0, 1, {}), r"a done that is a boolean: .* done=1\."),
        ((0, 1.0, None, {}), r"a done that is a boolean: .* done=None"),
        ((0, 1.0, False, "info"), r"a info that is a dict: .* info='info'"),
        ((5, 1.0, False, {}), r"observation collected from env.step\(\)"),
    ],
)
def test_an_old_api_env_s_own_step_is_checked(step, message):
    # Before the conversion, which turns any `done` into a bool (RLlib 1.13 refused it).
    env = OldApiEnv()
    env.step = lambda action: step
    with pytest.raises(ValueError, match=message):
        check_env(env)
    check_env(OldApiEnv())  # its good step passes


def test_a_multi_agent_reset_or_step_of_another_shape_is_named():
    # RLlib 1.13's words ("The element returned by reset/step"), with what came back.
    env = two_agents()
    env.reset = lambda *, seed=None, options=None: 5
    with pytest.raises(ValueError, match=r"The element returned by reset\(\) of .* got 5"):
        check_env(env)
    env = two_agents()
    env.reset = lambda *, seed=None, options=None: ({0: np.zeros(4, np.float32)}, None)
    with pytest.raises(ValueError, match=r"returned by reset\(\) .* not a pair of MultiAgentDicts"):
        check_env(env)
    env = two_agents()
    env.step = lambda actions: (5, 5, True, {})
    with pytest.raises(
        ValueError, match=r"The element returned by step\(action_dict\) .* got \(5, 5"
    ):
        check_env(env)


def test_a_base_env_is_checked_through_try_reset_and_poll():
    inside = {0: np.zeros(4, np.float32), 1: np.zeros(4, np.float32)}
    for reset, message in [
        (5, "try_reset.* is not a MultiEnvDict. Instead, it is of type <class 'int'>"),
        ({"bad": inside}, r"has dict keys that don't correspond to the env's sub-env ids"),
        (
            {0: {2: FAR}},
            r"try_reset has agent_ids that are not the names of the agents.*\(sub-env 0\)",
        ),
        ({0: {0: FAR, 1: FAR}}, r"observation collected from try_reset\(\) is not in"),
    ]:
        env = base_env()
        env.try_reset = lambda *_, reset=reset: reset
        with pytest.raises(ValueError, match=message):
            check_env(env)
    rewards = {0: {0: 0.0, 1: 0.0}, 1: {0: 0.0, 1: 0.0}}
    dones = {0: {0: False, 1: False}, 1: {0: False, 1: False}}
    infos = {0: {0: {}, 1: {}}, 1: {0: {}, 1: {}}}
    obs = {0: inside, 1: inside}
    for polled, message in [
        (
            ({0: 1}, rewards, dones, infos, {}),
            "step, next_obs has values that are not MultiAgentDicts",
        ),
        (
            (obs, {0: {0: "r"}}, dones, infos, {}),
            "rewards that are integer or float: .* returned reward 'r'",
        ),
        (
            (obs, rewards, {0: {0: "no"}}, infos, {}),
            "dones that are boolean: .* terminated 'no' for agent 0",
        ),
        (
            (obs, rewards, dones, {0: {0: "x"}}, {}),
            "infos that are a dict: .* info 'x' for agent 0",
        ),
    ]:
        env = base_env()
        env.poll = lambda polled=polled: polled
        with pytest.raises(ValueError, match=message):
            check_env(env)
    env = base_env()
    env.action_space_contains = lambda x: 1 / 0
    with pytest.raises(ValueError, match="action_space_contains function has some error"):
        check_env(env)


def test_vector_envs_are_not_checked(caplog):
    from corral.env.vector_env import VectorEnv

    class Vector(VectorEnv):
        def __init__(self):
            super().__init__(gym.spaces.Discrete(2), gym.spaces.Discrete(2), 1)

    check_env(Vector())
    assert "does not check a VectorEnv" in caplog.text
