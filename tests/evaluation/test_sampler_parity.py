"""The single-agent and the multi-agent sampler share their plumbing
(`corral.evaluation.sampler_base`): the same episode-end rule, reward clipping,
postprocessing hook, rendering, and recurrent policies on both paths."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from corral.agents.callbacks import DefaultCallbacks
from corral.agents.ppo import PPOTrainer
from corral.env import MultiAgentEnv
from corral.env.multi_agent_env import make_multi_agent
from corral.evaluation.rollout_worker import RolloutWorker
from corral.evaluation.sampler_base import EpisodeEndRule
from corral.policy.sample_batch import MultiAgentBatch, SampleBatch

# test_sampler.py's settings and env (--import-mode=importlib: test modules do not
# import each other), with rewards -3, -2, ... for the clipping test.
SMALL = dict(
    num_workers=0,
    rollout_fragment_length=10,
    train_batch_size=20,
    sgd_minibatch_size=10,
    num_sgd_iter=1,
    model={"fcnet_hiddens": [8]},
)


class RampCountingEnv(gym.Env):
    """Obs: the step count; terminates after `length` steps; pays -3, -2, ... ."""

    observation_space = gym.spaces.Box(0, 1000, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        self.length, self.t = (config or {}).get("length", 5), 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.t += 1
        obs = np.array([self.t], np.float32)
        return obs, float(self.t - 4), self.t >= self.length, False, {}


OneAgent = make_multi_agent(lambda config: RampCountingEnv(config))


def _single_and_multi(**overrides):
    """The first fragment of the single-agent env and of the same env as a one-agent
    MultiAgentEnv, sampled with the same settings."""
    env_config = overrides.pop("env_config", {})
    config = {**SMALL, **overrides}
    batches = []
    for env, extra in ((RampCountingEnv, {}), (OneAgent, {"num_agents": 1})):
        trainer = PPOTrainer(config={**config, "env_config": {**env_config, **extra}}, env=env)
        try:
            worker = trainer.workers.local_worker()
            batch = worker.sample()
            if isinstance(batch, MultiAgentBatch):
                batch = batch.policy_batches["default_policy"]
            batches.append((batch, [m.episode_reward for m in worker.get_metrics()]))
        finally:
            trainer.stop()
    return batches


@pytest.mark.parametrize(
    "settings",
    [
        {"env_config": {"length": 4}},
        {"horizon": 3, "env_config": {"length": 100}},
        {"horizon": 3, "soft_horizon": True, "env_config": {"length": 100}},
        {"horizon": 4, "no_done_at_end": True, "env_config": {"length": 6}},
        {"horizon": 3, "soft_horizon": True, "no_done_at_end": True, "env_config": {"length": 5}},
    ],
)
def test_both_samplers_end_episodes_by_the_same_rule(settings):
    (single, _), (multi, _) = _single_and_multi(**settings)
    n = 10
    for column in (
        SampleBatch.OBS,
        SampleBatch.NEXT_OBS,
        SampleBatch.TERMINATEDS,
        SampleBatch.TRUNCATEDS,
        SampleBatch.DONES,
    ):
        np.testing.assert_array_equal(single[column][:n], multi[column][:n], err_msg=column)
    # `dones` is RLlib 1.13's: the episode's end, but never with `no_done_at_end`, and
    # not at a soft horizon's cut (where 1.13 bootstrapped).
    for batch in (single, multi):
        ends = (batch[SampleBatch.TERMINATEDS] | batch[SampleBatch.TRUNCATEDS])[:n]
        dones = batch[SampleBatch.DONES][:n]
        if settings.get("no_done_at_end"):
            assert not dones.any() and ends.any()
        elif settings.get("soft_horizon"):
            assert not dones.any() and ends.tolist() == [False, False, True] * 3 + [False]
        else:
            assert dones.tolist() == ends.tolist()
    same = np.diff(single[SampleBatch.EPS_ID][:n]) == 0
    np.testing.assert_array_equal(same, np.diff(multi[SampleBatch.EPS_ID][:n]) == 0)


def test_rule_keeps_env_truncations_out_of_the_horizon_cut():
    rule = EpisodeEndRule(horizon=3, soft_horizon=True, no_done_at_end=False)
    length = np.array([3, 3, 2])
    term = np.array([False, False, False])
    trunc = np.array([True, False, False])  # sub-env 0: the env's own time limit
    cut = rule.cut(length, term | trunc)
    assert cut.tolist() == [False, True, False]
    rule.mark(term, trunc, cut)
    assert term.tolist() == [False, False, False] and trunc.tolist() == [True, True, False]
    # The env that truncated itself is reset; the soft cut keeps its env running.
    assert rule.resets_env(cut[0]) and not rule.resets_env(cut[1])


@pytest.mark.parametrize("clip_rewards", [True, 1.5])
def test_multi_agent_rewards_are_clipped_like_single_agent_ones(clip_rewards):
    (single, single_returns), (multi, multi_returns) = _single_and_multi(
        clip_rewards=clip_rewards, env_config={"length": 6}
    )
    np.testing.assert_array_equal(single[SampleBatch.REWARDS], multi[SampleBatch.REWARDS])
    assert single[SampleBatch.REWARDS].max() <= 1.5 and single[SampleBatch.REWARDS].min() >= -1.5
    # Returns are reported unclipped (-3 - 2 - 1 + 0 + 1 + 2).
    assert single_returns == multi_returns == [-3.0]


class PostprocessLog(DefaultCallbacks):
    calls: list = []

    def on_postprocess_trajectory(self, *, worker, episode, agent_id, policy_id, **kwargs):
        batch = kwargs["postprocessed_batch"]
        PostprocessLog.calls.append((episode, agent_id, policy_id, batch))


@pytest.mark.parametrize("env", [RampCountingEnv, OneAgent])
def test_one_postprocessing_path_calls_the_hook_per_trajectory(env):
    PostprocessLog.calls = []
    trainer = PPOTrainer(
        config={**SMALL, "callbacks": PostprocessLog, "env_config": {"length": 4}}, env=env
    )
    try:
        batch = trainer.workers.local_worker().sample()
        assert not hasattr(RolloutWorker, "_postprocess")  # the samplers postprocess
    finally:
        trainer.stop()
    if isinstance(batch, MultiAgentBatch):
        batch = batch.policy_batches["default_policy"]
    trajectories = batch.split_by_episode()
    assert len(PostprocessLog.calls) == len(trajectories) == 3  # 4 + 4 + 2 steps
    for (episode, _, policy_id, post), trajectory in zip(PostprocessLog.calls, trajectories):
        assert policy_id == "default_policy"
        assert episode is not None and episode.episode_id == trajectory[SampleBatch.EPS_ID][0]
        assert SampleBatch.ADVANTAGES in post
        np.testing.assert_array_equal(post[SampleBatch.OBS], trajectory[SampleBatch.OBS])


class RenderingTwoAgents(MultiAgentEnv):
    """Two agents, episodes of 5 steps; counts `render()` calls."""

    render_mode = "rgb_array"

    def __init__(self, config=None):
        super().__init__()
        self.possible_agents = self.agents = ["a", "b"]
        self.observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.renders = 0
        self.t = 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return {a: np.zeros(2, np.float32) for a in self.agents}, {}

    def step(self, action_dict):
        self.t += 1
        obs = {a: np.zeros(2, np.float32) for a in action_dict}
        rewards = {a: 1.0 for a in action_dict}
        done = self.t >= 5
        return obs, rewards, {"__all__": done}, {"__all__": False}, {}

    def render(self):
        self.renders += 1
        return np.zeros((2, 2, 3), np.uint8)


def test_multi_agent_sampler_renders_the_first_sub_env_every_step():
    trainer = PPOTrainer(
        config={**SMALL, "num_envs_per_worker": 2, "render_env": True}, env=RenderingTwoAgents
    )
    try:
        worker = trainer.workers.local_worker()
        worker.sample()
        first, second = worker.async_env.get_sub_environments()
        assert first.renders == 10 and second.renders == 0
        assert worker.sampler.timers.as_dict()["mean_env_render_ms"] > 0.0
    finally:
        trainer.stop()


def test_multi_agent_lstm_policies_train_on_sequences():
    two = make_multi_agent("CartPole-v1")
    trainer = PPOTrainer(
        config={
            "env": two,
            "env_config": {"num_agents": 2},
            "num_workers": 0,
            "rollout_fragment_length": 40,
            "train_batch_size": 80,
            "sgd_minibatch_size": 40,
            "num_sgd_iter": 2,
            "seed": 0,
            "model": {"use_lstm": True, "lstm_cell_size": 8, "max_seq_len": 10},
            "multiagent": {
                "policies": {"p0", "p1"},
                "policy_mapping_fn": lambda agent_id, *args, **kwargs: f"p{agent_id}",
            },
        }
    )
    try:
        for _ in range(3):
            result = trainer.train()
        for pid in ("p0", "p1"):
            stats = result["info"]["learner"][pid]["learner_stats"]
            assert stats and all(np.isfinite(v) for v in stats.values() if np.isscalar(v))
        batch = trainer.workers.local_worker().sample().policy_batches["p0"]
        assert {"state_in_0", "state_in_1", "state_out_0", "prev_actions", "prev_rewards"} <= set(
            batch
        )
        # Each step's state_in is the previous step's state_out within a trajectory.
        eps = batch[SampleBatch.EPS_ID]
        cont = np.flatnonzero(eps[1:] == eps[:-1])
        np.testing.assert_allclose(batch["state_in_0"][cont + 1], batch["state_out_0"][cont])
        # The first step of an episode starts from the initial (zero) state.
        first = np.r_[0, np.flatnonzero(eps[1:] != eps[:-1]) + 1]
        starts = batch[SampleBatch.T][first] == 0
        assert np.all(batch["state_in_0"][first[starts]] == 0)
    finally:
        trainer.stop()
