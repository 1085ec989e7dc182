"""QMIX solves the two-step game (Rashid et al. 2018, section 5.1; RLlib's example): the
optimal joint return is 8, which needs the non-linear mixing of QMIX (VDN's sum cannot
represent the payoffs of state 2B and may settle for 7)."""

import time

import pytest

from corral.agents.qmix import QMixTrainer
from tests.fixtures.two_step_game import GroupedTwoStepGame

MAX_ENV_STEPS = 20_000
TIME_LIMIT_S = 60.0


@pytest.mark.learning
def test_qmix_solves_the_two_step_game():
    config = {
        "env": GroupedTwoStepGame,
        "env_config": {"one_hot_state_encoding": True, "separate_state_space": True},
        "mixer": "qmix",
        "seed": 0,
        # Greedy (epsilon 0) after 5,000 env steps: the sampled return is the greedy one.
        "exploration_config": {"epsilon_timesteps": 5000, "final_epsilon": 0.0},
        "replay_buffer_config": {"learning_starts": 500},
        "target_network_update_freq": 100,
        "timesteps_per_iteration": 1000,
        "min_time_s_per_reporting": 0,
    }
    trainer = QMixTrainer(config=config)
    start = time.perf_counter()
    curve = []
    try:
        while True:
            result = trainer.train()
            curve.append((result["timesteps_total"], result["episode_reward_mean"]))
            solved = result["timesteps_total"] > 5000 and result["episode_reward_mean"] >= 8.0
            if solved or result["timesteps_total"] >= MAX_ENV_STEPS:
                break
    finally:
        trainer.stop()
    elapsed = time.perf_counter() - start
    print(f"QMIX on the two-step game: {curve} in {elapsed:.1f} s")
    assert curve[-1][1] >= 8.0, f"only {curve[-1][1]} after {curve[-1][0]} steps: {curve}"
    assert elapsed < TIME_LIMIT_S
