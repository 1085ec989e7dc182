"""RLlib 1.13's multi-agent batches: `t` counts the env's steps, and a multi-agent env
whose only policy is `default_policy` gives a plain `SampleBatch`."""

import gymnasium as gym
import numpy as np

from corral.env import MultiAgentEnv
from corral.evaluation.rollout_worker import RolloutWorker
from corral.policy.policy import PolicySpec
from corral.policy.random_policy import RandomPolicy
from corral.policy.sample_batch import MultiAgentBatch, SampleBatch
from corral.policy.view_requirement import ViewRequirement


class TakeTurns(MultiAgentEnv):
    """Agents 0 and 1 act in turns (0 on even env steps, 1 on odd ones); 6 env steps."""

    def __init__(self, config=None):
        super().__init__()
        self.observation_space = gym.spaces.Box(0.0, 10.0, (1,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self._agent_ids = {0, 1}
        self.steps = 0

    def _obs(self):
        return {self.steps % 2: np.array([self.steps], np.float32)}

    def reset(self, *, seed=None, options=None):
        self.steps = 0
        return self._obs(), {}

    def step(self, action_dict):
        self.steps += 1
        done = self.steps >= 6
        obs = self._obs() if not done else {0: np.zeros(1, np.float32), 1: np.zeros(1, np.float32)}
        rewards = {a: 1.0 for a in obs}
        flags = {"__all__": done}
        return obs, rewards, flags, {"__all__": False}, {}


class PrevT(RandomPolicy):
    """Reads the previous row's `t` of its agent (a view column of `t` shifted by -1)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.view_requirements["prev_t"] = ViewRequirement("t", shift=-1)
        self.view_requirements["obs_2"] = ViewRequirement(
            "obs", shift=2, used_for_compute_actions=False
        )


def turn_worker(policy_class=RandomPolicy) -> RolloutWorker:
    return RolloutWorker(
        env_creator=lambda _: TakeTurns(),
        policy_spec={"p0": PolicySpec(policy_class=policy_class)},
        policy_mapping_fn=lambda agent_id, episode, **kwargs: "p0",
        rollout_fragment_length=6,
        batch_mode="complete_episodes",
    )


def test_t_counts_the_env_steps_of_agents_that_take_turns():
    batch = turn_worker().sample()
    p0 = batch.policy_batches["p0"]
    rows = {a: p0["t"][p0["agent_index"] == a].tolist() for a in (0, 1)}
    # Agent 0 acts at env steps 0, 2, 4 and sees its next observation after steps
    # 1, 3 (0-based env-step index of the step that completes the row); the episode
    # ends with step 5 for both.
    assert rows[0] == [1, 3, 5]
    assert rows[1] == [2, 4, 5]


def test_views_of_t_follow_the_agents_own_rows():
    p0 = turn_worker(PrevT).sample().policy_batches["p0"]
    agent0 = p0["agent_index"] == 0
    # The previous row of the same agent (0 before its first).
    assert p0["prev_t"][agent0].tolist() == [0, 1, 3]
    # Two of the agent's own steps later (its observations: 0, 2, 4, then the end).
    assert p0["obs_2"][agent0].reshape(-1).tolist() == [4.0, 0.0, 0.0]


class TwoAgents(MultiAgentEnv):
    """Agents 0 and 1 act every env step; 4 env steps."""

    def __init__(self, config=None):
        super().__init__()
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self._agent_ids = {0, 1}
        self.steps = 0

    def reset(self, *, seed=None, options=None):
        self.steps = 0
        return {a: np.zeros(2, np.float32) for a in (0, 1)}, {}

    def step(self, action_dict):
        self.steps += 1
        obs = {a: np.zeros(2, np.float32) for a in (0, 1)}
        done = self.steps >= 4
        return obs, {0: 1.0, 1: 1.0}, {"__all__": done}, {"__all__": False}, {}


def test_only_default_policy_gives_a_sample_batch_of_all_agents_rows():
    worker = RolloutWorker(
        env_creator=lambda _: TwoAgents(), policy_spec=RandomPolicy, rollout_fragment_length=4
    )
    batch = worker.sample()
    assert type(batch) is SampleBatch
    assert batch.count == 8  # 4 env steps of 2 agents
    assert sorted(set(batch[SampleBatch.AGENT_INDEX].tolist())) == [0, 1]
    assert batch["t"].tolist() == [0, 1, 2, 3, 0, 1, 2, 3]


def test_other_policies_still_give_a_multi_agent_batch():
    worker = RolloutWorker(
        env_creator=lambda _: TwoAgents(),
        policy_spec={"p0": PolicySpec(policy_class=RandomPolicy)},
        policy_mapping_fn=lambda agent_id, episode, **kwargs: "p0",
        rollout_fragment_length=4,
    )
    batch = worker.sample()
    assert isinstance(batch, MultiAgentBatch)
    assert batch.count == 4 and batch.policy_batches["p0"].count == 8


def test_each_agents_rows_are_their_own_unroll():
    # 1.13 gives each agent's piece of an episode its own `unroll_id`: views and
    # V-trace pieces must not join one agent's last row to the next agent's first.
    worker = RolloutWorker(
        env_creator=lambda _: TwoAgents(),
        policy_spec={"p0": PolicySpec(policy_class=PrevT)},
        policy_mapping_fn=lambda agent_id, episode, **kwargs: "p0",
        rollout_fragment_length=4,
    )
    p0 = worker.sample().policy_batches["p0"]
    agents = p0[SampleBatch.AGENT_INDEX]
    unrolls = p0[SampleBatch.UNROLL_ID]
    assert len(set(unrolls[agents == 0].tolist())) == 1
    assert len(set(unrolls[agents == 1].tolist())) == 1
    assert set(unrolls[agents == 0].tolist()).isdisjoint(unrolls[agents == 1].tolist())
