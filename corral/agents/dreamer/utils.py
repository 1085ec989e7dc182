"""Dreamer's small torch helpers: frozen parameters, the tanh bijector, weight init."""

from __future__ import annotations

import math
from collections.abc import Iterable
from types import TracebackType

import torch
import torch.nn.functional as F
from torch import distributions as td
from torch import nn


class FreezeParameters:
    """Context manager: the parameters do not require gradients inside the block, and get
    their former `requires_grad` back after it.

    Dreamer's actor loss backpropagates through the world model and the value network
    (Hafner et al. 2020, sec. 3) but must train neither: inside the block their weights are
    constants, while gradients still flow through their activations to the actor.

    Args:
        parameters: the parameters to freeze.
    """

    def __init__(self, parameters: Iterable[torch.Tensor]) -> None:
        self.parameters = list(parameters)
        self.param_states = [p.requires_grad for p in self.parameters]

    def __enter__(self) -> None:
        for param in self.parameters:
            param.requires_grad_(False)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> None:
        for param, state in zip(self.parameters, self.param_states):
            param.requires_grad_(state)


class TanhBijector(td.Transform):
    """y = tanh(x), with a numerically stable log |dy/dx| and an inverse that clamps y just
    inside (-1, 1) (so that the log-density of an action at the bounds stays finite)."""

    domain = td.constraints.real
    codomain = td.constraints.interval(-1.0, 1.0)
    bijective = True
    sign = 1

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TanhBijector)

    def __hash__(self) -> int:
        return hash(TanhBijector)

    def _call(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x)

    def _inverse(self, y: torch.Tensor) -> torch.Tensor:
        y = y.clamp(-0.99999997, 0.99999997)
        return torch.atanh(y)

    def log_abs_det_jacobian(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        # log(1 - tanh(x)^2) = 2 (log 2 - x - softplus(-2x)), without cancellation.
        return 2.0 * (math.log(2.0) - x - F.softplus(-2.0 * x))


def init_dreamer_weights(module: nn.Module) -> None:
    """Dreamer's initialisation, applied to every layer of `module`: Xavier-uniform weights
    and zero biases for dense and (transposed) convolution layers; for GRU cells
    Xavier-uniform input weights, orthogonal recurrent weights and zero biases."""
    for layer in module.modules():
        if isinstance(layer, (nn.Linear, nn.Conv2d, nn.ConvTranspose2d)):
            nn.init.xavier_uniform_(layer.weight)
            if layer.bias is not None:
                nn.init.zeros_(layer.bias)
        elif isinstance(layer, nn.GRUCell):
            nn.init.xavier_uniform_(layer.weight_ih)
            nn.init.orthogonal_(layer.weight_hh)
            nn.init.zeros_(layer.bias_ih)
            nn.init.zeros_(layer.bias_hh)


__all__ = ["FreezeParameters", "TanhBijector", "init_dreamer_weights"]
