"""`worker_side_prioritization`: each rollout worker computes the initial priorities of
what it samples with its own copy of the policy, and the driver adds the rows to
prioritized replay with them; the settings it cannot work with are refused by name."""

from __future__ import annotations

import numpy as np
import pytest

from corral.agents.config import merge_trainer_configs
from corral.agents.ddpg import ApexDDPGTrainer, DDPGTorchPolicy, DDPGTrainer, TD3Trainer
from corral.agents.ddpg.td3 import TD3_DEFAULT_CONFIG
from corral.agents.dqn import ApexTrainer, DQNTrainer, R2D2Trainer, SimpleQTrainer
from corral.agents.sac import RNNSACTrainer, SACTrainer
from corral.execution.rollout_ops import synchronous_parallel_sample
from corral.policy.sample_batch import SampleBatch
from corral.utils.replay_buffers import WEIGHTS, MultiAgentReplayBuffer

EPS = 1e-6

COMMON = {
    "num_workers": 2,
    "rollout_fragment_length": 8,
    "train_batch_size": 16,
    "learning_starts": 16,
    "timesteps_per_iteration": 48,
    "min_iter_time_s": 0,
    "worker_side_prioritization": True,
    "prioritized_replay": True,
    "prioritized_replay_eps": EPS,
    "replay_buffer_config": {"capacity": 1000},
    "seed": 0,
}
Q_NET = {"model": {"fcnet_hiddens": [16]}, "target_network_update_freq": 16}
Q_NETS = {**Q_NET, "hiddens": [16]}
ACTOR_CRITIC = {"actor_hiddens": [16], "critic_hiddens": [16], "target_network_update_freq": 0}

CASES = [
    pytest.param(SimpleQTrainer, "CartPole-v1", Q_NET, id="SimpleQ"),
    pytest.param(DQNTrainer, "CartPole-v1", {**Q_NETS, "n_step": 3}, id="DQN"),
    pytest.param(ApexTrainer, "CartPole-v1", Q_NETS, id="APEX"),
    pytest.param(DDPGTrainer, "Pendulum-v1", ACTOR_CRITIC, id="DDPG"),
    pytest.param(TD3Trainer, "Pendulum-v1", ACTOR_CRITIC, id="TD3"),
    pytest.param(ApexDDPGTrainer, "Pendulum-v1", ACTOR_CRITIC, id="APEX_DDPG"),
]


def _stored_priorities(trainer) -> np.ndarray:
    """The default policy's buffer priorities, oldest row first."""
    return trainer.local_replay_buffer.replay_buffers["default_policy"].get_state()["priorities"]


@pytest.mark.parametrize(("trainer_cls", "env", "extra"), CASES)
def test_worker_priorities_are_the_drivers_td_errors(trainer_cls, env, extra):
    trainer = trainer_cls(config={**COMMON, **extra}, env=env)
    try:
        # Past `learning_starts`: updated networks (targets included), synced to the workers.
        result = trainer.train()
        assert result["info"]["learner"], "no update ran: the test would prove nothing"
        policy = trainer.get_policy()
        # A fresh sample from the two remote workers, prioritized in their processes.
        batch = synchronous_parallel_sample(trainer.workers)
        assert WEIGHTS in batch and batch.count == 16
        driver = np.abs(policy.compute_td_error(batch).astype(np.float64)) + EPS
        np.testing.assert_allclose(batch[WEIGHTS], driver, rtol=1e-5, atol=1e-7)
        # The driver adds the rows with those priorities (not the largest so far).
        trainer.local_replay_buffer.add(trainer.replay_columns(batch))
        np.testing.assert_allclose(_stored_priorities(trainer)[-16:], batch[WEIGHTS], rtol=1e-6)
    finally:
        trainer.stop()


def test_without_it_new_rows_get_the_largest_priority():
    config = {**COMMON, **ACTOR_CRITIC, "worker_side_prioritization": False}
    trainer = DDPGTrainer(config=config, env="Pendulum-v1")
    try:
        trainer.train()
        batch = synchronous_parallel_sample(trainer.workers)
        assert WEIGHTS not in batch
        trainer.local_replay_buffer.add(trainer.replay_columns(batch))
        stored = _stored_priorities(trainer)
        assert np.allclose(stored[-16:], stored.max())
    finally:
        trainer.stop()


