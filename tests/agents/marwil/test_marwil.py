"""MARWIL's and BC's loss against a hand computation, their returns, config and training."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.agents.marwil import (
    BC_DEFAULT_CONFIG,
    DEFAULT_CONFIG,
    BCTrainer,
    MARWILTorchPolicy,
    MARWILTrainer,
)
from corral.agents.marwil.marwil_torch_policy import postprocess_advantages
from corral.policy.sample_batch import SampleBatch

OBS_SPACE = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)


def make_policy(**overrides) -> MARWILTorchPolicy:
    config = {**DEFAULT_CONFIG, **overrides}
    torch.manual_seed(0)
    return MARWILTorchPolicy(OBS_SPACE, gym.spaces.Discrete(2), config)


def train_batch(n: int = 6) -> dict[str, torch.Tensor]:
    rng = np.random.default_rng(1)
    return {
        SampleBatch.OBS: torch.from_numpy(rng.uniform(-1, 1, (n, 3)).astype(np.float32)),
        SampleBatch.ACTIONS: torch.from_numpy(rng.integers(0, 2, n)),
        SampleBatch.ADVANTAGES: torch.from_numpy(rng.normal(3.0, 2.0, n).astype(np.float32)),
    }


def by_hand(policy, batch, c2_before: float):
    cfg = policy.config
    with torch.no_grad():
        logits, values = policy.forward_train(batch)
        logp = torch.log_softmax(logits, -1).gather(1, batch["actions"].view(-1, 1)).squeeze(1)
        adv = batch["advantages"] - values
        if cfg["beta"] == 0.0:
            return float(-logp.mean()), c2_before
        c2 = c2_before + cfg["moving_average_sqd_adv_norm_update_rate"] * (
            float((adv**2).mean()) - c2_before
        )
        weights = torch.exp(cfg["beta"] * adv / (1e-8 + c2**0.5))
        p_loss = -(weights * logp).mean()
        v_loss = 0.5 * (adv**2).mean()
        return float(p_loss + cfg["vf_coeff"] * v_loss), c2


def test_marwil_loss_is_the_hand_computation():
    policy = make_policy(beta=0.7, vf_coeff=0.3, moving_average_sqd_adv_norm_update_rate=0.5)
    batch = train_batch()
    expected, c2 = by_hand(policy, batch, 100.0)
    loss, stats = policy.loss(policy.model, policy.dist_class, batch)
    assert float(loss.detach()) == pytest.approx(expected, rel=1e-5)
    assert float(stats["moving_average_sqd_adv_norm"]) == pytest.approx(c2, rel=1e-5)
    # A second minibatch continues from the updated average.
    expected2, c2b = by_hand(policy, batch, c2)
    loss2, _ = policy.loss(policy.model, policy.dist_class, batch)
    assert float(loss2.detach()) == pytest.approx(expected2, rel=1e-5)
    assert policy.extra_state()["moving_average_sqd_adv_norm"] == pytest.approx(c2b, rel=1e-5)


def test_bc_loss_is_the_negative_log_likelihood():
    policy = make_policy(beta=0.0)
    batch = train_batch()
    expected, _ = by_hand(policy, batch, 100.0)
    loss, stats = policy.loss(policy.model, policy.dist_class, batch)
    assert float(loss.detach()) == pytest.approx(expected, rel=1e-6)
    assert "vf_loss" not in stats


def test_returns_are_discounted_and_bootstrapped_at_cuts():
    policy = make_policy(gamma=0.5)
    batch = SampleBatch(
        {
            SampleBatch.OBS: np.zeros((4, 3), np.float32),
            SampleBatch.NEXT_OBS: np.zeros((4, 3), np.float32),
            SampleBatch.ACTIONS: np.zeros(4, np.int64),
            SampleBatch.REWARDS: np.array([1.0, 2.0, 4.0, 8.0], np.float32),
            SampleBatch.TERMINATEDS: np.array([False, True, False, False]),
            SampleBatch.TRUNCATEDS: np.zeros(4, bool),
            SampleBatch.EPS_ID: np.array([0, 0, 1, 1]),
            SampleBatch.VF_PREDS: np.full(4, 7.0, np.float32),
        }
    )
    v_last = float(policy.value(np.zeros((1, 3), np.float32))[0])
    out = postprocess_advantages(policy, batch)
    np.testing.assert_allclose(
        out[SampleBatch.ADVANTAGES],
        [1 + 0.5 * 2, 2, 4 + 0.5 * (8 + 0.5 * v_last), 8 + 0.5 * v_last],
        rtol=1e-5,
    )
    # The logged value predictions are left as they were.
    np.testing.assert_array_equal(out[SampleBatch.VF_PREDS], np.full(4, 7.0))


def test_configs():
    assert BC_DEFAULT_CONFIG["beta"] == 0.0 and DEFAULT_CONFIG["beta"] == 1.0
    assert DEFAULT_CONFIG["postprocess_inputs"] is True
    with pytest.raises(ValueError, match="beta"):
        BCTrainer(config={"env": "CartPole-v1", "beta": 0.5})
    with pytest.raises(ValueError, match="beta"):
        MARWILTrainer(config={"env": "CartPole-v1", "beta": -1.0})


def test_bc_imitates_the_actions_it_reads():
    # The env is sampled by the BC policy itself: its loss must still fall (it clones its
    # own actions, making them more likely).
    trainer = BCTrainer(
        config={
            "env": "CartPole-v1",
            "seed": 0,
            "lr": 1e-2,
            "train_batch_size": 200,
            "rollout_fragment_length": 200,
        }
    )
    try:
        losses = [
            trainer.train()["info"]["learner"]["default_policy"]["learner_stats"]["policy_loss"]
            for _ in range(4)
        ]
    finally:
        trainer.stop()
    assert losses[-1] < losses[0]


def test_lr_schedule_sets_the_rate_of_each_update():
    # Also what lets a PG config (which has the key) be given to BC, as RLlib 1.13 could.
    from corral.agents.pg import DEFAULT_CONFIG as PG_CONFIG

    config = {**PG_CONFIG, "env": "CartPole-v1", "seed": 0, "beta": 0.0}
    config.update(train_batch_size=100, rollout_fragment_length=100, min_time_s_per_reporting=0)
    config.update(min_sample_timesteps_per_reporting=0, lr_schedule=[[0, 1e-2], [400, 1e-3]])
    trainer = BCTrainer(config=config)
    try:
        rates = [
            trainer.train()["info"]["learner"]["default_policy"]["learner_stats"]["cur_lr"]
            for _ in range(5)
        ]
        optimizer = trainer.learner_group.local_learner.optimizers["default_policy"]
    finally:
        trainer.stop()
    assert rates[0] == pytest.approx(1e-2) and rates[-1] == pytest.approx(1e-3)
    assert all(a > b for a, b in zip(rates[:4], rates[1:4]))
    assert optimizer.param_groups[0]["lr"] == pytest.approx(1e-3)
    with pytest.raises(TypeError, match="lr_schedule"):
        BCTrainer(config={"env": "CartPole-v1", "lr_schedule": "fast"})
