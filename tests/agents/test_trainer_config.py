"""RLlib 1.13's TrainerConfig builders for every built algorithm."""

from __future__ import annotations

import pytest

from corral.agents import TrainerConfig
from corral.agents.pg import PGConfig
from corral.agents.ppo import PPOConfig, PPOTrainer
from corral.agents.ppo.ppo import DEFAULT_CONFIG as PPO_DEFAULTS
from corral.agents.trainer_config import (
    A2CConfig,
    APPOConfig,
    DDPGConfig,
    DQNConfig,
    SACConfig,
    SimpleQConfig,
    TD3Config,
)


def test_ppo_config_chains_to_a_classic_dict():
    config = (
        PPOConfig()
        .training(lr=1e-3, lambda_=0.9, num_sgd_iter=2, model={"fcnet_hiddens": [16]})
        .rollouts(num_rollout_workers=0, rollout_fragment_length=50)
        .environment(env="CartPole-v1")
        .multi_agent(count_steps_by="agent_steps")
        .callbacks(PPO_DEFAULTS["callbacks"])
    )
    d = config.to_dict()
    assert d["lr"] == 1e-3 and d["lambda"] == 0.9 and config.lambda_ == 0.9
    assert d["num_workers"] == 0 and config.num_rollout_workers == 0
    assert d["model"]["fcnet_hiddens"] == [16]
    assert d["model"]["fcnet_activation"] == PPO_DEFAULTS["model"]["fcnet_activation"]
    assert d["multiagent"]["count_steps_by"] == "agent_steps"
    assert d["kl_coeff"] == PPO_DEFAULTS["kl_coeff"]
    assert "policies" not in d


def test_build_trains():
    config = (
        PPOConfig()
        .training(train_batch_size=64, sgd_minibatch_size=32, num_sgd_iter=1)
        .rollouts(num_rollout_workers=0, rollout_fragment_length=64)
    )
    trainer = config.build(env="CartPole-v1")
    try:
        assert isinstance(trainer, PPOTrainer)
        assert trainer.train()["timesteps_total"] == 64
    finally:
        trainer.stop()


def test_unknown_argument_names_the_method():
    with pytest.raises(TypeError, match=r"rollouts\(\).*num_workerz"):
        PPOConfig().rollouts(num_workerz=1)
    with pytest.raises(TypeError, match="not_a_key"):
        PGConfig().training(not_a_key=1)


@pytest.mark.parametrize(
    "cls",
    [
        PPOConfig,
        PGConfig,
        APPOConfig,
        A2CConfig,
        DQNConfig,
        SimpleQConfig,
        SACConfig,
        DDPGConfig,
        TD3Config,
    ],
)
def test_every_built_algorithm_has_a_builder(cls):
    config = cls().training(lr=0.005)
    assert isinstance(config, TrainerConfig) and config.trainer_class is not None
    assert config.to_dict()["lr"] == 0.005
    assert config.copy().to_dict() == config.to_dict()
