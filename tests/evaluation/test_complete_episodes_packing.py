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
