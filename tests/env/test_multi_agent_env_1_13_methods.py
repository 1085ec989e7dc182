"""RLlib 1.13's `MultiAgentEnv` methods: `get_agent_ids` and the per-agent
`*_space_contains` / `*_space_sample` (incl. 1.13's "preferred format" of spaces), and
`make_multi_agent`'s `render`."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from corral.env.multi_agent_env import MultiAgentEnv

BOX = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
DISCRETE = gym.spaces.Discrete(3)


class PreferredFormat(MultiAgentEnv):
    """RLlib 1.13's preferred format: Dict spaces keyed by the agent ids, `_agent_ids`."""

    def __init__(self):
        self._agent_ids = {"a", "b"}
        self.observation_space = gym.spaces.Dict({"a": BOX, "b": DISCRETE})
        self.action_space = gym.spaces.Dict({"a": DISCRETE, "b": BOX})


class PerAgentSpaces(MultiAgentEnv):
    def __init__(self):
        self.possible_agents = ["x", "y"]
        self.observation_spaces = {"x": BOX, "y": DISCRETE}
        self.action_spaces = {"x": DISCRETE, "y": DISCRETE}


class SharedSpaces(MultiAgentEnv):
    def __init__(self):
        self.possible_agents = [0, 1, 2]
        self.observation_space = BOX
        self.action_space = DISCRETE


class NoSpaces(MultiAgentEnv):
    def __init__(self):
        self.possible_agents = [0]


def test_get_agent_ids():
    assert PreferredFormat().get_agent_ids() == {"a", "b"}
    assert PerAgentSpaces().get_agent_ids() == {"x", "y"}
    assert SharedSpaces().get_agent_ids() == {0, 1, 2}


def test_preferred_format():
    env = PreferredFormat()
    obs = env.observation_space_sample()
    assert set(obs) == {"a", "b"} and BOX.contains(obs["a"]) and DISCRETE.contains(obs["b"])
    assert env._spaces_in_preferred_format is True
    assert env.observation_space_contains(obs)
    assert env.observation_space_contains({"b": 2})  # a subset of the agents
    assert not env.observation_space_contains({"b": 5})
    assert not env.observation_space_contains({"c": 0})  # not an agent
    assert set(env.action_space_sample(["b"])) == {"b"}
    assert env.action_space_contains({"a": 2, "b": np.zeros(2, np.float32)})
    assert not env.action_space_contains({"a": np.zeros(2, np.float32)})
    assert not env.action_space_contains([1, 2])


def test_per_agent_and_shared_spaces():
    env = PerAgentSpaces()
    assert set(env.observation_space_sample()) == {"x", "y"}
    assert env.action_space_contains({"x": 2, "y": 0}) and not env.action_space_contains({"x": 3})
    shared = SharedSpaces()
    actions = shared.action_space_sample()
    assert set(actions) == {0, 1, 2} and all(DISCRETE.contains(a) for a in actions.values())
    assert shared.observation_space_contains({1: np.zeros(2, np.float32)})
    assert not shared.observation_space_contains({1: np.full(2, 5.0, np.float32)})


def test_no_spaces_cannot_check_or_sample(caplog):
    env = NoSpaces()
    assert env.action_space_sample() == {}
    assert env.observation_space_contains({0: 1}) is True  # RLlib 1.13's answer
    assert "declares no" in caplog.text


def test_make_multi_agent_renders_its_first_copy():
    from corral.env.env_context import EnvContext
    from corral.env.multi_agent_env import make_multi_agent
    from corral.env.remote_vector_env import can_render

    pytest.importorskip("pygame", reason="CartPole draws its frames with pygame")
    env = make_multi_agent("CartPole-v1")({"num_agents": 2, "render_mode": "rgb_array"})
    env.reset(seed=0)
    env.step({0: 0, 1: 1})
    frame = env.render()
    assert env.render_mode == "rgb_array" and frame.shape == (400, 600, 3)
    np.testing.assert_array_equal(frame, env.envs[0].render())
    np.testing.assert_array_equal(env.render(mode="rgb_array"), frame)  # RLlib 1.x's call
    assert env.envs[1].render_mode is None  # only the rendered copy draws
    with pytest.raises(ValueError, match="render_mode='rgb_array'"):
        env.render(mode="human")

    # A creator gets the config (render_mode included), as RLlib 1.13 passed it on.
    made = make_multi_agent(lambda c: gym.make("CartPole-v1", render_mode=c.get("render_mode")))
    env = made({"num_agents": 3, "render_mode": "rgb_array"})
    env.reset(seed=1)
    assert env.render().shape == (400, 600, 3)

    # A `record_env` worker's request reaches the first copy of a Gymnasium id.
    context = EnvContext({"num_agents": 2}, worker_index=0)
    context._render_mode = "rgb_array"
    env = make_multi_agent("CartPole-v1")(context)
    env.reset(seed=2)
    assert env.render().shape == (400, 600, 3)
    # What `render_env` asks: the env renders when its first copy does.
    assert can_render(env)
    unrendered = make_multi_agent("CartPole-v1")({"num_agents": 1})
    assert unrendered.render_mode is None and not can_render(unrendered)
