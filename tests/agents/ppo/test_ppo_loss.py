"""PPO's loss against a hand computation, and its zero-coefficient terms: left out of the
graph (computed as statistics, without autograd) with the same loss, gradients and stats."""

from __future__ import annotations

import pytest
import torch

from corral.agents.ppo import PPOTrainer
from corral.models.torch.torch_action_dist import TorchCategorical
from corral.policy.sample_batch import SampleBatch

CONFIG = {
    "env": "CartPole-v1",
    "num_workers": 0,
    "rollout_fragment_length": 16,
    "train_batch_size": 16,
    "sgd_minibatch_size": 16,
    "num_sgd_iter": 1,
    "vf_clip_param": 2.0,
    "seed": 0,
}


def _batch() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(5)
    return {
        SampleBatch.OBS: torch.randn(6, 4, generator=g),
        SampleBatch.ACTIONS: torch.tensor([0, 1, 1, 0, 1, 0]),
        SampleBatch.ACTION_LOGP: -torch.rand(6, generator=g),
        SampleBatch.ACTION_DIST_INPUTS: torch.randn(6, 2, generator=g),
        SampleBatch.VF_PREDS: torch.randn(6, generator=g),
        SampleBatch.ADVANTAGES: torch.randn(6, generator=g),
        SampleBatch.VALUE_TARGETS: 3 * torch.randn(6, generator=g),
    }


def _loss_and_grads(config: dict) -> tuple[float, dict, list[torch.Tensor], float]:
    """(loss, stats, gradients, the hand-computed loss) of one PPO loss on `_batch()`."""
    trainer = PPOTrainer(config={**CONFIG, **config})
    try:
        policy = trainer.get_policy()
        batch = _batch()
        params = list(policy.model.parameters())
        total, stats = policy.loss(policy.model, policy.dist_class, batch)
        grads = torch.autograd.grad(total, params, allow_unused=True)
        with torch.no_grad():
            logits, _ = policy.model({"obs": batch[SampleBatch.OBS]}, [], None)
            values = policy.model.value_function()
        logp_all = torch.log_softmax(logits, -1)
        ratio = torch.exp(
            logp_all[torch.arange(6), batch[SampleBatch.ACTIONS]] - batch[SampleBatch.ACTION_LOGP]
        )
        adv = batch[SampleBatch.ADVANTAGES]
        surrogate = torch.minimum(adv * ratio, adv * ratio.clamp(0.7, 1.3))
        old = torch.log_softmax(batch[SampleBatch.ACTION_DIST_INPUTS], -1)
        kl = (old.exp() * (old - logp_all)).sum(-1)
        entropy = -(logp_all.exp() * logp_all).sum(-1)
        vf = ((values - batch[SampleBatch.VALUE_TARGETS]) ** 2).clamp(max=2.0)
        expected = (
            -surrogate
            + config["kl_coeff"] * kl
            - config["entropy_coeff"] * entropy
            + config["vf_loss_coeff"] * vf
        ).mean()
        stats = {k: float(v.detach()) if torch.is_tensor(v) else v for k, v in stats.items()}
        stats["hand_kl"], stats["hand_entropy"] = float(kl.mean()), float(entropy.mean())
        return float(total.detach()), stats, [g for g in grads if g is not None], float(expected)
    finally:
        trainer.stop()


@pytest.mark.parametrize("kl_coeff, entropy_coeff", [(0.3, 0.05), (0.0, 0.0), (0.3, 0.0)])
def test_loss_and_stats_equal_a_hand_computation(kl_coeff, entropy_coeff):
    config = {
        "clip_param": 0.3,
        "kl_coeff": kl_coeff,
        "entropy_coeff": entropy_coeff,
        "vf_loss_coeff": 0.5,
    }
    total, stats, _, expected = _loss_and_grads(config)
    assert total == pytest.approx(expected, rel=1e-5)
    # The KL and the entropy are reported whether or not they are loss terms.
    assert stats["kl"] == pytest.approx(stats["hand_kl"], rel=1e-5)
    assert stats["entropy"] == pytest.approx(stats["hand_entropy"], rel=1e-5)
    assert stats["kl"] > 0 and stats["entropy"] > 0


def test_zero_coefficient_terms_are_computed_without_autograd(monkeypatch):
    grad_mode: dict[str, list[bool]] = {"kl": [], "entropy": []}
    for name in grad_mode:
        original = getattr(TorchCategorical, name)

        def spy(self, *args, _name=name, _original=original):
            grad_mode[_name].append(torch.is_grad_enabled())
            return _original(self, *args)

        monkeypatch.setattr(TorchCategorical, name, spy)
    zero = {"clip_param": 0.3, "kl_coeff": 0.0, "entropy_coeff": 0.0, "vf_loss_coeff": 0.5}
    total_zero, _, grads_zero, _ = _loss_and_grads(zero)
    assert grad_mode == {"kl": [False], "entropy": [False]}

    # The same loss and gradients, to the bit, as with the zero terms written into it.
    monkeypatch.undo()
    tiny = {**zero, "kl_coeff": 1e-30, "entropy_coeff": 1e-30}
    total_tiny, _, grads_tiny, _ = _loss_and_grads(tiny)
    assert total_zero == pytest.approx(total_tiny, rel=1e-6)
    assert all(torch.allclose(a, b, rtol=1e-6, atol=0) for a, b in zip(grads_zero, grads_tiny))
