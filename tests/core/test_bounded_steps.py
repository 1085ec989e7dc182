"""`steps_keep_weights_finite`: where Adam's steps on clipped gradients provably keep finite
weights finite, the learner takes no copy of the weights and does not re-check them.

The claim is tested where it is tightest: float32 weights at the largest finite values,
adversarial gradients at the allowed norm, and a learning rate at the allowed bound. The
same run with a rate the check refuses does overflow, so the run can tell.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from corral.agents.dqn import DQNTrainer
from corral.agents.ppo import PPOTrainer
from corral.core.learner.finite import step_bound, steps_keep_weights_finite

FLOAT32_MAX = float(torch.finfo(torch.float32).max)


def _params(dtype=torch.float32, n=64):
    return [torch.nn.Parameter(torch.zeros(n, dtype=dtype)), torch.nn.Parameter(torch.zeros(3, 2))]


def _edge_lr(beta1, beta2, grad_norm, eps=1e-8, fraction=0.99):
    """A learning rate whose step bound is `fraction` of the largest one allowed (1e30)."""
    assert step_bound(1.0, beta1, beta2, eps, grad_norm) > 0
    return fraction * 1e30 / step_bound(1.0, beta1, beta2, eps, grad_norm)


@pytest.mark.parametrize(
    ("make", "grad_norm", "expected"),
    [
        (lambda p: torch.optim.Adam(p, lr=1e-3, fused=True), 40.0, True),
        (lambda p: torch.optim.Adam(p, lr=1e-3, foreach=True, amsgrad=True), 40.0, True),
        (lambda p: torch.optim.Adam(p, lr=1e-3, maximize=True), 40.0, True),
        (lambda p: torch.optim.AdamW(p, lr=1e-3, weight_decay=0.01), 40.0, True),
        (lambda p: torch.optim.Adam(p, lr=_edge_lr(0.9, 0.999, 1e15)), 1e15, True),
        # No bound on the step, or none that holds.
        (lambda p: torch.optim.SGD(p, lr=1e-3), 40.0, False),
        (lambda p: torch.optim.RMSprop(p, lr=1e-3), 40.0, False),
        (lambda p: torch.optim.Adam(p, lr=1e-3, weight_decay=0.1), 40.0, False),
        (lambda p: torch.optim.AdamW(p, lr=2.0, weight_decay=1.0), 40.0, False),
        (lambda p: torch.optim.Adam(p, lr=1e-3, eps=0.0), 40.0, False),
        (lambda p: torch.optim.Adam(p, lr=1e-3, betas=(0.99, 0.9)), 40.0, False),
        (lambda p: torch.optim.Adam(p, lr=_edge_lr(0.9, 0.999, 40.0, fraction=1.01)), 40.0, False),
        (lambda p: torch.optim.Adam(p, lr=1e-3), math.inf, False),
        (lambda p: torch.optim.Adam(p, lr=1e-3), 1e16, False),
        (lambda p: torch.optim.Adam(p, lr=1e-3), 0.0, False),
        (lambda p: torch.optim.Adam(p, lr=torch.tensor(1e-3)), 40.0, False),
    ],
)
def test_which_steps_are_bounded(make, grad_norm, expected):
    assert steps_keep_weights_finite(make(_params()), grad_norm) is expected


def test_hooks_subclasses_and_half_precision_are_not_bounded():
    hooked = torch.optim.Adam(_params(), lr=1e-3)
    hooked.register_step_post_hook(lambda *_: None)
    assert not steps_keep_weights_finite(hooked, 40.0)

    class MyAdam(torch.optim.Adam):
        pass

    assert not steps_keep_weights_finite(MyAdam(_params(), lr=1e-3), 40.0)
    half = torch.optim.Adam(_params(torch.float16), lr=1e-3)
    assert not steps_keep_weights_finite(half, 40.0)


def _run(optimizer, params, grad_norm, steps=300, seed=0):
    """Steps on finite gradients of global norm `grad_norm` (as `grad_clip` leaves them)
    in adversarial patterns: one sign for many steps then flipped, near-zero gradients
    (the second moment decays) before bursts, random signs, one element carrying the
    whole norm. True if the weights stayed finite throughout."""
    gen = torch.Generator().manual_seed(seed)
    for t in range(steps):
        pattern = t % 4
        grads = []
        for p in params:
            if pattern == 0:
                g = torch.full(p.shape, 1.0 if (t // 40) % 2 == 0 else -1.0, dtype=torch.float64)
            elif pattern == 2:
                g = torch.randn(p.shape, generator=gen, dtype=torch.float64).sign()
            else:
                g = torch.zeros(p.shape, dtype=torch.float64)
                g.view(-1)[t % p.numel()] = 1.0
            grads.append(g)
        total = math.sqrt(sum(float((g * g).sum()) for g in grads))
        scale = grad_norm / total * (1e-20 if pattern == 1 else 1.0)
        for p, g in zip(params, grads):
            p.grad = (g * scale).to(p.dtype)
            assert torch.isfinite(p.grad).all()
        optimizer.step()
        if not all(bool(torch.isfinite(p).all()) for p in params):
            return False
    return True


@pytest.mark.parametrize(
    "options",
    [
        {"fused": True},
        {"foreach": True, "amsgrad": True},
        {"foreach": False, "maximize": True},
        {"betas": (0.5, 0.3), "foreach": True},
        {"betas": (0.0, 0.999999), "fused": True},
    ],
)
# The largest gradients allowed (the bound is then the products on the way), and unit
# gradients with eps 1 (the bound is then the update itself: about 1e29 per step).
@pytest.mark.parametrize(("grad_norm", "eps"), [(1e15, 1e-8), (1.0, 1.0)])
def test_weights_at_float32s_largest_stay_finite_at_the_bound(options, grad_norm, eps):
    beta1, beta2 = options.get("betas", (0.9, 0.999))
    params = _params()
    with torch.no_grad():
        for p in params:
            p.copy_(
                torch.where(torch.arange(p.numel()) % 2 == 0, FLOAT32_MAX, -FLOAT32_MAX).view_as(p)
            )
    lr = _edge_lr(beta1, beta2, grad_norm, eps)
    optimizer = torch.optim.Adam(params, lr=lr, eps=eps, **options)
    assert steps_keep_weights_finite(optimizer, grad_norm)
    assert _run(optimizer, params, grad_norm)


def test_the_same_run_overflows_with_a_rate_the_check_refuses():
    # An update of about 1e32 (the steps' first moment over its denominator is about 1
    # for same-sign gradients): more than float32's spacing at its largest values.
    params = _params()
    with torch.no_grad():
        for p in params:
            p.fill_(FLOAT32_MAX)
    optimizer = torch.optim.Adam(params, lr=1e32, fused=True)
    assert not steps_keep_weights_finite(optimizer, 40.0)
    assert not _run(optimizer, params, 40.0)


def test_adamw_decay_at_the_bound_keeps_weights_finite():
    params = _params()
    with torch.no_grad():
        for p in params:
            p.fill_(-FLOAT32_MAX)
    optimizer = torch.optim.AdamW(params, lr=_edge_lr(0.9, 0.999, 1e15), weight_decay=1e-30)
    assert steps_keep_weights_finite(optimizer, 1e15)
    assert _run(optimizer, params, 1e15)


def _dqn_config(**overrides):
    return {
        "num_workers": 0,
        "rollout_fragment_length": 4,
        "train_batch_size": 8,
        "learning_starts": 8,
        "timesteps_per_iteration": 24,
        "min_time_s_per_reporting": 0,
        "model": {"fcnet_hiddens": [8]},
        "seed": 0,
        **overrides,
    }


def test_dqn_updates_take_no_weight_copy_and_keep_the_guard_without_grad_clip():
    bounded = DQNTrainer(config=_dqn_config(), env="CartPole-v1")  # grad_clip 40, Adam
    guarded = DQNTrainer(config=_dqn_config(grad_clip=None), env="CartPole-v1")
    try:
        for trainer in (bounded, guarded):
            trainer.train()
            weights = trainer.get_policy().get_weights()
            assert all(np.isfinite(v).all() for v in weights.values())
        assert bounded.learner_group._learner._snapshots == {}
        assert set(guarded.learner_group._learner._snapshots) == {"default_policy"}
    finally:
        bounded.stop()
        guarded.stop()


def test_an_overflowing_rate_is_still_undone_with_grad_clip():
    # With grad_clip set but an lr beyond the bound, the learner copies and checks the
    # weights again, and puts them back when a step overflows them (one step per update
    # here: the check after the update is what catches it).
    config = {
        "num_workers": 0,
        "rollout_fragment_length": 20,
        "train_batch_size": 40,
        "sgd_minibatch_size": 40,
        "num_sgd_iter": 1,
        "model": {"fcnet_hiddens": [8]},
        "grad_clip": 0.5,
        "seed": 0,
    }
    trainer = PPOTrainer(config=config, env="CartPole-v1")
    try:
        policy = trainer.get_policy()
        before = {k: np.array(v, copy=True) for k, v in policy.get_weights().items()}
        policy.cur_lr = 1e39
        with pytest.raises(Exception, match="optimiser step made the weights"):
            trainer.train()
        after = policy.get_weights()
        for k in before:
            np.testing.assert_array_equal(before[k], after[k], err_msg=k)
    finally:
        trainer.stop()
