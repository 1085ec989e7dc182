"""`ComplexInputNetwork`: Dict/Tuple observations with image parts (RLlib 1.13's).

Each part of the observation gets its own net: an image (`Box [H, W, C]`) the conv trunk
of `VisionNetwork` (`conv_filters`, `conv_activation`), any other part (a vector, a
one-hot discrete value) an MLP of `fcnet_hiddens`. Their features are concatenated, go
through `post_fcnet_hiddens`, and end in the logits and the value head (which share all
layers). The catalog picks this model for a Dict or Tuple observation space with an image
part; others are flattened into `FullyConnectedNetwork`. Under `_disable_preprocessor_api`
it is the default for every observation space but a Box (as RLlib 1.13's catalog picks
it): the parts then arrive as the env gave them, discrete ones as their values, which it
one-hots itself.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F  # noqa: N812
from torch import nn

from corral.models.preprocessors import restore_original_dimensions
from corral.models.torch.fcnet import POLICY_GAIN, VALUE_GAIN, _linear, _mlp, get_activation
from corral.models.torch.torch_modelv2 import ModelConfigDict, TensorType, TorchModelV2
from corral.models.torch.visionnet import VisionNetwork
from corral.utils.error import UnsupportedSpaceException
from corral.utils.spaces.repeated import Repeated


def has_image_part(space: gym.Space) -> bool:
    """Whether a Dict/Tuple space (or a flattened one's `original_space`) has an image."""
    from corral.env.gym_compat import convert_space

    space = convert_space(getattr(space, "original_space", None) or space)
    if not isinstance(space, gym.spaces.Dict | gym.spaces.Tuple):
        return False
    return any(_is_image(leaf) for leaf in _leaf_spaces(space))


def _is_image(space: gym.Space) -> bool:
    return isinstance(space, gym.spaces.Box) and len(space.shape) == 3


def _leaf_spaces(space: gym.Space) -> Iterator[gym.Space]:
    if isinstance(space, gym.spaces.Dict):
        for sub in space.spaces.values():
            yield from _leaf_spaces(sub)
    elif isinstance(space, gym.spaces.Tuple):
        for sub in space.spaces:
            yield from _leaf_spaces(sub)
    else:
        yield space


def _leaf_values(space: gym.Space, value: Any) -> Iterator[Any]:
    """The restored observation's parts, in `_leaf_spaces` order."""
    if isinstance(space, gym.spaces.Dict):
        for key, sub in space.spaces.items():
            yield from _leaf_values(sub, value[key])
    elif isinstance(space, gym.spaces.Tuple):
        for sub, part in zip(space.spaces, value):
            yield from _leaf_values(sub, part)
    else:
        yield value


def _flat_size(space: gym.Space) -> int:
    """Columns of a part once flattened (a discrete part arrives one-hot)."""
    return int(gym.spaces.utils.flatdim(space))


class ComplexInputNetwork(TorchModelV2):
    """A conv trunk per image part and an MLP per other part, concatenated, then
    `post_fcnet_hiddens` and the logits and value heads (see the module docstring).

    With `num_outputs=None` the concatenated (post-stack) features are the output, for a
    model wrapping this one (e.g. `use_lstm`).
    """

    def __init__(
        self,
        obs_space: gym.Space,
        action_space: gym.Space,
        num_outputs: int | None,
        model_config: ModelConfigDict,
        name: str,
    ) -> None:
        from corral.env.gym_compat import convert_space

        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        cfg = self.model_config
        self.original_space = convert_space(getattr(obs_space, "original_space", None) or obs_space)
        if not (has_image_part(self.original_space) or cfg.get("_disable_preprocessor_api")):
            raise ValueError(
                f"ComplexInputNetwork is for Dict/Tuple observations with an image part, got "
                f"{self.original_space} (any space with `_disable_preprocessor_api`)."
            )
        self._leaves = list(_leaf_spaces(self.original_space))
        unsupported = [leaf for leaf in self._leaves if isinstance(leaf, Repeated)]
        if unsupported:
            raise UnsupportedSpaceException(
                f"ComplexInputNetwork has no net for the Repeated part {unsupported[0]} of "
                f"{self.original_space}; use a custom_model."
            )
        fc_hiddens = [int(h) for h in cfg.get("fcnet_hiddens") or []]
        fc_act = get_activation(cfg.get("fcnet_activation", "tanh"))
        conv_config = {
            "conv_filters": cfg.get("conv_filters"),
            "conv_activation": cfg.get("conv_activation", "relu"),
            "post_fcnet_hiddens": [],
        }
        self.parts = nn.ModuleList()
        self._is_image: list[bool] = []
        concat_size = 0
        for i, leaf in enumerate(_leaf_spaces(self.original_space)):
            if _is_image(leaf):
                cnn = VisionNetwork(leaf, action_space, None, conv_config, f"{name}_cnn_{i}")
                self.parts.append(cnn)
                concat_size += cnn.num_outputs
            else:
                size = _flat_size(leaf)
                self.parts.append(_mlp(size, fc_hiddens, fc_act))
                concat_size += fc_hiddens[-1] if fc_hiddens else size
            self._is_image.append(_is_image(leaf))
        post_hiddens = [int(h) for h in cfg.get("post_fcnet_hiddens") or []]
        self.post_fc_stack = _mlp(
            concat_size, post_hiddens, get_activation(cfg.get("post_fcnet_activation", "relu"))
        )
        feature_size = post_hiddens[-1] if post_hiddens else concat_size
        if num_outputs:
            self.logits_layer: nn.Module = _linear(feature_size, int(num_outputs), POLICY_GAIN)
            self.num_outputs = int(num_outputs)
        else:
            self.logits_layer = nn.Identity()
            self.num_outputs = feature_size
        self.value_layer = _linear(feature_size, 1, VALUE_GAIN)
        self._features: TensorType | None = None
        # Flat observation rows are restored to the parts by the flattened space (the
        # policy's preprocessed one; built here for a model made on the original space).
        has_original = hasattr(obs_space, "original_space")
        self._flat_space = obs_space if has_original else _Flattened(self.original_space)

    def forward(
        self,
        input_dict: dict[str, TensorType],
        state: list[TensorType],
        seq_lens: TensorType | None,
    ) -> tuple[TensorType, list[TensorType]]:
        obs = restore_original_dimensions(input_dict["obs"], self._flat_space)
        outs = []
        for net, is_image, leaf, part in zip(
            self.parts, self._is_image, self._leaves, _leaf_values(self.original_space, obs)
        ):
            part = torch.as_tensor(part)
            if is_image:
                outs.append(net.forward({"obs": part}, [], None)[0])
            else:
                outs.append(net(_features_of(leaf, part)))
        features = self.post_fc_stack(torch.cat(outs, dim=1))
        self._features = features
        return self.logits_layer(features), state

    def value_function(self) -> TensorType:
        if self._features is None:
            raise RuntimeError("value_function() called before forward().")
        return self.value_layer(self._features).squeeze(-1)


def _features_of(space: gym.Space, part: TensorType) -> TensorType:
    """A non-image part as float rows `[B, flatdim]`: a Discrete / MultiDiscrete part given
    as its integer values (unpreprocessed) one-hot; one-hot rows and the other parts as
    they are."""
    if part.is_floating_point() or not isinstance(
        space, gym.spaces.Discrete | gym.spaces.MultiDiscrete
    ):
        return part.reshape(part.shape[0], -1).float()
    if isinstance(space, gym.spaces.Discrete):
        return F.one_hot(part.long().reshape(-1) - int(space.start), int(space.n)).float()
    values = part.long().reshape(part.shape[0], -1)
    starts = torch.as_tensor(np.asarray(space.start).ravel(), device=part.device)
    nvec = np.asarray(space.nvec).ravel()
    columns = [F.one_hot(values[:, i] - starts[i], int(n)) for i, n in enumerate(nvec)]
    return torch.cat(columns, dim=-1).float()


class _Flattened:
    """A stand-in flattened space whose `original_space` is `space` (for restoring)."""

    def __init__(self, space: gym.Space) -> None:
        self.original_space = space
        self.shape = (int(np.sum([_flat_size(s) for s in _leaf_spaces(space)])),)


__all__ = ["ComplexInputNetwork", "has_image_part"]
