"""`GroupAgentsWrapper` / `MultiAgentEnv.with_agent_groups`: groups act as one agent."""

from __future__ import annotations

import gymnasium as gym
import pytest

from corral.env import GroupAgentsWrapper, MultiAgentEnv
from corral.env.wrappers.group_agents_wrapper import GROUP_INFO, GROUP_REWARDS


class ThreeAgents(MultiAgentEnv):
    """Agents "a", "b", "c": each observes its step count plus its index, is rewarded its
    action, and "a" terminates after 2 steps, "b" after 3 (the episode with "b")."""

    def __init__(self, config: dict | None = None) -> None:
        self.possible_agents = ["a", "b", "c"]
        self.agents = list(self.possible_agents)
        self.observation_space = gym.spaces.Discrete(10)
        self.action_space = gym.spaces.Discrete(3)
        self.t = 0
        self.received: list[dict] = []

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return {a: i for i, a in enumerate("abc")}, {"a": {"x": 1}}

    def step(self, action_dict):
        self.received.append(dict(action_dict))
        self.t += 1
        live = [a for a in "abc" if not (a == "a" and self.t > 2)]
        obs = {a: self.t + i for i, a in enumerate("abc") if a in live}
        rewards = {a: float(action_dict.get(a, 0)) for a in live}
        terminated = {"a": self.t >= 2, "b": self.t >= 3, "c": False, "__all__": self.t >= 3}
        truncated = {"a": False, "b": False, "c": self.t >= 3, "__all__": False}
        infos = {a: {"t": self.t} for a in live}
        return obs, rewards, terminated, truncated, infos


def _grouped() -> GroupAgentsWrapper:
    env = ThreeAgents()
    return env.with_agent_groups(
        {"g": ["b", "a"]},
        obs_space=gym.spaces.Tuple([env.observation_space] * 2),
        act_space=gym.spaces.Tuple([env.action_space] * 2),
    )


def test_groups_observations_actions_rewards_and_infos():
    env = _grouped()
    assert isinstance(env, GroupAgentsWrapper)
    assert env.possible_agents == ["g", "c"]
    assert env.observation_space == gym.spaces.Tuple([gym.spaces.Discrete(10)] * 2)
    obs, infos = env.reset()
    # The group's tuple follows the group's order ("b" first).
    assert obs == {"g": (1, 0), "c": 2}
    assert infos == {"g": {GROUP_INFO: [{}, {"x": 1}]}}

    obs, rewards, terminated, truncated, infos = env.step({"g": (2, 1), "c": 0})
    assert env.env.received[-1] == {"b": 2, "a": 1, "c": 0}
    assert obs == {"g": (2, 1), "c": 3}
    assert rewards == {"g": 3.0, "c": 0.0}
    assert infos["g"] == {GROUP_INFO: [{"t": 1}, {"t": 1}], GROUP_REWARDS: [2.0, 1.0]}
    assert infos["c"] == {"t": 1}
    assert terminated["g"] is False and truncated["g"] is False


def test_group_is_done_when_every_member_is():
    env = _grouped()
    env.reset()
    _, _, terminated, truncated, _ = env.step({"g": (0, 0), "c": 0})
    assert not terminated["g"]
    # Step 2: "a" terminates, "b" not yet: the group goes on.
    _, _, terminated, _, _ = env.step({"g": (0, 0), "c": 0})
    assert terminated["g"] is False
    assert terminated["__all__"] is False


def test_group_terminated_or_truncated_from_its_members():
    class Flags(ThreeAgents):
        def step(self, action_dict):
            obs = {a: 0 for a in "abc"}
            rewards = {a: 0.0 for a in "abc"}
            return (
                obs,
                rewards,
                {"a": True, "b": True, "c": True, "__all__": True},
                {"a": False, "b": False, "c": False, "__all__": False},
                {},
            )

    env = Flags().with_agent_groups({"all": ["a", "b", "c"]})
    env.reset()
    _, _, terminated, truncated, _ = env.step({"all": (0, 1, 2)})
    assert terminated == {"all": True, "__all__": True}
    assert truncated == {"all": False, "__all__": False}


def test_group_spaces_default_to_tuples_of_the_members():
    env = ThreeAgents().with_agent_groups({"g": ["a", "b"]})
    assert env.get_observation_space("g") == gym.spaces.Tuple([gym.spaces.Discrete(10)] * 2)
    assert env.get_action_space("g") == gym.spaces.Tuple([gym.spaces.Discrete(3)] * 2)
    assert env.get_observation_space("c") == gym.spaces.Discrete(10)


@pytest.mark.parametrize(
    ("groups", "match"),
    [
        ({"g1": ["a", "b"], "g2": ["b", "c"]}, "in two groups"),
        ({"g": []}, "no member"),
        ({"c": ["a", "b"]}, "also agent ids"),
    ],
)
def test_bad_groups_raise(groups, match):
    with pytest.raises(ValueError, match=match):
        GroupAgentsWrapper(ThreeAgents(), groups)


def test_missing_member_and_wrong_action_length_raise():
    env = _grouped()
    env.reset()
    env.step({"g": (0, 0), "c": 0})
    env.step({"g": (0, 0), "c": 0})
    # Step 3: "a" left the env (no observation) while "b" still observes.
    with pytest.raises(ValueError, match="must all be in it"):
        env.step({"g": (0, 0), "c": 0})
    with pytest.raises(ValueError, match="expected one per member"):
        _grouped().step({"g": (0,), "c": 0})


class OldAPITwoAgents(MultiAgentEnv):
    """An RLlib 1.x env: reset() -> obs, step() -> (obs, rewards, dones, infos)."""

    def __init__(self) -> None:
        self.observation_space = gym.spaces.Discrete(2)
        self.action_space = gym.spaces.Discrete(2)

    def reset(self):
        return {0: 0, 1: 1}

    def step(self, action_dict):
        return {0: 1, 1: 0}, {0: 1.0, 1: 2.0}, {0: True, 1: True, "__all__": True}, {}


def test_old_api_env_gets_an_old_api_group_wrapper():
    env = OldAPITwoAgents().with_agent_groups({"g": [0, 1]})
    assert isinstance(env, GroupAgentsWrapper)
    assert env.reset() == {"g": (0, 1)}
    obs, rewards, dones, infos = env.step({"g": (1, 1)})
    assert obs == {"g": (1, 0)}
    assert rewards == {"g": 3.0}
    assert dones == {"g": True, "__all__": True}
    assert infos == {"g": {GROUP_REWARDS: [1.0, 2.0]}}
