"""The default model for image observations: a conv trunk, optional dense layers, two heads.

Images arrive channels last, ``[B, H, W, C]`` (Gymnasium's and Atari's layout, and
RLlib 1.x's); they are moved to torch's ``[B, C, H, W]`` inside the model. Pixel values are
used as given, like RLlib's vision net: scale them in the env if the network should see
``[0, 1]``.

The conv weights are kept in torch's ``channels_last`` memory format, which is the layout
the permuted ``[B, H, W, C]`` frames already have: oneDNN then convolves without
reordering either side. On one CPU thread this makes inference over 8 Atari frames
2.5-3.5x and a 128-row training step about 5 % faster than contiguous weights (whose
convolutions reorder the frames first). Weights leave the model contiguous
(``get_weights`` copies in C order), so checkpoints and workers see the usual layout.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import gymnasium as gym
import torch
from torch import nn

from corral.models.torch.fcnet import (
    HIDDEN_GAIN,
    POLICY_GAIN,
    VALUE_GAIN,
    _linear,
    _mlp,
    _run,
    get_activation,
)
from corral.models.torch.torch_modelv2 import ModelConfigDict, TensorType, TorchModelV2
from corral.models.utils import _FILTERS as _RLLIB_FILTERS

# RLlib 1.13's default stacks by image (height, width), those of `get_filter_config`
# (480x640 and 240x320 VizDoom, 96x96, 84x84 Atari, 42x42, 10x10): [out_channels,
# kernel, stride] per layer. The last layer's kernel covers the whole remaining map, so
# the trunk ends in 1 x 1.
DEFAULT_CONV_FILTERS: dict[tuple[int, int], list[list]] = _RLLIB_FILTERS


def default_conv_filters(obs_shape: Sequence[int]) -> list[list]:
    """The default filter stack for an ``[H, W, C]`` image, or a ValueError naming it."""
    key = (int(obs_shape[0]), int(obs_shape[1]))
    if key not in DEFAULT_CONV_FILTERS:
        known = ", ".join(f"{h}x{w}" for h, w in DEFAULT_CONV_FILTERS)
        raise ValueError(
            f"No default conv_filters for image observations of shape {tuple(obs_shape)}: "
            f"defaults exist for {known} images only. Set model['conv_filters'] to a list "
            "of [out_channels, kernel, stride], e.g. [[16, [4, 4], 2], [32, [4, 4], 2]], "
            "or resize the images."
        )
    return [list(f) for f in DEFAULT_CONV_FILTERS[key]]


def _pair(value: int | Sequence[int]) -> tuple[int, int]:
    if isinstance(value, int):
        return value, value
    h, w = value
    return int(h), int(w)


def _same_padding(size: tuple[int, int], kernel: tuple[int, int], stride: tuple[int, int]):
    """Zero padding (left, right, top, bottom) for TF-style "same" convolutions.

    torch's ``padding="same"`` refuses strides > 1; this pads so the output is
    ``ceil(size / stride)``, extra padding on the right/bottom as TensorFlow does.
    """
    pads = []
    out = []
    for n, k, s in zip(size, kernel, stride):
        o = math.ceil(n / s)
        total = max((o - 1) * s + k - n, 0)
        pads.append((total // 2, total - total // 2))
        out.append(o)
    (top, bottom), (left, right) = pads
    return (left, right, top, bottom), (out[0], out[1])


def _conv_stack(
    in_shape: Sequence[int], filters: list[list], activation: type[nn.Module] | None
) -> tuple[nn.Sequential, int]:
    """Conv layers ("same" padding except the last, which is "valid") and the flat size."""
    h, w, channels = (int(d) for d in in_shape)
    layers: list[nn.Module] = []
    for i, spec in enumerate(filters):
        if len(spec) != 3:
            raise ValueError(
                f"conv_filters entry {spec!r}: expected [out_channels, kernel, stride]."
            )
        out_channels, kernel, stride = int(spec[0]), _pair(spec[1]), _pair(spec[2])
        conv_padding = (0, 0)
        if i < len(filters) - 1:
            padding, (h, w) = _same_padding((h, w), kernel, stride)
            left, right, top, bottom = padding
            if left == right and top == bottom:
                # Even padding is the convolution's own (no padded copy of the input:
                # 4-8 % of the 84x84 stack's forward on one thread); the Identity keeps
                # the layers' indices, hence the parameters' names, as they were.
                conv_padding = (top, left)
                layers.append(nn.Identity())
            else:
                layers.append(nn.ZeroPad2d(padding))
        else:
            h = (h - kernel[0]) // stride[0] + 1
            w = (w - kernel[1]) // stride[1] + 1
            if h < 1 or w < 1:
                raise ValueError(
                    f"conv_filters {filters!r} shrink the image {tuple(in_shape)} to nothing "
                    f"at layer {i} (kernel {kernel}, stride {stride})."
                )
        conv = nn.Conv2d(channels, out_channels, kernel, stride, conv_padding)
        nn.init.orthogonal_(conv.weight, gain=HIDDEN_GAIN)
        nn.init.zeros_(conv.bias)
        layers.append(conv)
        if activation is not None:
            layers.append(activation())
        channels = out_channels
    layers.append(nn.Flatten())
    return nn.Sequential(*layers), channels * h * w


class VisionNetwork(TorchModelV2):
    """Conv net for ``Box`` observations of shape ``[H, W, C]``.

    Keys read from ``model_config``: ``conv_filters`` (None: RLlib's default stack for 84x84
    and 42x42 images), ``conv_activation``, ``post_fcnet_hiddens`` and
    ``post_fcnet_activation`` (dense layers on the flattened conv output), and
    ``vf_share_layers`` (value head on the policy trunk, or its own copy of the trunk).
    With ``num_outputs=None`` the trunk's features are the output (an LSTM wrapper on top).
    """

    # Integer frames (uint8) may arrive as they are: the model casts them to float32 on
    # its first layer, so samplers keep them uint8 in the batches (a quarter of the bytes).
    accepts_integer_obs = True

    def __init__(
        self,
        obs_space: gym.Space,
        action_space: gym.Space,
        num_outputs: int | None,
        model_config: ModelConfigDict,
        name: str,
    ) -> None:
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        shape = tuple(obs_space.shape)
        if len(shape) != 3:
            raise ValueError(
                f"VisionNetwork needs image observations [H, W, C], got shape {shape}."
            )
        cfg = self.model_config
        filters = cfg.get("conv_filters") or default_conv_filters(shape)
        conv_act = get_activation(cfg.get("conv_activation", "relu"))
        post_hiddens = [int(h) for h in cfg.get("post_fcnet_hiddens") or []]
        post_act = get_activation(cfg.get("post_fcnet_activation", "relu"))
        self.vf_share_layers = bool(cfg.get("vf_share_layers", True))

        def trunk() -> tuple[nn.Sequential, int]:
            conv, size = _conv_stack(shape, filters, conv_act)
            dense = _mlp(size, post_hiddens, post_act)
            return nn.Sequential(*conv, *dense), post_hiddens[-1] if post_hiddens else size

        self._trunk, feature_size = trunk()
        if num_outputs:
            self._logits: nn.Module = _linear(feature_size, int(num_outputs), POLICY_GAIN)
            self.num_outputs = int(num_outputs)
        else:
            self._logits = nn.Identity()
            self.num_outputs = feature_size
        self._value_trunk: nn.Sequential | None = None if self.vf_share_layers else trunk()[0]
        self._value_branch = _linear(feature_size, 1, VALUE_GAIN)
        self._features: TensorType | None = None
        self._images: TensorType | None = None
        # Conv weights in the frames' layout (see the module docstring).
        self.to(memory_format=torch.channels_last)

    @staticmethod
    def _images_of(obs: TensorType) -> TensorType:
        # [B, H, W, C] -> [B, C, H, W]; uint8 frames become floats here, not in the buffers.
        return obs.float().permute(0, 3, 1, 2)

    def forward(
        self,
        input_dict: dict[str, TensorType],
        state: list[TensorType],
        seq_lens: TensorType | None,
    ) -> tuple[TensorType, list[TensorType]]:
        # From locals, as FullyConnectedNetwork.forward: another thread may act in between.
        images = self._images_of(input_dict["obs"])
        features = self._trunk(images)
        self._images, self._features = images, features
        return self._logits(features), state

    def value_function(self) -> TensorType:
        if self._features is None:
            raise RuntimeError("value_function() called before forward().")
        if self._value_trunk is None:
            return self._value_branch(self._features).squeeze(-1)
        return self._value_branch(self._value_trunk(self._images)).squeeze(-1)

    def forward_inference(self, obs: TensorType) -> tuple[TensorType, TensorType]:
        """Action-distribution inputs and values in one call (the sampler's fast path)."""
        images = self._images_of(obs)
        features = _run(self._trunk, images)
        out = self._logits.forward(features)
        if self._value_trunk is not None:
            features = _run(self._value_trunk, images)
        return out, self._value_branch.forward(features).squeeze(-1)

    def value_only(self, obs: TensorType) -> TensorType:
        images = self._images_of(obs)
        trunk = self._trunk if self._value_trunk is None else self._value_trunk
        return self._value_branch.forward(_run(trunk, images)).squeeze(-1)


__all__ = ["DEFAULT_CONV_FILTERS", "VisionNetwork", "default_conv_filters"]
