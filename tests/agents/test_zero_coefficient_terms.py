"""Every policy-gradient loss leaves a zero-weighted entropy (and KL) term out of the
autograd graph, still reporting its value; with a non-zero weight it is differentiated."""

from __future__ import annotations

import pytest
import torch

from corral.agents.registry import get_trainer_class
from corral.models.torch.torch_action_dist import TorchCategorical

BASE = {
    "env": "CartPole-v1",
    "num_workers": 0,
    "rollout_fragment_length": 20,
    "train_batch_size": 40,
    "min_time_s_per_reporting": 0,
    "seed": 0,
}
ROWS = {
    "PPO": {"sgd_minibatch_size": 40, "num_sgd_iter": 1, "kl_coeff": 0.0},
    "APPO": {"use_kl_loss": False},
    "IMPALA": {},
    "A2C": {},
}


def _grad_modes_of_entropy(monkeypatch, name: str, entropy_coeff: float) -> tuple[list, dict]:
    """(grad mode at each loss's entropy call, the learner stats) of one trained batch."""
    modes: list[bool] = []
    original = TorchCategorical.entropy

    def spy(self):
        modes.append(torch.is_grad_enabled())
        return original(self)

    monkeypatch.setattr(TorchCategorical, "entropy", spy)
    trainer = get_trainer_class(name)(config={**BASE, **ROWS[name], "entropy_coeff": entropy_coeff})
    try:
        stats: dict = {}
        for _ in range(200):  # IMPALA/APPO's learner thread trains asynchronously
            info = trainer.train()["info"]["learner"]
            stats = info.get("default_policy", {}).get("learner_stats", {})
            if modes and stats:
                break
        return modes, stats
    finally:
        trainer.stop()


@pytest.mark.parametrize("name", sorted(ROWS))
def test_zero_weighted_entropy_is_a_statistic_only(monkeypatch, name):
    modes, stats = _grad_modes_of_entropy(monkeypatch, name, 0.0)
    assert modes and not any(modes)
    entropy = stats.get("entropy", stats.get("policy_entropy"))
    assert entropy is not None and entropy > 0
    modes, _ = _grad_modes_of_entropy(monkeypatch, name, 0.01)
    assert modes and all(modes)
