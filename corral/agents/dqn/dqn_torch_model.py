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

RLlib 1.13's head methods are the model's: `get_q_value_distributions(model_out)` (the
advantage stream on a state embedding) and `get_state_value(model_out)` (the value
stream). `q_logits`, which DQN's loss, acting and `compute_q_values` use, combines their
outputs, so a subclass overriding them (RLlib 1.13's way to customise the Q head) trains
and acts with its own heads.
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

# The attribute of `forward`'s output tensor that holds the state embedding it was computed
# from: RLlib 1.13's DQN model output was that embedding, and 1.13 code passes the model's
# output to `get_q_value_distributions` / `get_state_value`.
_EMBEDDING_ATTR = "_dqn_state_embedding"


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

    `forward` returns the Q-values (the action-distribution inputs), computed from the
    state embedding of the trunk (`fcnet_hiddens`; RLlib 1.13's model output), which the
    head methods `get_q_value_distributions` and `get_state_value` take.

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

    # The distribution's support `z` (`v_min` to `v_max`; a buffer, set in __init__).
    support: torch.Tensor

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
        self.v_min, self.v_max, self.sigma0 = float(v_min), float(v_max), float(sigma0)
        obs_size = int(gym.spaces.utils.flatdim(obs_space))
        activation = model_config.get("fcnet_activation", "relu")
        self.trunk, feature_size = _stack(
            obs_size, list(model_config.get("fcnet_hiddens") or []), activation, False, sigma0
        )
        # The width of the state embedding the heads take (`model_out`).
        self.embedding_size = feature_size
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
        # Whether the head methods are this class's: a subclass's own heads are what
        # `q_logits` runs, and neither the hook-free path nor numpy (which run the layers
        # above) then acts.
        cls = type(self)
        self._own_heads = all(
            getattr(cls, name) is getattr(DQNTorchModel, name)
            for name in ("get_q_value_distributions", "get_state_value")
        )
        # The sampler's small batches of plain Q-values run in numpy (`numpy_inference`;
        # noisy layers are not among what it runs, so a noisy head acts in torch).
        self._numpy = (
            NumpyLayers(
                trunk=[self.trunk],
                advantage=[self.advantage_hidden, self.advantage_out],
                value=[self.value_hidden, self.value_out] if self.dueling else [],
            )
            if self.num_atoms == 1 and self._own_heads
            else None
        )

    # -- RLlib 1.13's head methods -------------------------------------------------

    def get_q_value_distributions(self, model_out: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The advantage stream on a state embedding (RLlib 1.13's Q head; the Q-values
        themselves without dueling). Override it to customise the head: `q_logits`, and
        so DQN's loss and acting, use the override.

        Args:
            model_out: this model's output (`model(input_dict)[0]`: the embedding it was
                computed from is used, as RLlib 1.13's model output was that embedding),
                or a state embedding `[B, embedding_size]`.

        Returns:
            With `num_atoms` = 1, `(action_scores [B, A], logits, probs_or_logits)`, the
            latter two `[B, A, 1]` ones as RLlib 1.13's. With `num_atoms` > 1,
            `(action_scores [B, A], z [num_atoms], support_logits_per_action
            [B, A, num_atoms], logits, probs)`: `z` the support (`v_min` to `v_max`),
            `logits` the per-atom logits again, `probs` their softmax, and
            `action_scores` the expected values under `probs`.
        """
        scores = self._advantage_logits(self._embedding(model_out), _call)
        if self.num_atoms == 1:
            ones = torch.ones_like(scores).unsqueeze(-1)
            return scores, ones, ones
        probs = torch.softmax(scores, dim=-1)
        return (probs * self.support).sum(-1), self.support, scores, scores, probs

    def get_state_value(self, model_out: torch.Tensor) -> torch.Tensor:
        """The dueling value stream V(s) on a state embedding (RLlib 1.13's): `[B, 1]`,
        or `[B, num_atoms]` value logits with `num_atoms` > 1.

        Args:
            model_out: as for `get_q_value_distributions`.

        Raises:
            ValueError: the model was built without `dueling` (it has no value stream).
        """
        if not self.dueling:
            raise ValueError(
                "get_state_value: this DQNTorchModel was built with dueling=False and has "
                "no state-value stream; set `dueling: True` in the DQN config."
            )
        return self._value_logits(self._embedding(model_out), _call)

    def _embedding(self, model_out: torch.Tensor) -> torch.Tensor:
        """The state embedding `model_out` stands for (see `get_q_value_distributions`).

        Raises:
            ValueError: `model_out` is neither this model's output nor `[B, embedding_size]`.
        """
        embedding = getattr(model_out, _EMBEDDING_ATTR, None)
        if embedding is not None:
            return embedding  # type: ignore[no-any-return]
        if model_out.dim() != 2 or model_out.shape[-1] != self.embedding_size:
            raise ValueError(
                f"DQNTorchModel's head methods take the model's output (`model(input_dict)[0]`) "
                f"or a state embedding of shape [B, {self.embedding_size}] (the trunk's "
                f"`fcnet_hiddens` output), got a tensor of shape {tuple(model_out.shape)}."
            )
        return model_out

    def _advantage_logits(
        self, features: torch.Tensor, run: Callable[[nn.Module, torch.Tensor], torch.Tensor]
    ) -> torch.Tensor:
        """The advantage stream: `[B, A]`, or `[B, A, num_atoms]` logits."""
        scores = run(self.advantage_out, run(self.advantage_hidden, features))
        if self.num_atoms > 1:
            scores = scores.view(-1, self.num_actions, self.num_atoms)
        return scores

    def _value_logits(
        self, features: torch.Tensor, run: Callable[[nn.Module, torch.Tensor], torch.Tensor]
    ) -> torch.Tensor:
        """The value stream: `[B, 1]`, or `[B, num_atoms]` logits."""
        return run(self.value_out, run(self.value_hidden, features))

    # -- Q-values --------------------------------------------------------------

    def q_logits(self, obs: torch.Tensor) -> torch.Tensor:
        """Q-values [B, A] (num_atoms = 1) or per-atom logits [B, A, num_atoms]."""
        return self._q_logits(obs, _call)

    def _q_logits(
        self, obs: torch.Tensor, run: Callable[[nn.Module, torch.Tensor], torch.Tensor]
    ) -> torch.Tensor:
        """`q_logits` with each sub-network applied by `run(module, x)`."""
        return self._q_logits_of(self._trunk(obs, run), run)

    def _trunk(
        self, obs: torch.Tensor, run: Callable[[nn.Module, torch.Tensor], torch.Tensor]
    ) -> torch.Tensor:
        """The state embedding `[B, embedding_size]` of an observation batch."""
        return run(self.trunk, obs.reshape(obs.shape[0], -1).float())

    def _q_logits_of(
        self, features: torch.Tensor, run: Callable[[nn.Module, torch.Tensor], torch.Tensor]
    ) -> torch.Tensor:
        """Q-values (or per-atom logits) from a state embedding: the head methods'
        outputs combined as RLlib 1.13's `compute_q_values` did."""
        if self._own_heads:
            adv = self._advantage_logits(features, run)
            value = self._value_logits(features, run) if self.dueling else None
        else:  # a subclass's heads, through RLlib 1.13's methods
            heads = self.get_q_value_distributions(features)
            adv = heads[0] if self.num_atoms == 1 else heads[2]
            value = self.get_state_value(features) if self.dueling else None
        if value is None:
            return adv
        # Wang et al. 2016, eq. 9: subtract the mean advantage for identifiability.
        if self.num_atoms > 1:
            # [B, 1, atoms] against adv [B, A, atoms].
            return value.unsqueeze(1) + adv - adv.mean(dim=1, keepdim=True)
        if self._own_heads:
            return value + adv - adv.mean(dim=1, keepdim=True)
        # A custom head may mask actions with -inf advantages: RLlib 1.13 averaged the
        # others (`reduce_mean_ignore_inf`).
        return value + adv - _mean_ignoring_neg_inf(adv)

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
        features = self._trunk(input_dict.get("obs_flat", input_dict["obs"]), _call)
        q = self.q_values(self._q_logits_of(features, _call))
        # The embedding travels with the output for the head methods (RLlib 1.13 code
        # passes `model_out` to them).
        setattr(q, _EMBEDDING_ATTR, features)
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


def _mean_ignoring_neg_inf(x: torch.Tensor) -> torch.Tensor:
    """The mean over dim 1 (kept) of the entries of `x` that are not -inf."""
    finite = x != float("-inf")
    total = torch.where(finite, x, torch.zeros_like(x)).sum(dim=1, keepdim=True)
    return total / finite.sum(dim=1, keepdim=True)
