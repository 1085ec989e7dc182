"""An exported model computes what the policy's model computes: a custom model that
subclasses a built-in one and overrides `forward` is exported through its own forward,
not the built-in fast path it inherits."""

from __future__ import annotations

import os

import numpy as np
import torch

from corral.agents.ppo import PPOTrainer
from corral.models import ModelCatalog
from corral.models.torch.fcnet import FullyConnectedNetwork


class ShiftedLogits(FullyConnectedNetwork):
    def forward(self, input_dict, state, seq_lens):
        logits, state = super().forward(input_dict, state, seq_lens)
        return logits + torch.tensor([5.0, -5.0]), state


def test_export_uses_the_overridden_forward(tmp_path):
    ModelCatalog.register_custom_model("shifted_logits", ShiftedLogits)
    trainer = PPOTrainer(
        env="CartPole-v1", config={"num_workers": 0, "model": {"custom_model": "shifted_logits"}}
    )
    try:
        trainer.export_policy_model(str(tmp_path))
        exported = torch.jit.load(os.path.join(tmp_path, "model.pt"))
        obs = torch.as_tensor(np.random.default_rng(0).normal(size=(8, 4)), dtype=torch.float32)
        logits, _ = exported(obs)
        expected, _ = trainer.get_policy().model({"obs": obs}, [], None)
        torch.testing.assert_close(logits, expected.detach())
    finally:
        trainer.stop()
