"""Transformer-XL's attention (Dai et al. 2019, arXiv:1901.02860): each step attends to a
memory of earlier steps and to the steps of its segment up to itself, scored with
relative position encodings."""

from __future__ import annotations

from typing import Any

import torch
from torch import nn

from corral.models.torch.misc import SlimFC
from corral.models.torch.torch_modelv2 import TensorType


class RelativePositionEmbedding(nn.Module):
    """Sinusoid encodings of the distances ``seq_length - 1`` down to ``0``.

    Args:
        out_dim: the encoding size (even).
    """

    def __init__(self, out_dim: int, **kwargs: Any) -> None:
        super().__init__()
        self.out_dim = out_dim
        inverse_freq = 1.0 / (10000 ** (torch.arange(0, out_dim, 2.0) / out_dim))
        self.register_buffer("inverse_freq", inverse_freq, persistent=False)

    def forward(self, seq_length: int) -> TensorType:
        """``[seq_length, out_dim]``: row ``k`` encodes the distance ``seq_length - 1 - k``."""
        distances = torch.arange(seq_length - 1, -1, -1.0, device=self.inverse_freq.device)
        angles = distances[:, None] * self.inverse_freq[None, :]
        return torch.cat([angles.sin(), angles.cos()], dim=-1)


class RelativeMultiHeadAttention(nn.Module):
    """Attention of a segment ``[B, T, in_dim]`` over ``memory [B, Tau, in_dim]`` (no
    gradient flows into the memory) and its own steps, causally.

    Scores are Transformer-XL's: content ``(q_i + u) . k_j`` plus position ``(q_i + v) .
    W_R r(i - j)`` over ``sqrt(head_dim)``, with learned ``u``, ``v`` per head.

    Args:
        in_dim: input features per step.
        out_dim: output features per step.
        num_heads: attention heads.
        head_dim: features per head.
        input_layernorm: layer-normalise the memory and inputs first (GTrXL's pre-norm).
        output_activation: an activation class after the output layer (GTrXL: ReLU).
    """

    def __init__(
        self,
        in_dim: int,
        out_dim: int,
        num_heads: int,
        head_dim: int,
        input_layernorm: bool = False,
        output_activation: Any = None,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        self._num_heads = num_heads
        self._head_dim = head_dim
        self._qkv_layer = SlimFC(in_dim, 3 * num_heads * head_dim, use_bias=False)
        self._linear_layer = SlimFC(
            num_heads * head_dim, out_dim, use_bias=False, activation_fn=output_activation
        )
        self._uvar = nn.Parameter(torch.empty(num_heads, head_dim))
        self._vvar = nn.Parameter(torch.empty(num_heads, head_dim))
        nn.init.xavier_uniform_(self._uvar)
        nn.init.xavier_uniform_(self._vvar)
        self._pos_proj = SlimFC(in_dim, num_heads * head_dim, use_bias=False)
        self._rel_pos_embedding = RelativePositionEmbedding(in_dim)
        self._input_layernorm = nn.LayerNorm(in_dim) if input_layernorm else None

    def forward(
        self, inputs: TensorType, memory: TensorType, window: int | None = None
    ) -> TensorType:
        """``inputs [B, T, in_dim]``, ``memory [B, Tau, in_dim]`` -> ``[B, T, out_dim]``.

        ``window``: each step attends to at most this many steps before it (None: to the
        whole memory and every earlier step of the segment, as Transformer-XL does).
        """
        batch, steps = inputs.shape[:2]
        tau = memory.shape[1]
        heads, dim = self._num_heads, self._head_dim
        x = torch.cat([memory.detach(), inputs], dim=1)
        if self._input_layernorm is not None:
            x = self._input_layernorm(x)
        queries, keys, values = self._qkv_layer(x).chunk(3, dim=-1)
        queries = queries[:, -steps:].reshape(batch, steps, heads, dim)
        keys = keys.reshape(batch, tau + steps, heads, dim)
        values = values.reshape(batch, tau + steps, heads, dim)
        # r(k) for the distances tau + steps - 1 - k, projected per head.
        positions = self._pos_proj(self._rel_pos_embedding(tau + steps))
        positions = positions.reshape(tau + steps, heads, dim)
        content = torch.einsum("bihd,bjhd->bijh", queries + self._uvar, keys)
        by_distance = torch.einsum("bihd,khd->bikh", queries + self._vvar, positions)
        scores = (content + self.rel_shift(by_distance)) / dim**0.5
        i = torch.arange(steps, device=inputs.device)[:, None]
        j = torch.arange(tau + steps, device=inputs.device)[None, :]
        hidden = j > tau + i
        if window is not None:
            hidden = hidden | (j < tau + i - window)
        scores = scores.masked_fill(hidden[None, :, :, None], float("-inf"))
        weights = torch.softmax(scores, dim=2)
        out = torch.einsum("bijh,bjhd->bihd", weights, values)
        return self._linear_layer(out.reshape(batch, steps, heads * dim))

    @staticmethod
    def rel_shift(x: TensorType) -> TensorType:
        """Transformer-XL's relative shift (RLlib 1.13's, the transposed form of Dai et
        al.'s): scores by encoding row -> scores by key.

        ``x [B, T, L, H]`` holds, for each of the ``T`` queries (the last ``T`` of ``L``
        steps), its score against each of the ``L`` position encodings, row ``k`` encoding
        the distance ``L - 1 - k``. The result ``[B, T, L, H]`` holds query ``i``'s score for
        key ``j`` (which lies ``L - T + i - j`` steps back): ``x[:, i, T - 1 - i + j]`` for
        every key up to the query itself (``j <= L - T + i``). The entries of keys after the
        query (which causal attention masks) hold what the shift moves there: a 0 at
        ``j = L - T + i + 1``, then the next query's first scores.
        """
        batch, steps, length, heads = x.shape
        # One zero column in front of each query's row, then the rows read as L + 1 rows
        # of T: dropping the first T values shifts row i left by T - 1 - i.
        padded = torch.nn.functional.pad(x, (0, 0, 1, 0))
        shifted = padded.reshape(batch, length + 1, steps, heads)[:, 1:]
        return shifted.reshape(batch, steps, length, heads)
