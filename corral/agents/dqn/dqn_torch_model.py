"""The Q-network of DQN and its Rainbow extensions.

- Trunk: a fully connected stack from the `model` config (`fcnet_hiddens`,
  `fcnet_activation`), as RLlib 1.x's base model.
- Head: `hiddens` more layers, then Q-values for every action; with
  `num_atoms` > 1, a categorical distribution over `num_atoms` return values
  per action (C51: Bellemare et al. 2017, arXiv:1707.06887).
- Dueling (Wang et al. 2016, arXiv:1511.06581, eq. 9): separate advantage and
  value streams, Q(s, a) = V(s) + A(s, a) - mean_a' A(s, a'); with C51 the
  same combination applies to the per-atom logits.
- Noisy nets (Fortunato et al. 2018, arXiv:1706.10295): the head's linear
  layers get learned factorised Gaussian weight noise (`sigma0`).
"""

from __future__ import annotations

from collections.abc import Callable

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from corral.models.torch.fcnet import _run, get_activation
from corral.models.torch.modules.noisy_layer import NoisyLinear
from corral.models.torch.numpy_inference import NumpyLayers, as_input
from corral.models.torch.torch_modelv2 import ModelConfigDict, TorchModelV2


def _stack(
    in_size: int,
    sizes: list[int],
    activation: str | None,
    noisy: bool,
    sigma0: float,
    layer_norm: bool = False,
) -> tuple[nn.Sequential, int]:
    """Dense layers of `sizes` (noisy ones with `noisy`), each activated, and with
    `layer_norm` (dense layers only, as RLlib's) normalised after its activation."""
    act = get_activation(activation)
    layers: list[nn.Module] = []
    for size in sizes:
        layers.append(NoisyLinear(in_size, size, sigma0) if noisy else nn.Linear(in_size, size))
        if act is not None:
            layers.append(act())
        if layer_norm and not noisy:
            layers.append(nn.LayerNorm(size))
        in_size = size
    return nn.Sequential(*layers), in_size


def _call(module: nn.Module, x: torch.Tensor) -> torch.Tensor:
    """`module(x)`: the module call, hooks included."""
    return module(x)


