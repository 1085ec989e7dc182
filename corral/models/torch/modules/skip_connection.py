"""A residual connection around a layer, summed or through a gate (``GRUGate``)."""

from __future__ import annotations

from typing import Any

from torch import nn

from corral.models.torch.torch_modelv2 import TensorType


class SkipConnection(nn.Module):
    """``x + layer(x)``, or ``fan_in_layer((x, layer(x)))`` when one is given.

    Args:
        layer: the wrapped layer; keyword arguments of ``forward`` go to it.
        fan_in_layer: what merges the input and the layer's output (None: their sum).
    """

    def __init__(self, layer: nn.Module, fan_in_layer: nn.Module | None = None, **kwargs: Any):
        super().__init__()
        self._layer = layer
        self._fan_in_layer = fan_in_layer

    def forward(self, inputs: TensorType, **kwargs: Any) -> TensorType:
        outputs = self._layer(inputs, **kwargs)
        if self._fan_in_layer is None:
            return outputs + inputs
        return self._fan_in_layer((inputs, outputs))
