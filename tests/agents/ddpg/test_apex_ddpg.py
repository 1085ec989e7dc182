"""Ape-X DDPG: RLlib 1.13's defaults, Ape-X's settings shared with Ape-X DQN, per-worker
Ornstein-Uhlenbeck noise, and a short training run with two workers."""

import numpy as np
import pytest

from corral.agents.apex_common import APEX_CONFIG, ApexTrainerMixin
from corral.agents.ddpg import (
    APEX_DDPG_DEFAULT_CONFIG,
    DEFAULT_CONFIG,
    ApexDDPGTrainer,
    DDPGTrainer,
)
from corral.agents.dqn import APEX_DEFAULT_CONFIG, ApexTrainer
from corral.agents.registry import get_trainer_class

FAST = {
    "num_workers": 2,
    "learning_starts": 40,
    "rollout_fragment_length": 10,
    "train_batch_size": 16,
    "timesteps_per_iteration": 40,
    "min_iter_time_s": 0,
    "target_network_update_freq": 0,
    "actor_hiddens": [16],
    "critic_hiddens": [16],
    "replay_buffer_config": {"capacity": 1000},
    "seed": 0,
}


def test_defaults_are_rllib_1_13s():
    c = APEX_DDPG_DEFAULT_CONFIG
    # rllib/agents/ddpg/apex.py of RLlib 1.13 (its `buffer_size` is the capacity here).
    assert c["exploration_config"] == {"type": "PerWorkerOrnsteinUhlenbeckNoise"}
    assert c["n_step"] == 3 and c["num_workers"] == 32 and c["num_gpus"] == 0
    assert c["replay_buffer_config"]["capacity"] == 2_000_000
    assert c["learning_starts"] == 50_000 and c["train_batch_size"] == 512
    assert c["rollout_fragment_length"] == 50
    assert c["target_network_update_freq"] == 500_000
    assert c["timesteps_per_iteration"] == 25_000 and c["min_iter_time_s"] == 30
    assert c["worker_side_prioritization"] is True and c["prioritized_replay"] is True
    # The rest is DDPG's.
    for key in ("actor_hiddens", "critic_hiddens", "tau", "actor_lr", "critic_lr", "l2_reg"):
        assert c[key] == DEFAULT_CONFIG[key], key
    assert c["twin_q"] is False and c["policy_delay"] == 1


def test_apex_settings_are_shared_with_apex_dqn():
    for key, value in APEX_CONFIG.items():
        if key == "replay_buffer_config":
            for config in (APEX_DDPG_DEFAULT_CONFIG, APEX_DEFAULT_CONFIG):
                assert config[key]["capacity"] == value["capacity"]
            continue
        assert APEX_DDPG_DEFAULT_CONFIG[key] == value == APEX_DEFAULT_CONFIG[key], key
    assert APEX_DEFAULT_CONFIG["exploration_config"] == {"type": "PerWorkerEpsilonGreedy"}
    assert issubclass(ApexTrainer, ApexTrainerMixin)
    assert issubclass(ApexDDPGTrainer, ApexTrainerMixin)


def test_registry_and_class():
    assert get_trainer_class("APEX_DDPG") is ApexDDPGTrainer
    assert issubclass(ApexDDPGTrainer, DDPGTrainer)
    assert ApexDDPGTrainer.get_default_config() is APEX_DDPG_DEFAULT_CONFIG


def _noise_size(worker) -> float:
    """Mean |exploring action - deterministic action| of the worker's policy over 200
    steps on one observation (the OU process moves on every exploring step)."""
    policy = worker.get_policy()
    obs = np.array([1.0, 0.0, 0.0], np.float32)
    greedy = policy.compute_single_action(obs, explore=False)[0]
    explored = [policy.compute_single_action(obs, explore=True)[0] for _ in range(200)]
    return float(np.mean(np.abs(np.asarray(explored) - greedy)))


def test_each_worker_explores_with_its_own_noise_scale():
    config = {**FAST, "exploration_config": {"random_timesteps": 0}}
    trainer = ApexDDPGTrainer(config=config, env="Pendulum-v1")
    try:
        scales = trainer.workers.foreach_worker(lambda w: w.get_policy().exploration.scale())
        # The driver's worker (no noise), then workers 1 and 2 of 2: 0.4 and 0.4 ** 8.
        assert scales == pytest.approx([0.0, 0.4, 0.4**8])
        local, first, second = trainer.workers.foreach_worker(_noise_size)
        assert local == 0.0
        # The OU noise (base scale 0.1 of the action range 4) differs by 0.4 ** 7.
        assert first > 0.01 and 0 < second < first / 100
    finally:
        trainer.stop()


def test_trains_with_two_workers():
    trainer = ApexDDPGTrainer(config=FAST, env="Pendulum-v1")
    try:
        for _ in range(3):
            result = trainer.train()
        assert result["num_healthy_workers"] == 2
        stats = result["info"]["learner"]["default_policy"]["learner_stats"]
        assert np.isfinite(stats["critic_loss"]) and np.isfinite(stats["actor_loss"])
        assert result["timesteps_total"] >= 120
        assert len(trainer.local_replay_buffer) == result["timesteps_total"]
    finally:
        trainer.stop()


def test_rllib_apex_optimizer_keys_are_dropped_with_a_warning(caplog):
    # RLlib's Ape-X configs set `optimizer: {num_replay_buffer_shards: ...}`; corral's
    # `optimizer` is Adam's arguments, which would refuse them.
    config = {
        **FAST,
        "num_workers": 0,
        "optimizer": {"num_replay_buffer_shards": 2, "max_weight_sync_delay": 400, "eps": 1e-7},
    }
    with caplog.at_level("WARNING"):
        trainer = ApexDDPGTrainer(config=config, env="Pendulum-v1")
    try:
        assert trainer.config["optimizer"] == {"eps": 1e-7}
        assert "num_replay_buffer_shards" in caplog.text
        trainer.train()
    finally:
        trainer.stop()


def test_replay_shards_away_from_the_driver_are_not_built():
    assert APEX_DDPG_DEFAULT_CONFIG["replay_buffer_shards_colocated_with_driver"] is True
    config = {**FAST, "num_workers": 0, "replay_buffer_shards_colocated_with_driver": False}
    with pytest.raises(NotImplementedError, match="replay_buffer_shards_colocated_with_driver"):
        ApexDDPGTrainer(config=config, env="Pendulum-v1")
