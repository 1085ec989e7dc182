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


def test_ppo_and_appo_adapt_their_kl_coefficient_with_rllib_s_update_kl():
    from corral.agents.ppo import PPOTrainer
    from corral.agents.ppo.appo_torch_policy import APPOTorchPolicy
    from corral.policy.torch_mixins import KLCoeffMixin

    trainer = PPOTrainer(
        env="CartPole-v1",
        config={"num_workers": 0, "kl_coeff": 0.2, "kl_target": 0.01, "train_batch_size": 128},
    )
    try:
        policy = trainer.get_policy()
        assert isinstance(policy, KLCoeffMixin) and issubclass(APPOTorchPolicy, KLCoeffMixin)
        assert policy.update_kl(0.05) == pytest.approx(0.3)  # above 2 x target: x 1.5
        assert policy.update_kl(0.001) == pytest.approx(0.15)  # below target / 2: halved
        assert policy.update_kl(0.01) == pytest.approx(0.15) == policy.kl_coeff_val
        # The learner's update adapts it the same way, from the update's mean KL.
        assert policy.after_update({"kl": 0.05}) == {"cur_kl_coeff": pytest.approx(0.225)}
    finally:
        trainer.stop()
