"""RLlib 1.13's `training_iteration()` building blocks (corral.execution) and Trainer hooks."""

from __future__ import annotations

import numpy as np
import pytest

from corral.agents.config import with_common_config
from corral.agents.dqn import DQNTrainer
from corral.agents.dqn.dqn import DEFAULT_CONFIG as DQN_CONFIG
from corral.agents.dqn.dqn_torch_policy import DQNTorchPolicy
from corral.agents.ppo.ppo import DEFAULT_CONFIG as PPO_CONFIG
from corral.agents.ppo.ppo_torch_policy import PPOTorchPolicy
from corral.agents.trainer import Trainer
from corral.env.multi_agent_env import make_multi_agent
from corral.execution.buffers.multi_agent_replay_buffer import MultiAgentReplayBuffer
from corral.execution.rollout_ops import synchronous_parallel_sample
from corral.execution.train_ops import train_one_step
from corral.policy.sample_batch import MultiAgentBatch, SampleBatch

TwoCartPoles = make_multi_agent("CartPole-v1")


class TwoPolicyTrainer(Trainer):
    """The shape of RLlib 1.13's two_trainer_workflow example."""

    @classmethod
    def get_default_config(cls):
        return with_common_config({"_disable_execution_plan_api": True})

    def setup(self, config):
        super().setup(config)
        self.buffer = MultiAgentReplayBuffer(
            num_shards=1, learning_starts=20, capacity=1000, replay_batch_size=16
        )
        self.iterations_run = 0

    def training_iteration(self):
        self.iterations_run += 1
        batches = synchronous_parallel_sample(worker_set=self.workers, concat=False)
        assert isinstance(batches, list) and len(batches) == 1
        ma_batch = batches[0]
        self._counters["num_env_steps_sampled"] += ma_batch.count
        ppo_batch = ma_batch.policy_batches.pop("ppo_policy")
        self.buffer.add_batch(ma_batch)
        results = {}
        replayed = self.buffer.replay()
        if replayed is not None:
            results.update(train_one_step(self, replayed, ["dqn_policy"]))
        results.update(
            train_one_step(
                self, MultiAgentBatch({"ppo_policy": ppo_batch}, ppo_batch.count), ["ppo_policy"]
            )
        )
        return results


def test_training_iteration_override_with_execution_ops():
    config = {
        "env": TwoCartPoles,
        "env_config": {"num_agents": 2},
        "num_workers": 0,
        "rollout_fragment_length": 30,
        "framework": "torch",
        "multiagent": {
            "policies": {
                "ppo_policy": (PPOTorchPolicy, None, None, PPO_CONFIG),
                "dqn_policy": (DQNTorchPolicy, None, None, DQN_CONFIG),
            },
            "policy_mapping_fn": lambda aid, *a, **k: "ppo_policy" if aid == 0 else "dqn_policy",
        },
    }
    trainer = TwoPolicyTrainer(config=config)
    try:
        result = trainer.train()
        result = trainer.train()
        assert trainer.iterations_run == 2
        learner = result["info"]["learner"]
        assert set(learner) == {"ppo_policy", "dqn_policy"}
        assert result["timesteps_total"] == 60
        assert result["info"]["num_env_steps_trained"] > 0
    finally:
        trainer.stop()


def test_ppo_policy_under_dqn_trainer_gets_ppo_defaults():
    config = {
        "env": TwoCartPoles,
        "env_config": {"num_agents": 2},
        "num_workers": 0,
        "multiagent": {
            "policies": {"ppo": (PPOTorchPolicy, None, None, {}), "dqn": (None, None, None, {})},
            "policy_mapping_fn": lambda aid, *a, **k: "ppo" if aid == 0 else "dqn",
            "policies_to_train": ["dqn"],
        },
    }
    trainer = DQNTrainer(config=config)
    try:
        policy = trainer.get_policy("ppo")
        assert policy.config["kl_coeff"] == PPO_CONFIG["kl_coeff"]
        assert "kl_coeff" not in trainer.config
    finally:
        trainer.stop()


def test_synchronous_parallel_sample_step_targets():
    from corral.agents.pg import PGTrainer

    trainer = PGTrainer(
        config={"env": "CartPole-v1", "num_workers": 0, "rollout_fragment_length": 10}
    )
    try:
        batch = synchronous_parallel_sample(worker_set=trainer.workers, max_env_steps=25)
        assert isinstance(batch, SampleBatch) and batch.count == 30
        with pytest.raises(ValueError):
            synchronous_parallel_sample(trainer.workers, max_env_steps=1, max_agent_steps=1)
    finally:
        trainer.stop()


def test_replay_buffer_waits_for_learning_starts():
    buf = MultiAgentReplayBuffer(learning_starts=10, capacity=100, replay_batch_size=4)
    batch = SampleBatch({"obs": np.zeros((5, 2), np.float32), "rewards": np.ones(5, np.float32)})
    buf.add_batch(batch)
    assert buf.replay() is None
    buf.add_batch(batch)
    replayed = buf.replay()
    assert replayed.policy_batches["default_policy"].count == 4


def test_trainer_without_default_policy_class_needs_classes_in_specs():
    class Bare(Trainer):
        pass

    with pytest.raises(ValueError, match="names no policy class"):
        Bare(config={"env": "CartPole-v1", "num_workers": 0})
