"""Noisy linear layers (NoisyNet, Fortunato et al. 2018, arXiv:1706.10295): DQN's
`noisy` heads, and RLlib 1.13's `NoisyLayer`."""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import nn

from corral.models.torch.fcnet import get_activation
from corral.utils.keyword_aliases import keyword_aliases


class NoisyLinear(nn.Module):
    """y = (mu_w + sigma_w * eps_w) x + mu_b + sigma_b * eps_b, factorised noise.

    eps_w = f(eps_out) f(eps_in)^T and eps_b = f(eps_out) with
    f(x) = sign(x) sqrt(|x|) (Fortunato et al. 2018, sec. 3.2); fresh noise on
    every forward pass. Initialisation: mu ~ U(-1/sqrt(p), 1/sqrt(p)),
    sigma = sigma0 / sqrt(p) for p inputs.
    """

    def __init__(self, in_features: int, out_features: int, sigma0: float = 0.5) -> None:
        super().__init__()
        bound = 1.0 / math.sqrt(in_features)
        self.weight_mu = nn.Parameter(
            torch.empty(out_features, in_features).uniform_(-bound, bound)
        )
        self.bias_mu = nn.Parameter(torch.empty(out_features).uniform_(-bound, bound))
        sigma = sigma0 / math.sqrt(in_features)
        self.weight_sigma = nn.Parameter(torch.full((out_features, in_features), sigma))
        self.bias_sigma = nn.Parameter(torch.full((out_features,), sigma))

    @staticmethod
    def _scaled_noise(size: int) -> torch.Tensor:
        x = torch.randn(size)
        return x.sign() * x.abs().sqrt()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        eps_in = self._scaled_noise(self.weight_mu.shape[1])
        eps_out = self._scaled_noise(self.weight_mu.shape[0])
        weight = self.weight_mu + self.weight_sigma * torch.outer(eps_out, eps_in)
        bias = self.bias_mu + self.bias_sigma * eps_out
        return nn.functional.linear(x, weight, bias)


class NoisyLayer(NoisyLinear):
    """RLlib 1.13's `NoisyLayer`: a `NoisyLinear` layer and its activation.

    Args:
        in_size: input features.
        out_size: output features.
        sigma0: the initial noise scale (sigma = sigma0 / sqrt(in_size)).
        activation: an activation name ("relu", "tanh", ...) or None.
    """

    def __init__(
        self, in_size: int, out_size: int, sigma0: float, activation: Any = "relu"
    ) -> None:
        super().__init__(in_size, out_size, sigma0)
        act = get_activation(activation)
        self.activation = act() if act is not None else None

    @keyword_aliases(inputs="x")  # RLlib 1.13's name
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = super().forward(x)
        return self.activation(y) if self.activation is not None else y


__all__ = ["NoisyLayer", "NoisyLinear"]
