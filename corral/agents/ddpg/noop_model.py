"""RLlib's no-op model for DDPG: its output is the (flat) observation itself.

``NoopModel`` is RLlib's TensorFlow version and a stand-in here (served from the surface
table); ``TorchNoopModel`` is the torch one.
"""

from __future__ import annotations

from typing import Any

from torch import nn

from corral.models.torch.torch_modelv2 import TorchModelV2

__all__ = ["TorchNoopModel"]


class TorchNoopModel(TorchModelV2, nn.Module):
    """Passes the flat observations through as the model output (DDPG's actor and critic
    heads then read the raw observation)."""

    def forward(self, input_dict: dict, state: list, seq_lens: Any) -> tuple[Any, list]:
        return input_dict["obs_flat"].float(), state
