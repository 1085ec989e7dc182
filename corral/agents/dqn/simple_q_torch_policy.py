"""RLlib 1.13's `simple_q_torch_policy`: the function forms of Simple Q's policy.

corral's Simple Q policy is `DQNTorchPolicy` under Simple Q's config (no dueling, double
Q, n-step or C51: `PLAIN_Q_SETTINGS`); RLlib's `SimpleQTorchPolicy` name is that class.
These functions are its pieces, computed by the class, for composing custom policies
(`DQNTorchPolicy.with_updates(loss_fn=build_q_losses, ...)`).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from corral.agents.dqn.dqn_torch_policy import (
    DQNTorchPolicy,
    build_q_losses,
    build_q_model_and_distribution,
    extra_action_out_fn,
)
from corral.agents.dqn.dqn_torch_policy import before_loss_init as setup_late_mixins
from corral.policy.policy_template import tower_stats
from corral.policy.torch_mixins import TargetNetworkMixin

# RLlib 1.13's torch modules export `F`.
F = nn.functional


def stats_fn(policy: DQNTorchPolicy, batch: Any) -> dict[str, Any]:
    """`{"loss": ...}`: the loss of the policy's last loss computation (RLlib 1.13's
    Simple Q stats)."""
    loss = tower_stats(policy).get("loss")
    return {} if loss is None else {"loss": torch.as_tensor(loss).detach()}


__all__ = [
    "F",
    "TargetNetworkMixin",
    "build_q_losses",
    "build_q_model_and_distribution",
    "extra_action_out_fn",
    "setup_late_mixins",
    "stats_fn",
]
