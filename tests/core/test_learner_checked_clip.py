"""The learner's one-sync guard with gradient clipping (issue 17).

With `grad_clip`, the finite check of the loss and the gradients reads the global norm
the clip computes anyway; the clipped gradients must be `clip_grad_norm_`'s to the bit,
and a NaN loss or gradient, or a step that overflows the weights, must still be refused
before (or undone after) any weight changes.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from corral.agents.dqn import DQNTrainer
from corral.agents.ppo import PPOTrainer
from corral.core.learner import NonFiniteUpdateError
from corral.core.learner.finite import (
    all_finite,
    clip_grad_norm_checked,
    finite_probes,
    scalar_values,
)

PPO_SMALL = {
    "num_workers": 0,
    "rollout_fragment_length": 20,
    "train_batch_size": 40,
    "sgd_minibatch_size": 20,
    "num_sgd_iter": 2,
    "model": {"fcnet_hiddens": [8]},
    "grad_clip": 0.5,
    "seed": 0,
}
DQN_SMALL = {
    "num_workers": 0,
    "learning_starts": 32,
    "train_batch_size": 16,
    "training_intensity": 16,
    "timesteps_per_iteration": 40,
    "min_iter_time_s": 0,
    "model": {"fcnet_hiddens": [8]},
    "grad_clip": 10.0,
    "seed": 0,
}


def _weights(trainer):
    return {k: np.array(v, copy=True) for k, v in trainer.get_policy().get_weights().items()}


def _assert_same(a, b):
    assert a.keys() == b.keys()
    for k in a:
        np.testing.assert_array_equal(a[k], b[k], err_msg=k)


def _net_with_grads(scale: float) -> list[torch.Tensor]:
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3))
    (net(torch.randn(11, 5)).pow(2).sum() * scale).backward()
    return list(net.parameters())


@pytest.mark.parametrize("max_norm", [1e-3, 0.5, 1e6])
def test_clipped_gradients_are_clip_grad_norms_to_the_bit(max_norm):
    params = _net_with_grads(3.0)
    reference = [p.grad.clone() for p in params]
    ref_params = [torch.nn.Parameter(p.detach().clone()) for p in params]
    for p, g in zip(ref_params, reference):
        p.grad = g
    expected_norm = torch.nn.utils.clip_grad_norm_(ref_params, max_norm)
    optimizer = torch.optim.SGD(params, lr=0.1)
    norm = clip_grad_norm_checked(torch.tensor(1.5), optimizer, params, max_norm)
    assert norm == float(expected_norm)
    for p, ref in zip(params, ref_params):
        assert torch.equal(p.grad, ref.grad)


def test_checked_clip_refuses_nan_loss_and_nan_gradient_before_clipping():
    params = _net_with_grads(1.0)
    optimizer = torch.optim.SGD(params, lr=0.1)
    before = [p.grad.clone() for p in params]
    with pytest.raises(NonFiniteUpdateError, match="the loss is nan"):
        clip_grad_norm_checked(torch.tensor(float("nan")), optimizer, params, 1e-3)
    for p, g in zip(params, before):
        assert torch.equal(p.grad, g)  # not clipped
    params[1].grad[0] = float("inf")
    with pytest.raises(NonFiniteUpdateError, match="gradient.*loss is finite"):
        clip_grad_norm_checked(torch.tensor(1.0), optimizer, params, 1e-3)


def test_scalar_values_and_finite_probes():
    values = [torch.tensor(1.5), 2, torch.tensor([3], dtype=torch.int64), "x", torch.ones(2)]
    out = scalar_values(values)
    assert out[:4] == [1.5, 2, 3, "x"] and out[4] is values[4]
    assert type(out[2]) is int

    def probes_finite(tensors):
        return all(np.isfinite(v) for v in scalar_values(finite_probes(tensors)))

    nan, inf = float("nan"), float("inf")
    for dtype in (torch.float32, torch.float16, torch.float64):  # fused norms, sums
        finite = [torch.ones(3, dtype=dtype), torch.zeros(2, 2, dtype=dtype)]
        assert probes_finite(finite) and all_finite(finite)
        for bad in (nan, inf, -inf):
            broken = [*finite, torch.tensor([1.0, bad], dtype=dtype)]
            assert not probes_finite(broken) and not all_finite(broken)
    assert finite_probes([]) == [] and all_finite([])
    # Finite weights whose squares overflow: the probe is not finite, the exact check is.
    huge = [torch.full((4,), 1e20)]
    assert not probes_finite(huge) and all_finite(huge)


def _poison_loss(policy, term):
    original = policy.loss

    def loss(model, dist_class, batch):
        total, stats = original(model, dist_class, batch)
        stats = dict(stats)
        stats[term] = stats[term] * float("nan")
        return total * float("nan"), stats

    policy.loss = loss


def test_ppo_with_grad_clip_refuses_a_nan_loss_naming_the_term():
    trainer = PPOTrainer(config=PPO_SMALL, env="CartPole-v1")
    try:
        before = _weights(trainer)
        _poison_loss(trainer.get_policy(), "vf_loss")
        with pytest.raises(NonFiniteUpdateError, match=r"'default_policy'.*'vf_loss'"):
            trainer.train()
        _assert_same(before, _weights(trainer))
    finally:
        trainer.stop()


def test_dqn_with_grad_clip_refuses_a_nan_gradient():
    trainer = DQNTrainer(config=DQN_SMALL, env="CartPole-v1")
    try:
        policy = trainer.get_policy()
        before = _weights(trainer)
        next(policy.model.parameters()).register_hook(lambda g: g * float("nan"))
        with pytest.raises(NonFiniteUpdateError, match=r"'default_policy'.*the gradient of"):
            trainer.train()
        _assert_same(before, _weights(trainer))
    finally:
        trainer.stop()


def test_dqn_step_overflowing_the_weights_is_undone():
    trainer = DQNTrainer(config=DQN_SMALL, env="CartPole-v1")
    try:
        policy = trainer.get_policy()
        before = _weights(trainer)
        policy.cur_lr = 1e39
        with pytest.raises(NonFiniteUpdateError, match=r"'default_policy'.*optimiser step"):
            trainer.train()
        after = _weights(trainer)
        _assert_same(before, after)
    finally:
        trainer.stop()


def test_dqn_stats_are_numbers_with_the_clip_norm():
    trainer = DQNTrainer(config=DQN_SMALL, env="CartPole-v1")
    try:
        stats = trainer.train()["info"]["learner"]["default_policy"]["learner_stats"]
        for name in ("loss", "mean_q", "min_q", "max_q", "mean_td_error", "grad_gnorm"):
            assert isinstance(stats[name], float) and np.isfinite(stats[name]), name
        assert stats["min_q"] <= stats["mean_q"] <= stats["max_q"]
        assert stats["cur_lr"] == pytest.approx(DQNTrainer.get_default_config()["lr"])
    finally:
        trainer.stop()
