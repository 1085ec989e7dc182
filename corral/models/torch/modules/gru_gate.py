"""The GRU-type gate of GTrXL (Parisotto et al. 2019, arXiv:1910.06764, eq. 8), which
replaces a transformer's residual sum: ``x + f(x)`` becomes ``gate(x, f(x))``."""

from __future__ import annotations

import torch
from torch import nn

from corral.models.torch.torch_modelv2 import TensorType


class GRUGate(nn.Module):
    """``gate((h, y))``: the stream ``h`` updated by the layer's output ``y``.

    ``r = sigmoid(y W_r + h U_r)``, ``z = sigmoid(y W_z + h U_z - b_g)``,
    ``h' = tanh(y W_h + (r * h) U_h)``, out ``(1 - z) * h + z * h'``. A positive
    ``init_bias`` (``b_g``) starts the gate near the identity, which the paper finds makes
    RL training stable.

    Args:
        dim: the feature size of ``h`` and ``y``.
        init_bias: the initial gate bias ``b_g``.
    """

    def __init__(self, dim: int, init_bias: float = 0.0) -> None:
        super().__init__()

        def weight() -> nn.Parameter:
            w = nn.Parameter(torch.empty(dim, dim))
            nn.init.xavier_normal_(w)
            return w

        self._w_r, self._w_z, self._w_h = weight(), weight(), weight()
        self._u_r, self._u_z, self._u_h = weight(), weight(), weight()
        self._bias_z = nn.Parameter(torch.full((dim,), float(init_bias)))

    def forward(self, inputs: tuple[TensorType, TensorType]) -> TensorType:
        """``inputs``: ``(h, y)``, the stream and the layer's output (RLlib's order)."""
        h, y = inputs
        r = torch.sigmoid(y @ self._w_r + h @ self._u_r)
        z = torch.sigmoid(y @ self._w_z + h @ self._u_z - self._bias_z)
        candidate = torch.tanh(y @ self._w_h + (r * h) @ self._u_h)
        return (1 - z) * h + z * candidate