class DQNTorchModel(TorchModelV2):
    """Maps observations to Q-values (and, for C51, return distributions).

    Args (beyond TorchModelV2's; RLlib 1.13's names):
        q_hiddens: the head's hidden layer sizes (DQN's `hiddens`).
        dueling: separate value and advantage streams.
        dueling_activation: the activation of the head's hidden layers.
        num_atoms: atoms of the return distribution (1: plain Q-values).
        use_noisy: NoisyNet layers in the head (DQN's `noisy`).
        v_min, v_max: the support [v_min, v_max] of the distribution.
        sigma0: initial noise scale of the noisy layers.
        add_layer_norm: a LayerNorm after each of the head's hidden dense layers (DQN
            turns it on for `ParameterNoise` exploration, as RLlib 1.13 did).
    """

    def __init__(
        self,
        obs_space: gym.Space,
        action_space: gym.Space,
        num_outputs: int,
        model_config: ModelConfigDict,
        name: str,
        *,
        q_hiddens: list[int] = (256,),  # type: ignore[assignment]
        dueling: bool = False,
        dueling_activation: str = "relu",
        num_atoms: int = 1,
        use_noisy: bool = False,
        v_min: float = -10.0,
        v_max: float = 10.0,
        sigma0: float = 0.5,
        add_layer_norm: bool = False,
    ) -> None:
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        self.num_actions = int(action_space.n)
        self.num_atoms = int(num_atoms)
        self.dueling = bool(dueling)
        obs_size = int(gym.spaces.utils.flatdim(obs_space))
        activation = model_config.get("fcnet_activation", "relu")
        self.trunk, feature_size = _stack(
            obs_size, list(model_config.get("fcnet_hiddens") or []), activation, False, sigma0
        )
        noisy = bool(use_noisy)
        head = (dueling_activation, noisy, sigma0, bool(add_layer_norm))
        self.advantage_hidden, adv_size = _stack(feature_size, list(q_hiddens), *head)
        linear = (lambda i, o: NoisyLinear(i, o, sigma0)) if noisy else nn.Linear
        self.advantage_out = linear(adv_size, self.num_actions * self.num_atoms)
        if self.dueling:
            self.value_hidden, value_size = _stack(feature_size, list(q_hiddens), *head)
            self.value_out = linear(value_size, self.num_atoms)
        support = torch.linspace(v_min, v_max, self.num_atoms) if num_atoms > 1 else torch.zeros(1)
        self.register_buffer("support", support, persistent=False)
        # The sampler's small batches of plain Q-values run in numpy (`numpy_inference`;
        # noisy layers are not among what it runs, so a noisy head acts in torch).
        self._numpy = (
            NumpyLayers(
                trunk=[self.trunk],
                advantage=[self.advantage_hidden, self.advantage_out],
                value=[self.value_hidden, self.value_out] if self.dueling else [],
            )
            if self.num_atoms == 1
            else None
        )

    def q_logits(self, obs: torch.Tensor) -> torch.Tensor:
        """Q-values [B, A] (num_atoms = 1) or per-atom logits [B, A, num_atoms]."""
        return self._q_logits(obs, _call)

    def _q_logits(
        self, obs: torch.Tensor, run: Callable[[nn.Module, torch.Tensor], torch.Tensor]
    ) -> torch.Tensor:
        """`q_logits` with each sub-network applied by `run(module, x)`."""
        features = run(self.trunk, obs.reshape(obs.shape[0], -1).float())
        adv = run(self.advantage_out, run(self.advantage_hidden, features))
        if self.num_atoms > 1:
            adv = adv.view(-1, self.num_actions, self.num_atoms)
        if not self.dueling:
            return adv
        value = run(self.value_out, run(self.value_hidden, features))
        if self.num_atoms > 1:
            value = value.unsqueeze(1)  # [B, 1, atoms] against adv [B, A, atoms]
        # Wang et al. 2016, eq. 9: subtract the mean advantage for identifiability.
        return value + adv - adv.mean(dim=1, keepdim=True)

    def q_values(self, logits: torch.Tensor) -> torch.Tensor:
        """Expected Q-values [B, A] from `q_logits`' output."""
        if self.num_atoms == 1:
            return logits
        return (torch.softmax(logits, dim=-1) * self.support).sum(-1)

    def forward(
        self,
        input_dict: dict[str, torch.Tensor],
        state: list[torch.Tensor],
        seq_lens: torch.Tensor | None,
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        q = self.q_values(self.q_logits(input_dict.get("obs_flat", input_dict["obs"])))
        self._last_batch = q.shape[0]
        return q, state

    def value_function(self) -> torch.Tensor:
        return torch.zeros(self._last_batch)

    def forward_inference(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(Q-values [B, A], zeros [B]): the distribution inputs are the Q-values.

        The sampler's fast path: the layers' own `forward`s, without the module calls'
        hook dispatch (`fcnet._run`), which costs about as much as the maths for the one or
        few rows a sampler acts on, and a few rows without gradients in numpy
        (`NumpyLayers`); training's `q_logits` calls the modules.
        """
        numpy = self._numpy
        if numpy is not None and numpy.accepts(obs):
            q = self._numpy_q_values(numpy, as_input(obs))
            return torch.from_numpy(q), torch.zeros(len(q))
        q = self.q_values(self._q_logits(obs, _run))
        return q, torch.zeros(q.shape[0])

    def forward_inference_numpy(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """`forward_inference` on a numpy batch, in numpy, for a caller that wants no
        gradients (acting); None where the batch has to run in torch (a distributional
        or noisy head, or see `NumpyLayers`)."""
        numpy = self._numpy
        if numpy is None or not numpy.ready(len(obs)):
            return None
        q = self._numpy_q_values(numpy, as_input(obs))
        return q, np.zeros(len(q), np.float32)

    def _numpy_q_values(self, numpy: NumpyLayers, x: np.ndarray) -> np.ndarray:
        """Q-values of `[B, features]` float32 rows, by `numpy` (this model's
        `NumpyLayers`, ready for them)."""
        features = numpy("trunk", x)
        q = numpy("advantage", features)
        if self.dueling:
            q = numpy("value", features) + q - q.mean(axis=1, keepdims=True)
        return q
