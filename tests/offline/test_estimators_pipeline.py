"""`input_evaluation` through a trainer: estimates from offline files in `train()` results."""

from __future__ import annotations

import gymnasium as gym
import pytest

from corral.agents.marwil import MARWILTrainer
from corral.agents.pg import PGTrainer


@pytest.fixture(scope="module")
def pg_files(tmp_path_factory):
    """1,000 CartPole-v1 steps written by an untrained PG policy, whole episodes per line."""
    out = tmp_path_factory.mktemp("pg_cartpole")
    trainer = PGTrainer(
        config={"output": str(out), "batch_mode": "complete_episodes", "seed": 0},
        env="CartPole-v1",
    )
    try:
        worker = trainer.workers.local_worker()
        steps = 0
        while steps < 1000:
            steps += worker.sample().env_steps()
    finally:
        trainer.stop()
    return out


def test_estimates_and_simulation_are_reported(pg_files):
    trainer = MARWILTrainer(
        config={
            "input": str(pg_files),
            "input_evaluation": ["is", "wis", "dm", "dr", "simulation"],
            "input_config": {"q_model": {"n_iters": 2}},
            "train_batch_size": 200,
            "seed": 0,
        },
        env="CartPole-v1",
    )
    try:
        result = trainer.train()
    finally:
        trainer.stop()
    estimates = result["off_policy_estimator"]
    assert set(estimates) == {"is", "wis", "dm", "dr"}
    assert set(estimates["is"]) == {"V_prev", "V_step_IS", "V_gain_est"}
    assert set(estimates["dr"]) == {"V_prev", "V_DR", "V_gain_est"}
    # An untrained policy's discounted return from CartPole's start is well above 0.
    assert estimates["is"]["V_prev"] > 5.0
    # "simulation": the episodes reported are the env's, run next to the input.
    assert result["episodes_this_iter"] > 0 and result["episode_reward_mean"] > 0


def test_no_estimates_when_sampling_the_env():
    trainer = MARWILTrainer(config={"train_batch_size": 200}, env="CartPole-v1")
    try:
        assert trainer.train()["off_policy_estimator"] == {}
    finally:
        trainer.stop()


def test_simulation_without_an_env_is_refused(pg_files):
    space = gym.make("CartPole-v1")
    trainer = MARWILTrainer(
        config={
            "input": str(pg_files),
            "input_evaluation": ["simulation"],
            "observation_space": space.observation_space,
            "action_space": space.action_space,
        }
    )
    try:
        with pytest.raises(ValueError, match="simulation"):
            trainer.train()
    finally:
        trainer.stop()
