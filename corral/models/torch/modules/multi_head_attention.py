"""Causal multi-head self-attention over a sequence (Vaswani et al. 2017)."""

from __future__ import annotations

import torch
from torch import nn

from corral.models.torch.misc import SlimFC
from corral.models.torch.torch_modelv2 import TensorType


class MultiHeadAttention(nn.Module):
    """Each step attends to itself and the steps before it.

    Args:
        in_dim: input features per step.
        out_dim: output features per step.
        num_heads: attention heads.
        head_dim: features per head (queries, keys and values).
    """

    def __init__(self, in_dim: int, out_dim: int, num_heads: int, head_dim: int) -> None:
        super().__init__()
        self._num_heads = num_heads
        self._head_dim = head_dim
        self._qkv_layer = SlimFC(in_dim, 3 * num_heads * head_dim, use_bias=False)
        self._linear_layer = SlimFC(num_heads * head_dim, out_dim, use_bias=False)

    def forward(self, inputs: TensorType) -> TensorType:
        """``[B, T, in_dim]`` -> ``[B, T, out_dim]``."""
        batch, steps = inputs.shape[:2]
        shape = (batch, steps, self._num_heads, self._head_dim)
        queries, keys, values = (
            part.reshape(shape) for part in self._qkv_layer(inputs).chunk(3, dim=-1)
        )
        scores = torch.einsum("bihd,bjhd->bijh", queries, keys) / self._head_dim**0.5
        future = torch.ones(steps, steps, dtype=torch.bool, device=inputs.device).triu(1)
        scores = scores.masked_fill(future[None, :, :, None], float("-inf"))
        weights = torch.softmax(scores, dim=2)
        out = torch.einsum("bijh,bjhd->bihd", weights, values)
        return self._linear_layer(out.reshape(batch, steps, -1))
