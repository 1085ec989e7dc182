"""RLlib 1.13's small torch layers: ``SlimFC``, ``SlimConv2d``, ``AppendBiasLayer``, ..."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from torch import nn

from corral.models.utils import get_activation_fn
from corral.utils.typing import TensorType

__all__ = [
    "AppendBiasLayer",
    "Reshape",
    "SlimConv2d",
    "SlimFC",
    "normc_initializer",
    "same_padding",
    "valid_padding",
]


def normc_initializer(std: float = 1.0) -> Callable[[TensorType], None]:
    """An initializer: normal weights, each row rescaled to L2 norm `std`."""

    def initializer(tensor: TensorType) -> None:
        tensor.data.normal_(0, 1)
        tensor.data *= std / torch.sqrt(tensor.data.pow(2).sum(1, keepdim=True))

    return initializer


def _pair(x: Any) -> tuple[int, int]:
    if isinstance(x, (int, float)):
        return int(x), int(x)
    return int(x[0]), int(x[1])


def same_padding(
    in_size: tuple[int, int], filter_size: Any, stride_size: Any
) -> tuple[tuple[int, int, int, int], tuple[float, float]]:
    """The zero padding that keeps ``ceil(in / stride)`` outputs (TF's "same").

    Returns:
        ``((left, right, top, bottom), (out_height, out_width))``: the padding as
        ``nn.ZeroPad2d`` takes it, and the output size.
    """
    in_height, in_width = in_size
    filter_height, filter_width = _pair(filter_size)
    stride_height, stride_width = _pair(stride_size)
    out_height = np.ceil(float(in_height) / float(stride_height))
    out_width = np.ceil(float(in_width) / float(stride_width))
    pad_along_height = int((out_height - 1) * stride_height + filter_height - in_height)
    pad_along_width = int((out_width - 1) * stride_width + filter_width - in_width)
    pad_top = pad_along_height // 2
    pad_left = pad_along_width // 2
    padding = (pad_left, pad_along_width - pad_left, pad_top, pad_along_height - pad_top)
    return padding, (out_height, out_width)


def valid_padding(
    in_size: tuple[int, int], filter_size: Any, stride_size: Any
) -> tuple[tuple[int, int], tuple[int, int]]:
    """No padding (TF's "valid"): returns ``((0, 0), (out_height, out_width))``."""
    in_height, in_width = in_size
    filter_height, filter_width = _pair(filter_size)
    stride_height, stride_width = _pair(stride_size)
    out_height = int(np.ceil((in_height - filter_height + 1) / float(stride_height)))
    out_width = int(np.ceil((in_width - filter_width + 1) / float(stride_width)))
    return (0, 0), (out_height, out_width)


class SlimConv2d(nn.Module):
    """Optional zero padding, a ``Conv2d`` and an activation (ReLU by default).

    Args:
        in_channels: input channels.
        out_channels: output channels.
        kernel: kernel size.
        stride: stride.
        padding: ``nn.ZeroPad2d`` padding (0 or None: none).
        initializer: the weight initializer ("default": Xavier uniform; None: torch's).
        activation_fn: an activation class or name ("default": ReLU; None: none).
        bias_init: the bias' initial value.
    """

    def __init__(
        self,
        in_channels: int,
        out_channels: int,
        kernel: Any,
        stride: Any,
        padding: Any,
        initializer: Any = "default",
        activation_fn: Any = "default",
        bias_init: float = 0,
    ) -> None:
        super().__init__()
        layers: list[nn.Module] = []
        if padding:
            layers.append(nn.ZeroPad2d(padding))
        conv = nn.Conv2d(in_channels, out_channels, kernel, stride)
        if initializer:
            if initializer == "default":
                initializer = nn.init.xavier_uniform_
            initializer(conv.weight)
        nn.init.constant_(conv.bias, bias_init)
        layers.append(conv)
        if isinstance(activation_fn, str):
            activation_fn = (
                nn.ReLU if activation_fn == "default" else get_activation_fn(activation_fn, "torch")
            )
        if activation_fn is not None:
            layers.append(activation_fn())
        self._model = nn.Sequential(*layers)

    def forward(self, x: TensorType) -> TensorType:
        return self._model(x)


class SlimFC(nn.Module):
    """A ``Linear`` layer (Xavier-uniform weights by default) and an optional activation.

    Args:
        in_size: input features.
        out_size: output features.
        initializer: the weight initializer (default Xavier uniform).
        activation_fn: an activation class or name ("relu", "tanh", ...), or None.
        use_bias: whether the layer has a bias.
        bias_init: the bias' initial value.
    """

    def __init__(
        self,
        in_size: int,
        out_size: int,
        initializer: Any = None,
        activation_fn: Any = None,
        use_bias: bool = True,
        bias_init: float = 0.0,
    ) -> None:
        super().__init__()
        linear = nn.Linear(in_size, out_size, bias=use_bias)
        (initializer or nn.init.xavier_uniform_)(linear.weight)
        if use_bias:
            nn.init.constant_(linear.bias, bias_init)
        layers: list[nn.Module] = [linear]
        if isinstance(activation_fn, str):
            activation_fn = get_activation_fn(activation_fn, "torch")
        if activation_fn is not None:
            layers.append(activation_fn())
        self._model = nn.Sequential(*layers)

    def forward(self, x: TensorType) -> TensorType:
        return self._model(x)


class AppendBiasLayer(nn.Module):
    """Appends learned, input-independent values (``log_std``) to each row: for
    ``free_log_std`` Gaussian heads."""

    def __init__(self, num_bias_vars: int) -> None:
        super().__init__()
        self.log_std = nn.Parameter(torch.zeros(num_bias_vars))

    def forward(self, x: TensorType) -> TensorType:
        return torch.cat([x, self.log_std.unsqueeze(0).expand(len(x), -1)], dim=1)


class Reshape(nn.Module):
    """``x.view(*shape)`` as a layer."""

    def __init__(self, shape: list[int]) -> None:
        super().__init__()
        self.shape = shape

    def forward(self, x: TensorType) -> TensorType:
        return x.view(*self.shape)
