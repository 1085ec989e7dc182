"""`ConvTranspose2DStack`: a decoder from a feature vector to an image distribution.

RLlib 1.13's module of the same name (Dreamer's image decoder, `ConvDecoder`, is one): a
dense layer maps the vector to a 1x1 image with `filters[0][0]` channels, which transposed
convolutions grow into the output image. The output is a unit-variance Gaussian over every
pixel, one `Independent` distribution per image (its `log_prob` sums over C, H, W).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import distributions as td
from torch import nn

from corral.models.torch.misc import Reshape
from corral.models.utils import get_activation_fn, get_initializer

# RLlib's default: Dreamer's decoder with depth 32, 64 x 64 RGB images (1 -> 5 -> 13 -> 30
# -> 64 pixels per side).
_DEFAULT_FILTERS: tuple[tuple[int, int, int], ...] = (
    (1024, 5, 2),
    (128, 5, 2),
    (64, 6, 2),
    (32, 6, 2),
)


class ConvTranspose2DStack(nn.Module):
    """Dense layer, then transposed 2-D convolutions, to an image distribution.

    Args:
        input_size: size of the input vector (the last axis of the input).
        filters: one `(in_channels, kernel, stride)` per transposed convolution; a layer's
            output channels are the next layer's `in_channels`, the last layer's the
            image's channels (`output_shape[0]`).
        initializer: the convolutions' weight initializer ("default"/"xavier_uniform",
            "xavier_normal", or a callable on the weight tensor).
        bias_init: the convolutions' initial bias.
        activation_fn: activation between the convolutions (a name such as "relu", an
            `nn.Module` class, or None for none); none after the last one.
        output_shape: the image's `(channels, height, width)`; the filters must produce
            exactly that height and width.

    Raises:
        ValueError: `filters` is empty, or does not produce `output_shape`.
    """

    def __init__(
        self,
        *,
        input_size: int,
        filters: Sequence[Sequence[int]] = _DEFAULT_FILTERS,
        initializer: Any = "default",
        bias_init: float = 0.0,
        activation_fn: str | Callable[[], nn.Module] | None = "relu",
        output_shape: Sequence[int] = (3, 64, 64),
    ) -> None:
        super().__init__()
        if not filters:
            raise ValueError("ConvTranspose2DStack needs at least one filter.")
        self.output_shape = tuple(int(d) for d in output_shape)
        activation = get_activation_fn(activation_fn, framework="torch")
        init = get_initializer(initializer, framework="torch")
        in_channels = int(filters[0][0])
        # The vector as a 1 x 1 image of `in_channels` channels (channels first).
        layers: list[nn.Module] = [
            nn.Linear(input_size, in_channels),
            Reshape([-1, in_channels, 1, 1]),
        ]
        side = 1
        for i, (_, kernel, stride) in enumerate(filters):
            last = i == len(filters) - 1
            out_channels = self.output_shape[0] if last else int(filters[i + 1][0])
            conv = nn.ConvTranspose2d(in_channels, out_channels, int(kernel), int(stride))
            init(conv.weight)
            if conv.bias is not None:
                nn.init.constant_(conv.bias, bias_init)
            layers.append(conv)
            if activation is not None and not last:
                layers.append(activation())
            in_channels = out_channels
            side = (side - 1) * int(stride) + int(kernel)
        if self.output_shape[1:] != (side, side):
            raise ValueError(
                f"ConvTranspose2DStack: the filters {[tuple(f) for f in filters]} produce "
                f"{side} x {side} images, not the output_shape {self.output_shape}."
            )
        self._model = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> td.Independent:
        """`x` of shape `[*batch, input_size]` -> a distribution over images of shape
        `[*batch, *output_shape]` (mean: the network's output, standard deviation 1)."""
        batch_dims = x.shape[:-1]
        mean = self._model(x.reshape(-1, x.shape[-1])).reshape(*batch_dims, *self.output_shape)
        return td.Independent(td.Normal(mean, 1.0), len(self.output_shape))


__all__ = ["ConvTranspose2DStack"]
