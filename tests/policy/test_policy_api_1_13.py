"""RLlib 1.13's `Policy` methods that user code calls on any policy."""

import logging
import platform

import pytest

from corral.agents.dqn import DQNTrainer


@pytest.fixture(scope="module")
def dqn():
    trainer = DQNTrainer(
        env="CartPole-v1",
        config={
            "num_workers": 0,
            "seed": 0,
            "learning_starts": 0,
            "min_sample_timesteps_per_reporting": 100,
            "min_time_s_per_reporting": 0,
            "exploration_config": {"epsilon_timesteps": 1000, "final_epsilon": 0.1},
        },
    )
    trainer.train()
    yield trainer
    trainer.stop()


def test_exploration_state_has_the_current_values(dqn, caplog):
    policy = dqn.get_policy()
    state = policy.get_exploration_state()
    # About 100 of 1,000 steps from 1.0 down to 0.1.
    assert 90 <= state["last_timestep"] <= 100
    assert state["cur_epsilon"] == pytest.approx(1.0 - 0.9 * state["last_timestep"] / 1000)
    with caplog.at_level(logging.WARNING):
        assert policy.get_exploration_info() == state
    assert "get_exploration_info" in caplog.text


def test_apply_session_host_and_framework(dqn):
    policy = dqn.get_policy()
    assert policy.apply(lambda p, k, scale=1: (p is policy, k * scale), 2, scale=3) == (True, 6)
    assert policy.get_session() is None
    assert policy.get_host() == platform.node()
    assert policy.framework == "torch"
    # Through the workers, as RLlib 1.x code reaches its policies.
    assert dqn.workers.foreach_policy(lambda p, pid: p.framework) == ["torch"]