def _ddpg_policy(**overrides) -> DDPGTorchPolicy:
    import gymnasium as gym

    config = merge_trainer_configs(
        TD3_DEFAULT_CONFIG,
        {**ACTOR_CRITIC, "prioritized_replay": True, "n_step": 3, **overrides},
    )
    box = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    return DDPGTorchPolicy(box, gym.spaces.Box(-2.0, 2.0, (1,), np.float32), config)


def _trajectory(n: int = 6) -> SampleBatch:
    rng = np.random.default_rng(0)
    return SampleBatch(
        {
            SampleBatch.OBS: rng.uniform(-1, 1, (n, 3)).astype(np.float32),
            SampleBatch.NEXT_OBS: rng.uniform(-1, 1, (n, 3)).astype(np.float32),
            SampleBatch.ACTIONS: rng.uniform(-2, 2, (n, 1)).astype(np.float32),
            SampleBatch.REWARDS: rng.normal(size=n).astype(np.float32),
            SampleBatch.TERMINATEDS: np.array([False] * (n - 1) + [True]),
            SampleBatch.TRUNCATEDS: np.zeros(n, bool),
            SampleBatch.EPS_ID: np.zeros(n, np.int64),
        }
    )


def test_postprocessing_prioritizes_the_n_step_transitions_outside_evaluation():
    policy = _ddpg_policy(worker_side_prioritization=True)
    batch = policy.postprocess_trajectory(_trajectory())
    # After the 3-step returns, from the same rows the learner will replay.
    assert batch[SampleBatch.REWARDS].shape == (6,) and "n_step" in batch
    expected = np.abs(policy.compute_td_error(batch).astype(np.float64)) + EPS
    np.testing.assert_allclose(batch[WEIGHTS], expected, rtol=1e-6)
    assert (batch[WEIGHTS] > 0).all()

    assert WEIGHTS not in _ddpg_policy().postprocess_trajectory(_trajectory())
    evaluating = _ddpg_policy(worker_side_prioritization=True, in_evaluation=True)
    assert WEIGHTS not in evaluating.postprocess_trajectory(_trajectory())


def test_the_buffer_takes_a_weights_column_as_initial_priorities():
    buffer = MultiAgentReplayBuffer(100, prioritized=True, alpha=1.0, seed=0)
    rows = {"obs": np.arange(4.0), "rewards": np.ones(4)}
    buffer.add(SampleBatch(rows))  # no priorities: the largest so far (1.0)
    buffer.add(SampleBatch({**rows, WEIGHTS: np.array([0.5, 2.0, 3.0, 0.25])}))
    state = buffer.replay_buffers["default_policy"].get_state()
    assert WEIGHTS not in state["columns"]
    np.testing.assert_allclose(state["priorities"], [1, 1, 1, 1, 0.5, 2.0, 3.0, 0.25])
    # Rows without the column get the largest priority seen, now 3.0.
    buffer.add(SampleBatch(rows))
    state = buffer.replay_buffers["default_policy"].get_state()
    np.testing.assert_allclose(state["priorities"][-4:], 3.0)

    with pytest.raises(ValueError, match="finite and > 0"):
        buffer.add(SampleBatch({**rows, WEIGHTS: np.array([1.0, 0.0, 1.0, 1.0])}))
    with pytest.raises(ValueError, match="finite and > 0"):
        buffer.add(SampleBatch({**rows, WEIGHTS: np.array([1.0, np.nan, 1.0, 1.0])}))


