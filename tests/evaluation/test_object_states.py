"""A `Policy` of one's own with a state (a non-empty `get_initial_state()`), as RLlib 1.13
sampled it: the samplers carry the state and record `state_in_<i>` / `state_out_<i>`, also
when the state is an arbitrary Python object (`[{}]`: object columns, the initial value in
an episode's first row, each step's output the next row's input)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from corral.env.multi_agent_env import make_multi_agent
from corral.evaluation.rollout_worker import RolloutWorker
from corral.policy.policy import Policy


class Chain(gym.Env):
    """Observation = the step in the episode; `length` steps."""

    def __init__(self, length: int = 4) -> None:
        self.length = length
        self.observation_space = gym.spaces.Box(0.0, 100.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        self.t += 1
        return np.array([float(self.t)], np.float32), 1.0, self.t >= self.length, False, {}


class DictState(Policy):
    """Its state is a dict: `{}` at an episode's start, then the observation it last saw;
    records the state batches it got."""

    def __init__(self, *args) -> None:
        super().__init__(*args)
        self.states_in: list[list] = []

    def get_initial_state(self):
        return [{}]

    def compute_actions(self, obs_batch, state_batches=None, **kwargs):
        self.states_in.append(list(state_batches[0]))
        out = [{"seen": int(o[0]), "tag": ["a", "list"]} for o in obs_batch]
        return [0] * len(obs_batch), [out], {}


class GrowingString(Policy):
    """Its state is a string growing by one character a step (a fixed-width string array
    would cut it at its first width)."""

    def get_initial_state(self):
        return [None]

    def compute_actions(self, obs_batch, state_batches=None, **kwargs):
        out = [(s or "") + "x" for s in state_batches[0]]
        return [0] * len(obs_batch), [out], {}


class SameStateAgain(Policy):
    """A state it reads but never returns (RLlib 1.13 fed it the same state again)."""

    def get_initial_state(self):
        return [np.array([1], np.int64)]

    def compute_actions(self, obs_batch, state_batches=None, **kwargs):
        return np.asarray(state_batches[0])[:, 0], [], {}


def single_agent_worker(policy, **kwargs) -> RolloutWorker:
    return RolloutWorker(env_creator=lambda ctx: Chain(), policy_spec=policy, **kwargs)


def test_dict_state_is_sampled_as_object_columns():
    w = single_agent_worker(DictState, rollout_fragment_length=6, num_envs=2)
    batch = w.sample()
    assert batch.count == 12
    assert batch["state_in_0"].dtype == object and batch["state_out_0"].dtype == object
    t = batch["t"]
    for row in range(batch.count):
        # Each step's output holds the observation it acted on (= t here).
        assert batch["state_out_0"][row] == {"seen": int(t[row]), "tag": ["a", "list"]}
        # Its input: {} at an episode's start, else the previous step's output.
        expected = {} if t[row] == 0 else {"seen": int(t[row]) - 1, "tag": ["a", "list"]}
        assert batch["state_in_0"][row] == expected
    # The policy got the same values (one per sub-env), a fresh {} after each episode end.
    seen = w.get_policy().states_in
    assert seen[0] == [{}, {}]
    assert seen[1] == [{"seen": 0, "tag": ["a", "list"]}] * 2
    assert seen[4] == [{}, {}]  # (4-step episodes)


def test_string_state_keeps_its_values_whole():
    batch = single_agent_worker(GrowingString, rollout_fragment_length=4).sample()
    assert list(batch["state_in_0"]) == [None, "x", "xx", "xxx"]
    assert list(batch["state_out_0"]) == ["x", "xx", "xxx", "xxxx"]


def test_state_not_returned_is_given_again():
    batch = single_agent_worker(SameStateAgain, rollout_fragment_length=5).sample()
    np.testing.assert_array_equal(batch["actions"], np.ones(5))
    np.testing.assert_array_equal(batch["state_in_0"][:, 0], np.ones(5))


def test_dict_state_in_a_multi_agent_env():
    two = make_multi_agent(lambda config: Chain())
    w = RolloutWorker(
        env_creator=lambda ctx: two({"num_agents": 2}),
        policy_spec=DictState,
        rollout_fragment_length=4,
    )
    # (A default_policy-only multi-agent env samples a SampleBatch of all agents' rows.)
    batch = w.sample()
    assert sorted(set(batch["agent_index"].tolist())) == [0, 1]
    assert batch["state_in_0"].dtype == object
    for row in range(batch.count):
        t = int(batch["t"][row])
        assert batch["state_out_0"][row] == {"seen": t, "tag": ["a", "list"]}
        assert batch["state_in_0"][row] == ({} if t == 0 else {"seen": t - 1, "tag": ["a", "list"]})


def test_torch_policy_with_array_states_acts_unwrapped():
    from corral.agents.pg.pg_torch_policy import PGTorchPolicy

    w = RolloutWorker(
        env_creator=lambda ctx: gym.make("CartPole-v1"),
        policy_spec=PGTorchPolicy,
        policy_config={"model": {"use_lstm": True, "lstm_cell_size": 8}},
        rollout_fragment_length=4,
    )
    sampler = w.sampler
    assert sampler.recurrent and sampler.object_states == ()
    # Its own acting method, no per-step wrapper.
    assert sampler.compute_actions == w.get_policy().compute_actions_from_obs
    assert w.sample()["state_in_0"].dtype == np.float32


class GrowingList(Policy):
    """Its state is a list one longer each step; `initial` is its first value."""

    initial: object = []

    def get_initial_state(self):
        return [self.initial]

    def compute_actions(self, obs_batch, state_batches=None, **kwargs):
        out = [([] if s is None else list(s)) + [1] for s in state_batches[0]]
        return [0] * len(obs_batch), [out], {}


class GrowingListFromNone(GrowingList):
    initial = None


def test_a_state_array_that_changes_size_is_a_clear_error():
    # `[[]]` is an array state of shape (0,): its rows cannot grow. The error names the
    # column and says what to do, in both samplers.
    two = make_multi_agent(lambda config: Chain())
    workers = [
        single_agent_worker(GrowingList, rollout_fragment_length=4),
        RolloutWorker(
            env_creator=lambda ctx: two({"num_agents": 2}),
            policy_spec=GrowingList,
            rollout_fragment_length=4,
        ),
    ]
    for worker in workers:
        with pytest.raises(ValueError, match=r"'state_out_0' values of .*shape.*Python object"):
            worker.sample()


def test_a_state_that_changes_size_as_an_object():
    two = make_multi_agent(lambda config: Chain())
    single = single_agent_worker(GrowingListFromNone, rollout_fragment_length=4).sample()
    multi = RolloutWorker(
        env_creator=lambda ctx: two({"num_agents": 2}),
        policy_spec=GrowingListFromNone,
        rollout_fragment_length=4,
    ).sample()
    for batch in (single, multi):
        first = batch["agent_index"] == 0 if "agent_index" in batch else slice(None)
        assert [list(s) for s in batch["state_out_0"][first]] == [[1], [1, 1], [1, 1, 1], [1] * 4]
