"""The default model for flat observations: an MLP with a policy head and a value head."""

from __future__ import annotations

import math
from collections.abc import Callable

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from corral.models.torch.numpy_inference import NumpyLayers, as_input
from corral.models.torch.torch_modelv2 import ModelConfigDict, TensorType, TorchModelV2

_ACTIVATIONS: dict[str | None, Callable[[], nn.Module] | None] = {
    "tanh": nn.Tanh,
    "relu": nn.ReLU,
    "swish": nn.SiLU,
    "silu": nn.SiLU,
    "elu": nn.ELU,
    "linear": None,
    None: None,
}

# Orthogonal init with these gains (Saxe et al. 2014; the scheme of OpenAI baselines' PPO):
# sqrt(2) keeps activations' scale through ReLU/tanh stacks, the tiny policy gain starts the
# policy near uniform (high entropy, no early collapse) and the value head starts at scale 1.
HIDDEN_GAIN = math.sqrt(2.0)
POLICY_GAIN = 0.01
VALUE_GAIN = 1.0


def get_activation(name: str | None) -> Callable[[], nn.Module] | None:
    """Map an ``fcnet_activation`` name to a module factory (``None`` for a linear layer)."""
    key = name.lower() if isinstance(name, str) else name
    if key not in _ACTIVATIONS:
        valid = sorted(str(k) for k in _ACTIVATIONS if k is not None)
        raise ValueError(f"Unknown activation {name!r}; expected one of {valid} or None.")
    return _ACTIVATIONS[key]


def _linear(in_size: int, out_size: int, gain: float) -> nn.Linear:
    layer = nn.Linear(in_size, out_size)
    nn.init.orthogonal_(layer.weight, gain=gain)
    nn.init.zeros_(layer.bias)
    return layer


def _mlp(in_size: int, sizes: list[int], activation: Callable[[], nn.Module] | None) -> nn.Module:
    layers: list[nn.Module] = []
    for size in sizes:
        layers.append(_linear(in_size, size, HIDDEN_GAIN))
        if activation is not None:
            layers.append(activation())
        in_size = size
    return nn.Sequential(*layers)


def _run(layers: nn.Module, x: TensorType) -> TensorType:
    """Apply a Sequential's layers (or one layer) via ``.forward`` directly.

    Skips ``nn.Module.__call__`` (hook dispatch), which at batch sizes 1-32 costs as much as
    the maths: measured ~25% less time per 2x64 MLP forward on CPU. Only the sampler's fast
    paths (the models' ``forward_inference``) use this, so forward hooks still fire in the
    models' ``forward``, which training calls.
    """
    if not isinstance(layers, nn.Sequential):
        return layers.forward(x)
    for layer in layers:
        x = layer.forward(x)
    return x


def _obs_size(obs_space: gym.Space) -> int:
    from corral.env.gym_compat import convert_space

    try:
        # An old `gym.spaces` space (RLlib 1.x models pass the env's own) counts the same.
        return int(gym.spaces.utils.flatdim(convert_space(obs_space)))
    except (NotImplementedError, ValueError, TypeError) as err:
        raise ValueError(
            f"FullyConnectedNetwork cannot flatten observation space {obs_space}"
        ) from err


