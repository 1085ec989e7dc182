"""batch_mode="complete_episodes": whole episodes, just enough of them (RLlib 1.13)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from corral.agents.pg import PGTrainer


class TenSteps(gym.Env):
    """Every episode lasts exactly 10 steps (terminated)."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        self.t = 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.zeros(2, np.float32), 1.0, self.t >= 10, False, {}


def _worker(**config):
    trainer = PGTrainer(
        config={
            "env": TenSteps,
            "num_workers": 0,
            "batch_mode": "complete_episodes",
            "rollout_fragment_length": 15,
            **config,
        }
    )
    return trainer, trainer.workers.local_worker()


def test_fragment_15_with_10_step_episodes_is_exactly_two_episodes():
    trainer, worker = _worker()
    try:
        for _ in range(4):
            batch = worker.sample()
            assert batch.count == 20
            assert len(np.unique(batch["eps_id"])) == 2
            assert batch["dones"][-1]
    finally:
        trainer.stop()


def test_a_horizon_cut_counts_as_an_episode_end():
    trainer, worker = _worker(horizon=4)
    try:
        batch = worker.sample()
        # Episodes are cut at 4 steps: 4 of them reach 15 steps.
        assert batch.count == 16
        assert batch["truncateds"].sum() == 4
    finally:
        trainer.stop()


class LongEpisodes(TenSteps):
    """Episodes of 1,000 steps: longer than the (lowered) wait before the warning."""

    def step(self, action):
        self.t += 1
        return np.zeros(2, np.float32), 1.0, self.t >= 1000, False, {}


def test_a_long_wait_for_a_whole_episode_warns_once_and_goes_on(monkeypatch, caplog):
    # An env whose episodes never end makes complete_episodes sampling step forever (as
    # in RLlib 1.13): after the limit one warning names `horizon` and truncate_episodes.
    from corral.env.multi_agent_env import make_multi_agent
    from corral.evaluation import sampler_base

    monkeypatch.setattr(sampler_base.WholeEpisodeWait, "MIN_STEPS", 200)
    for env in (LongEpisodes, make_multi_agent(lambda _: LongEpisodes())):
        caplog.clear()
        trainer, worker = _worker(env=env, rollout_fragment_length=1)
        try:
            with caplog.at_level("WARNING", logger=sampler_base.__name__):
                assert worker.sample().env_steps() == 1000
                worker.sample()
            warned = [r.message for r in caplog.records if "no episode has ended" in r.message]
            assert len(warned) == 1, warned
            assert "200 env steps" in warned[0] and "`horizon`" in warned[0]
        finally:
            trainer.stop()