@pytest.mark.parametrize(
    ("trainer_cls", "env", "config"),
    [
        pytest.param(TD3Trainer, "Pendulum-v1", {}, id="TD3-uniform"),
        pytest.param(DDPGTrainer, "Pendulum-v1", {"prioritized_replay": False}, id="DDPG-uniform"),
        pytest.param(SimpleQTrainer, "CartPole-v1", {}, id="SimpleQ-uniform"),
        pytest.param(ApexTrainer, "CartPole-v1", {"prioritized_replay": False}, id="APEX-uniform"),
    ],
)
def test_it_needs_prioritized_replay(trainer_cls, env, config):
    name = trainer_cls._name
    with pytest.raises(ValueError, match=rf"{name}: worker_side_prioritization=True needs prior"):
        trainer_cls(
            config={"num_workers": 0, "worker_side_prioritization": True, **config}, env=env
        )


def test_the_prioritized_buffer_type_is_prioritized_replay_too():
    config = {
        **COMMON,
        **ACTOR_CRITIC,
        "num_workers": 0,
        "prioritized_replay": False,
        "replay_buffer_config": {"type": "MultiAgentPrioritizedReplayBuffer", "capacity": 100},
    }
    trainer = TD3Trainer(config=config, env="Pendulum-v1")
    try:
        assert trainer.local_replay_buffer.prioritized
    finally:
        trainer.stop()


@pytest.mark.parametrize(
    ("trainer_cls", "env", "config"),
    [
        pytest.param(
            R2D2Trainer,
            "CartPole-v1",
            {"prioritized_replay": True, "model": {"use_lstm": True}},
            id="R2D2",
        ),
        pytest.param(
            RNNSACTrainer,
            "Pendulum-v1",
            {"prioritized_replay": True},
            id="RNNSAC",
        ),
    ],
)
def test_sequence_replay_refuses_it_by_name(trainer_cls, env, config):
    with pytest.raises(NotImplementedError, match=r"worker_side_prioritization.*R2D2 and RNNSAC"):
        trainer_cls(
            config={"num_workers": 0, "worker_side_prioritization": True, **config}, env=env
        )


def test_sac_prioritizes_in_the_workers():
    # SAC's TD errors sample the next actions, so they are not compared with the driver's.
    config = {
        **COMMON,
        "Q_model": {"fcnet_hiddens": [16]},
        "policy_model": {"fcnet_hiddens": [16]},
    }
    trainer = SACTrainer(config=config, env="Pendulum-v1")
    try:
        trainer.train()
        batch = synchronous_parallel_sample(trainer.workers)
        assert WEIGHTS in batch and np.all(batch[WEIGHTS] >= EPS)
        trainer.local_replay_buffer.add(trainer.replay_columns(batch))
        np.testing.assert_allclose(_stored_priorities(trainer)[-16:], batch[WEIGHTS], rtol=1e-6)
    finally:
        trainer.stop()


def test_hard_targets_reach_the_workers_only_when_they_moved(monkeypatch):
    """With `target_network_update_freq` > 0 the driver sends its target networks after
    a target update (and after a worker was recreated), not every step; the workers'
    TD errors still match the driver's."""
    import corral.agents.off_policy as off_policy

    sent = []
    original = off_policy.sync_target_networks
    monkeypatch.setattr(
        off_policy, "sync_target_networks", lambda *a, **k: (sent.append(1), original(*a, **k))
    )
    config = {**COMMON, **Q_NET, "target_network_update_freq": 1000, "learning_starts": 16}
    trainer = SimpleQTrainer(config=config, env="CartPole-v1")
    try:
        sent.clear()  # (setup's own sync)
        for _ in range(3):
            trainer.train()  # 144 steps, 8 training steps, no target update after the first
        assert len(sent) == 1, "targets sent more often than they moved"
        trainer.workers.recreate_worker(1)
        trainer.train()
        assert len(sent) == 2, "a recreated worker did not get the targets"
        trainer._counters["last_target_update_ts"] = -1000  # a target update is due
        trainer.train()
        assert len(sent) == 3
        policy = trainer.get_policy()
        batch = synchronous_parallel_sample(trainer.workers)
        driver = np.abs(policy.compute_td_error(batch).astype(np.float64)) + EPS
        np.testing.assert_allclose(batch[WEIGHTS], driver, rtol=1e-5, atol=1e-7)
    finally:
        trainer.stop()
