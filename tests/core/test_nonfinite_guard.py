"""The learner never applies a NaN/inf update (issue 11, item 9).

A non-finite loss or gradient raises `NonFiniteUpdateError` naming the policy and
the loss term before the optimiser changes any weight; with
`skip_nonfinite_updates` the minibatch is skipped and counted; a step that itself
overflows the weights is undone. Weights are never left non-finite.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from corral.agents.ppo import PPOTrainer
from corral.agents.sac import SACTrainer
from corral.core.learner import NonFiniteUpdateError

SMALL = {
    "num_workers": 0,
    "rollout_fragment_length": 20,
    "train_batch_size": 40,
    "sgd_minibatch_size": 20,
    "num_sgd_iter": 2,
    "model": {"fcnet_hiddens": [8]},
    "seed": 0,
}


def _weights(trainer, pid="default_policy"):
    return {k: np.array(v, copy=True) for k, v in trainer.get_policy(pid).get_weights().items()}


def _assert_same(a, b):
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def _assert_finite(weights):
    for k, v in weights.items():
        assert np.isfinite(v).all(), k


def _poison_loss(policy, term="vf_loss"):
    """Make the policy's loss (and the named stat) NaN."""
    original = policy.loss

    def loss(model, dist_class, batch):
        total, stats = original(model, dist_class, batch)
        stats = dict(stats)
        stats[term] = stats.get(term, total) * float("nan")
        return total * float("nan"), stats

    policy.loss = loss


def test_nan_loss_raises_naming_policy_and_term_and_changes_no_weight():
    trainer = PPOTrainer(config=SMALL, env="CartPole-v1")
    try:
        before = _weights(trainer)
        _poison_loss(trainer.get_policy())
        with pytest.raises(NonFiniteUpdateError, match=r"Policy 'default_policy'.*'vf_loss'"):
            trainer.train()
        _assert_same(before, _weights(trainer))
    finally:
        trainer.stop()


def test_nan_gradient_with_finite_loss_names_the_gradient():
    trainer = PPOTrainer(config=SMALL, env="CartPole-v1")
    try:
        policy = trainer.get_policy()
        before = _weights(trainer)
        param = next(policy.model.parameters())
        param.register_hook(lambda grad: grad * float("nan"))
        with pytest.raises(
            NonFiniteUpdateError, match=r"'default_policy'.*gradient.*loss is finite"
        ):
            trainer.train()
        _assert_same(before, _weights(trainer))
    finally:
        trainer.stop()


def test_skip_nonfinite_updates_skips_and_counts():
    trainer = PPOTrainer(config={**SMALL, "skip_nonfinite_updates": True}, env="CartPole-v1")
    try:
        before = _weights(trainer)
        _poison_loss(trainer.get_policy())
        result = trainer.train()
        stats = result["info"]["learner"]["default_policy"]["learner_stats"]
        # 40 rows / 20 per minibatch x 2 epochs: every one of the 4 minibatches skipped.
        assert stats["num_nonfinite_updates_skipped"] == 4
        _assert_same(before, _weights(trainer))
    finally:
        trainer.stop()


def test_skip_counter_is_zero_when_all_is_well():
    trainer = PPOTrainer(config={**SMALL, "skip_nonfinite_updates": True}, env="CartPole-v1")
    try:
        result = trainer.train()
        stats = result["info"]["learner"]["default_policy"]["learner_stats"]
        assert stats["num_nonfinite_updates_skipped"] == 0
    finally:
        trainer.stop()


def test_step_overflowing_the_weights_is_undone():
    # Finite loss and gradients, but a learning rate no float32 weight survives (the
    # config table rejects such an lr; a schedule or a custom policy could still set it).
    trainer = PPOTrainer(config=SMALL, env="CartPole-v1")
    try:
        policy = trainer.get_policy()
        before = _weights(trainer)
        policy.cur_lr = 1e39
        with pytest.raises(NonFiniteUpdateError, match=r"'default_policy'.*optimiser step"):
            trainer.train()
        after = _weights(trainer)
        _assert_finite(after)
        _assert_same(before, after)
    finally:
        trainer.stop()


def test_learn_step_policies_are_guarded_too():
    config = {
        "num_workers": 0,
        "rollout_fragment_length": 4,
        "train_batch_size": 8,
        "learning_starts": 8,
        "min_iter_time_s": 0,
        "timesteps_per_iteration": 16,
        "Q_model": {"fcnet_hiddens": [8]},
        "policy_model": {"fcnet_hiddens": [8]},
    }
    trainer = SACTrainer(config=config, env="Pendulum-v1")
    try:
        policy = trainer.get_policy()
        before = _weights(trainer)
        original = policy._losses_continuous

        def poisoned(batch):
            stats = original(batch)
            stats["critic_loss"] = stats["critic_loss"] * float("nan")
            return stats

        policy._losses_continuous = poisoned
        with pytest.raises(NonFiniteUpdateError, match=r"'default_policy'.*'critic_loss'"):
            trainer.train()
        _assert_same(before, _weights(trainer))
    finally:
        trainer.stop()


def test_learn_on_batch_path_is_guarded():
    trainer = PPOTrainer(config=SMALL, env="CartPole-v1")
    try:
        policy = trainer.get_policy()
        batch = trainer.workers.local_worker().sample()
        _poison_loss(policy)
        before = _weights(trainer)
        with pytest.raises(NonFiniteUpdateError):
            policy.learn_on_batch(batch)
        _assert_same(before, _weights(trainer))
        assert all(torch.isfinite(p).all() for p in policy.model.parameters())
    finally:
        trainer.stop()


def test_huge_but_finite_weights_are_not_taken_for_non_finite_ones():
    """The weight check reads norms, whose squares overflow past ~1e19: a weight of 1e20
    (finite; behind a saturated tanh, so the loss and gradients stay finite) must not
    read as an overflowed step."""
    trainer = PPOTrainer(config=SMALL, env="CartPole-v1")
    try:
        first_layer = next(trainer.get_policy().model.parameters())
        with torch.no_grad():
            first_layer[0, 0] = 1e20
        trainer.train()  # no NonFiniteUpdateError, nothing put back
        assert float(first_layer[0, 0]) == pytest.approx(1e20, rel=1e-3)
        _assert_finite(_weights(trainer))
    finally:
        trainer.stop()