class FullyConnectedNetwork(TorchModelV2):
    """MLP with separate or shared value branch, configured by RLlib 1.x's model keys.

    Keys read from ``model_config``: ``fcnet_hiddens``, ``fcnet_activation``,
    ``post_fcnet_hiddens`` (appended to ``fcnet_hiddens``, same activation),
    ``vf_share_layers`` (value head on the policy trunk, or its own MLP of the same sizes),
    ``free_log_std`` (the second half of the outputs is a learned, state-independent log-std)
    and ``no_final_linear`` (the last hidden layer, of size ``num_outputs`` and activated,
    is the output).

    Observations arrive as float tensors ``[B, obs_dim]``; observations with more
    dimensions are flattened. :meth:`forward_inference` and :meth:`value_only` are the
    dict-free fast paths the sampler uses once per env step.
    """

    def __init__(
        self,
        obs_space: gym.Space,
        action_space: gym.Space,
        num_outputs: int | None,
        model_config: ModelConfigDict,
        name: str,
    ) -> None:
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        cfg = self.model_config
        fcnet_hiddens = [int(h) for h in cfg.get("fcnet_hiddens") or []]
        hiddens = fcnet_hiddens + [int(h) for h in cfg.get("post_fcnet_hiddens") or []]
        act_name = cfg.get("fcnet_activation", "tanh")
        if not fcnet_hiddens:
            act_name = cfg.get("post_fcnet_activation", act_name)
        activation = get_activation(act_name)
        no_final_linear = bool(cfg.get("no_final_linear", False))
        self.vf_share_layers = bool(cfg.get("vf_share_layers", True))
        self.free_log_std = bool(cfg.get("free_log_std", False))

        obs_size = _obs_size(obs_space)
        out_size = int(num_outputs) if num_outputs else 0
        if self.free_log_std:
            if not out_size or out_size % 2:
                raise ValueError(
                    f"free_log_std=True needs an even num_outputs (mean and log-std halves), "
                    f"got {num_outputs}."
                )
            out_size //= 2

        if no_final_linear and out_size:
            if self.free_log_std:
                raise ValueError("no_final_linear=True cannot be combined with free_log_std=True.")
            # The last hidden layer becomes the output layer: size num_outputs, activated.
            self._hidden_layers = _mlp(obs_size, hiddens[:-1] + [out_size], activation)
            self._logits: nn.Module = nn.Identity()
            feature_size = out_size
        else:
            self._hidden_layers = _mlp(obs_size, hiddens, activation)
            feature_size = hiddens[-1] if hiddens else obs_size
            if out_size:
                self._logits = _linear(feature_size, out_size, POLICY_GAIN)
            else:
                # No output size requested: the trunk's features are the output (used when
                # another model wraps this one, e.g. an LSTM on top).
                self._logits = nn.Identity()
                out_size = feature_size
        self.num_outputs = out_size * 2 if self.free_log_std else out_size

        if self.free_log_std:
            self.log_std = nn.Parameter(torch.zeros(out_size))
        else:
            self.log_std = None

        if self.vf_share_layers:
            self._value_branch_separate: nn.Module | None = None
        else:
            self._value_branch_separate = _mlp(obs_size, hiddens, activation)
            feature_size = hiddens[-1] if hiddens else obs_size
        self._value_branch = _linear(feature_size, 1, VALUE_GAIN)
        # The sampler's small batches run in numpy (see `numpy_inference`); the learned
        # log-std of `free_log_std` is not in these chains, so such a model acts in torch.
        self._numpy = (
            None
            if self.free_log_std
            else NumpyLayers(
                trunk=[self._hidden_layers],
                logits=[self._logits],
                value=[self._value_branch_separate, self._value_branch],
            )
        )

        self._features: TensorType | None = None
        self._last_obs: TensorType | None = None

    def _flat(self, obs: TensorType) -> TensorType:
        if obs.dim() != 2:
            obs = obs.reshape(obs.shape[0], -1)
        return obs.float()

    def _head(self, features: TensorType) -> TensorType:
        out = self._logits(features)
        if self.log_std is not None:
            out = torch.cat([out, self.log_std.expand_as(out)], dim=-1)
        return out

    def forward(
        self,
        input_dict: dict[str, TensorType],
        state: list[TensorType],
        seq_lens: TensorType | None,
    ) -> tuple[TensorType, list[TensorType]]:
        """RLlib-style forward; remembers what :meth:`value_function` needs."""
        obs = self._flat(input_dict.get("obs_flat", input_dict["obs"]))
        # The output comes from this call's locals, never from the cache: another thread
        # may run a forward of its own in between (acting beside an asynchronous learner).
        features = self._hidden_layers(obs)
        self._features, self._last_obs = features, obs
        return self._head(features), state

    def value_function(self) -> TensorType:
        """Value estimates ``[B]`` for the last :meth:`forward` batch."""
        if self._features is None:
            raise RuntimeError("value_function() called before forward().")
        if self._value_branch_separate is None:
            return self._value_branch(self._features).squeeze(-1)
        return self._value_branch(self._value_branch_separate(self._last_obs)).squeeze(-1)

    def forward_inference(self, obs: TensorType) -> tuple[TensorType, TensorType]:
        """Action-distribution inputs ``[B, num_outputs]`` and values ``[B]`` in one call.

        The sampler's fast path: no input dict, no state, nothing cached on the module, and
        no module-call overhead (see :func:`_run`); a few rows without gradients run in
        numpy (:class:`NumpyLayers`).
        """
        numpy = self._numpy
        if numpy is not None and numpy.accepts(obs):
            logits, values = self._numpy_forward(numpy, as_input(obs))
            return torch.from_numpy(logits), torch.from_numpy(values)
        obs = self._flat(obs)
        features = _run(self._hidden_layers, obs)
        out = self._logits.forward(features)
        if self.log_std is not None:
            out = torch.cat([out, self.log_std.expand_as(out)], dim=-1)
        if self._value_branch_separate is not None:
            features = _run(self._value_branch_separate, obs)
        return out, self._value_branch.forward(features).squeeze(-1)

    def forward_inference_numpy(self, obs: np.ndarray) -> tuple[np.ndarray, np.ndarray] | None:
        """`forward_inference` on a numpy batch, in numpy, for a caller that wants no
        gradients (acting); None where the batch has to run in torch (see
        :class:`NumpyLayers`: e.g. too many rows, parameters not float32 on the CPU)."""
        numpy = self._numpy
        if numpy is None or not numpy.ready(len(obs)):
            return None
        return self._numpy_forward(numpy, as_input(obs))

    def _numpy_forward(self, numpy: NumpyLayers, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(logits, values) of `[B, features]` float32 rows, by `numpy` (this model's
        `NumpyLayers`, ready for them)."""
        features = numpy("trunk", x)
        values = numpy("value", x if self._value_branch_separate is not None else features)
        return numpy("logits", features), values[:, 0]

    def value_only(self, obs: TensorType) -> TensorType:
        """Values ``[B]`` for ``obs``, e.g. to bootstrap a truncated trajectory."""
        numpy = self._numpy
        if numpy is not None and numpy.accepts(obs):
            x = as_input(obs)
            if self._value_branch_separate is None:
                x = numpy("trunk", x)
            return torch.from_numpy(numpy("value", x)[:, 0])
        obs = self._flat(obs)
        trunk = self._value_branch_separate
        features = _run(self._hidden_layers if trunk is None else trunk, obs)
        return self._value_branch.forward(features).squeeze(-1)
