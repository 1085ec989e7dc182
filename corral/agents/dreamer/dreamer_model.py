"""Dreamer's networks: the world model (PlaNet's RSSM with a conv encoder, a conv decoder
and a reward head), the actor and the value network (RLlib 1.13's `DreamerModel`).

Hafner et al. 2020, "Dream to Control: Learning Behaviors by Latent Imagination" (ICLR,
arXiv:1912.01603); the world model is PlaNet's (Hafner et al. 2019, arXiv:1811.04551).

The latent state s_t = (h_t, z_t) has a deterministic part h_t (a GRU's state) and a
stochastic part z_t (a diagonal Gaussian's sample). The RSSM's prior predicts z_t from
(h_t), h_t = GRU(h_{t-1}, [z_{t-1}, a_{t-1}]); its posterior also sees the embedding of the
frame o_t. A state is the list `[mean, std, stoch, deter]` (the Gaussian of z_t, z_t, h_t);
its feature, what the decoder, the reward and value heads and the actor read, is
`concat(z_t, h_t)`.

Frames: any 3-D image Box, channels first `[C, H, W]` (dm_control's, RLlib's layout) or
channels last `[H, W, C]`, with C <= 4. The model scales them from the space's bounds into
[-0.5, 0.5] (uint8 frames: x / 255 - 0.5; frames already in [-0.5, 0.5] are unchanged),
puts the channels first and resizes frames that are not 64 x 64 to 64 x 64 (bilinear):
the encoder and the decoder work on 64 x 64 frames (RLlib's layers), and the decoder
reconstructs those.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, cast

import gymnasium as gym
import numpy as np
import torch
import torch.nn.functional as F
from torch import distributions as td
from torch import nn

from corral.agents.dreamer.utils import TanhBijector, init_dreamer_weights
from corral.models.torch.modules.convtranspose2d_stack import ConvTranspose2DStack
from corral.models.torch.torch_modelv2 import ModelConfigDict, TensorType, TorchModelV2
from corral.utils.error import UnsupportedSpaceException

# An activation: an `nn.Module` class such as `nn.ReLU` (RLlib 1.13's alias).
ActFunc = Any

# The side of the frames the encoder reads and the decoder writes.
MODEL_FRAME_SIZE = 64

# A latent state: [mean, std, stoch, deter].
State = list[torch.Tensor]


class ConvEncoder(nn.Module):
    """Four 4x4 convolutions of stride 2 (`depth`, 2, 4 and 8 x `depth` channels) from a
    frame `[C, 64, 64]` in [-0.5, 0.5] to its embedding (`32 * depth` values for 64 x 64).

    Args:
        depth: channels of the first convolution.
        act: activation class (default `nn.ReLU`).
        shape: `(channels, height, width)` of the frames.
    """

    def __init__(
        self, depth: int = 32, act: ActFunc = None, shape: Sequence[int] = (3, 64, 64)
    ) -> None:
        super().__init__()
        self.act = act or nn.ReLU
        self.depth = depth
        self.shape = tuple(int(d) for d in shape)
        channels, height, width = self.shape
        layers: list[nn.Module] = []
        for i, mult in enumerate((1, 2, 4, 8)):
            layers += [nn.Conv2d(channels if i == 0 else depth * mult // 2, depth * mult, 4, 2)]
            layers += [self.act()]
            height, width = (height - 4) // 2 + 1, (width - 4) // 2 + 1
        if height < 1 or width < 1:
            raise ValueError(f"ConvEncoder: frames of shape {self.shape} are too small.")
        self.embed_size = 8 * depth * height * width
        self.model = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """`[*batch, C, H, W]` -> `[*batch, embed_size]`."""
        batch_dims = x.shape[:-3]
        out = self.model(x.reshape(-1, *self.shape))
        return out.reshape(*batch_dims, self.embed_size)


class ConvDecoder(ConvTranspose2DStack):
    """The frame distribution of a feature (PlaNet's decoder): a dense layer to a 1 x 1
    image of `32 * depth` channels, then transposed convolutions to `[C, 64, 64]`; a
    unit-variance Gaussian per pixel, one `Independent` distribution per frame.

    Args:
        input_size: size of the feature.
        depth: channels of the last hidden convolution (RLlib's encoder depth).
        act: activation class (default `nn.ReLU`).
        shape: `(channels, 64, 64)` of the frames.
    """

    def __init__(
        self,
        input_size: int,
        depth: int = 32,
        act: ActFunc = None,
        shape: Sequence[int] = (3, 64, 64),
    ) -> None:
        super().__init__(
            input_size=input_size,
            filters=((32 * depth, 5, 2), (4 * depth, 5, 2), (2 * depth, 6, 2), (depth, 6, 2)),
            activation_fn=act or nn.ReLU,
            output_shape=tuple(shape),
        )
        self.depth = depth
        self.shape = list(shape)


def _mlp(input_size: int, output_size: int, layers: int, units: int, act: ActFunc) -> nn.Sequential:
    """`layers` hidden dense layers of `units` with `act`, then a linear output layer."""
    modules: list[nn.Module] = []
    size = input_size
    for _ in range(layers):
        modules += [nn.Linear(size, units), act()]
        size = units
    modules.append(nn.Linear(size, output_size))
    return nn.Sequential(*modules)


class DenseDecoder(nn.Module):
    """A dense network that outputs a distribution: the reward head and the value network.

    Args:
        input_size: size of the feature.
        output_size: size of the output (1: a scalar per feature, the axis dropped).
        layers: hidden layers.
        units: units per hidden layer.
        dist: "normal" (unit-variance Gaussian of the outputs) or "binary" (Bernoulli of
            the logits).
        act: activation class (default `nn.ELU`).

    Raises:
        ValueError: an unknown `dist`.
    """

    def __init__(
        self,
        input_size: int,
        output_size: int,
        layers: int,
        units: int,
        dist: str = "normal",
        act: ActFunc = None,
    ) -> None:
        super().__init__()
        if dist not in ("normal", "binary"):
            raise ValueError(f"DenseDecoder: dist must be 'normal' or 'binary', got {dist!r}.")
        self.act = act or nn.ELU
        self.dist = dist
        self.input_size = input_size
        self.output_size = output_size
        self.model = _mlp(input_size, output_size, layers, units, self.act)

    def forward(self, x: torch.Tensor) -> td.Distribution:
        """`[*batch, input_size]` -> a distribution over `[*batch]` (or `[*batch, output]`)."""
        out = self.model(x)
        if self.output_size == 1:
            out = out.squeeze(-1)
        if self.dist == "normal":
            return td.Independent(td.Normal(out, 1.0), 0)
        return td.Independent(td.Bernoulli(logits=out), 0)


class ActionDecoder(nn.Module):
    """The actor: a dense network to a tanh-squashed diagonal Gaussian over actions in
    [-1, 1] (Hafner et al. 2020, sec. 3).

    mean = mean_scale * tanh(mean_out / mean_scale); std = softplus(std_out + c) + min_std
    with c = softplus^-1(init_std), so that a fresh actor's std is about `init_std`.

    Args:
        input_size: size of the feature.
        action_size: size of the (1-D) action.
        layers: hidden layers.
        units: units per hidden layer.
        dist: "tanh_normal" (the only one built).
        act: activation class (default `nn.ReLU`).
        min_std: lower bound of the Gaussian's std.
        init_std: the Gaussian's std for zero network outputs.
        mean_scale: bound of the Gaussian's mean.

    Raises:
        ValueError: another `dist` (RLlib 1.13's "onehot", for discrete actions, was not
            built there either).
    """

    def __init__(
        self,
        input_size: int,
        action_size: int,
        layers: int,
        units: int,
        dist: str = "tanh_normal",
        act: ActFunc = None,
        min_std: float = 1e-4,
        init_std: float = 5.0,
        mean_scale: float = 5.0,
    ) -> None:
        super().__init__()
        if dist != "tanh_normal":
            raise ValueError(f"ActionDecoder: only dist='tanh_normal' is built, got {dist!r}.")
        self.dist = dist
        self.act = act or nn.ReLU
        self.min_std = min_std
        self.init_std = init_std
        self.mean_scale = mean_scale
        self.action_size = action_size
        self.raw_init_std = float(np.log(np.expm1(init_std)))
        self.model = _mlp(input_size, 2 * action_size, layers, units, self.act)

    def forward(self, x: torch.Tensor) -> td.Independent:
        """`[*batch, input_size]` -> the action distribution over `[*batch, action_size]`."""
        return td.Independent(td.TransformedDistribution(self.gaussian(x), [TanhBijector()]), 1)

    def gaussian(self, x: torch.Tensor) -> td.Normal:
        """The Gaussian before the tanh."""
        mean, std = self.model(x).chunk(2, dim=-1)
        mean = self.mean_scale * torch.tanh(mean / self.mean_scale)
        std = F.softplus(std + self.raw_init_std) + self.min_std
        return td.Normal(mean, std)


class RSSM(nn.Module):
    """PlaNet's recurrent state-space model: the prior (`img_step`, the transition) and the
    posterior (`obs_step`, which also sees the frame's embedding).

    Args:
        action_size: size of the actions.
        embed_size: size of the encoder's embeddings.
        stoch: size of the stochastic state z.
        deter: size of the deterministic state h (the GRU's).
        hidden: units of the dense layers.
        act: activation class (default `nn.ELU`).
    """

    def __init__(
        self,
        action_size: int,
        embed_size: int,
        stoch: int = 30,
        deter: int = 200,
        hidden: int = 200,
        act: ActFunc = None,
    ) -> None:
        super().__init__()
        self.stoch_size = stoch
        self.deter_size = deter
        self.hidden_size = hidden
        self.act = act or nn.ELU
        self.obs1 = nn.Linear(embed_size + deter, hidden)
        self.obs2 = nn.Linear(hidden, 2 * stoch)
        self.cell = nn.GRUCell(hidden, deter)
        self.img1 = nn.Linear(stoch + action_size, hidden)
        self.img2 = nn.Linear(deter, hidden)
        self.img3 = nn.Linear(hidden, 2 * stoch)

    def get_initial_state(self, batch_size: int) -> State:
        """Zero `[mean, std, stoch, deter]` for `batch_size` rows (on the model's device)."""
        weight = self.img1.weight
        stoch = [weight.new_zeros(batch_size, self.stoch_size) for _ in range(3)]
        return [*stoch, weight.new_zeros(batch_size, self.deter_size)]

    def observe(
        self, embed: torch.Tensor, action: torch.Tensor, state: State | None = None
    ) -> tuple[State, State]:
        """Posterior and prior states along sequences: `embed` `[B, T, E]` of the frames
        o_t, `action` `[B, T, A]` the actions a_{t-1} that led to them, from `state` (zeros
        when None). Returns (posterior, prior), each `[mean, std, stoch, deter]` of
        `[B, T, ...]` tensors."""
        if state is None:
            state = self.get_initial_state(action.shape[0])
        posts: list[State] = []
        priors: list[State] = []
        for t in range(action.shape[1]):
            state, prior = self.obs_step(state, action[:, t], embed[:, t])
            posts.append(state)
            priors.append(prior)
        return _stack_time(posts, dim=1), _stack_time(priors, dim=1)

    def imagine(self, action: torch.Tensor, state: State | None = None) -> State:
        """Prior states along sequences of actions `[B, T, A]` from `state` (zeros when
        None), as `[mean, std, stoch, deter]` of `[B, T, ...]` tensors."""
        if state is None:
            state = self.get_initial_state(action.shape[0])
        priors: list[State] = []
        for t in range(action.shape[1]):
            state = self.img_step(state, action[:, t])
            priors.append(state)
        return _stack_time(priors, dim=1)

    def obs_step(
        self, prev_state: State, prev_action: torch.Tensor, embed: torch.Tensor
    ) -> tuple[State, State]:
        """One step: the prior from (prev_state, prev_action), then the posterior from its
        h_t and the frame's embedding. Returns (posterior, prior)."""
        prior = self.img_step(prev_state, prev_action)
        x = self.act()(self.obs1(torch.cat([prior[3], embed], dim=-1)))
        mean, std = self.obs2(x).chunk(2, dim=-1)
        std = F.softplus(std) + 0.1
        stoch = self.get_dist(mean, std).rsample()
        return [mean, std, stoch, prior[3]], prior

    def img_step(self, prev_state: State, prev_action: torch.Tensor) -> State:
        """One transition: h_t = GRU(h_{t-1}, f([z_{t-1}, a_{t-1}])), z_t ~ p(z_t | h_t)."""
        x = self.act()(self.img1(torch.cat([prev_state[2], prev_action], dim=-1)))
        deter = self.cell(x, prev_state[3])
        mean, std = self.img3(self.act()(self.img2(deter))).chunk(2, dim=-1)
        std = F.softplus(std) + 0.1
        stoch = self.get_dist(mean, std).rsample()
        return [mean, std, stoch, deter]

    def get_feature(self, state: State) -> torch.Tensor:
        """`concat(stoch, deter)`: what the heads and the actor read."""
        return torch.cat([state[2], state[3]], dim=-1)

    def get_dist(self, mean: torch.Tensor, std: torch.Tensor) -> td.Normal:
        """The stochastic state's Gaussian."""
        return td.Normal(mean, std)


def _stack_time(states: list[State], dim: int) -> State:
    """A list (over time) of states -> one state of tensors stacked along `dim`."""
    return [torch.stack(parts, dim=dim) for parts in zip(*states)]


def image_layout(space: gym.Space) -> tuple[bool, tuple[int, int, int]]:
    """(channels first?, (channels, height, width)) of an image observation space.

    Raises:
        UnsupportedSpaceException: not a 3-D Box with 1 to 4 channels on one end.
    """
    shape = getattr(space, "shape", None)
    if isinstance(space, gym.spaces.Box) and shape is not None and len(shape) == 3:
        first, last = shape[0], shape[-1]
        if first <= 4 < last:
            return True, (first, shape[1], shape[2])
        if last <= 4 < first:
            return False, (last, shape[0], shape[1])
    raise UnsupportedSpaceException(
        f"Dreamer needs image observations, a 3-D Box [C, H, W] or [H, W, C] with 1 to 4 "
        f"channels; observation space {space} is not supported."
    )


class DreamerModel(TorchModelV2, nn.Module):
    """All of Dreamer's networks, RLlib 1.13's `DreamerModel`: `encoder`, `decoder`,
    `reward`, `dynamics` (the world model), `actor` and `value`.

    `model_config` keys (the trainer's `dreamer_model`): `depth_size` (encoder/decoder
    channels), `deter_size` (h, and the RSSM's dense layers), `stoch_size` (z),
    `hidden_size` (the reward, value and actor networks) and `action_init_std`.

    The recurrent state while acting is `[mean, std, stoch, deter, action]`: the posterior
    after the last frame and the action taken after it (zeros at an episode's start).

    Raises:
        UnsupportedSpaceException: the observations are not images or the actions not a
            1-D Box.
    """

    # Integer frames (uint8) are stored as they are and scaled here.
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
        self.channels_first, (channels, height, width) = image_layout(obs_space)
        if not (isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1):
            raise UnsupportedSpaceException(
                f"Dreamer needs a 1-D Box action space; action space {action_space} is not "
                "supported."
            )
        self.frame_size = (height, width)
        self._obs_offset, self._obs_scale = _frame_scaling(cast(gym.spaces.Box, obs_space))
        self.depth = int(model_config["depth_size"])
        self.deter_size = int(model_config["deter_size"])
        self.stoch_size = int(model_config["stoch_size"])
        self.hidden_size = int(model_config["hidden_size"])
        self.action_size = int(action_space.shape[0])
        feature_size = self.stoch_size + self.deter_size
        frame = (channels, MODEL_FRAME_SIZE, MODEL_FRAME_SIZE)

        self.encoder = ConvEncoder(self.depth, shape=frame)
        self.decoder = ConvDecoder(feature_size, depth=self.depth, shape=frame)
        self.reward = DenseDecoder(feature_size, 1, 2, self.hidden_size)
        self.dynamics = RSSM(
            self.action_size,
            self.encoder.embed_size,
            stoch=self.stoch_size,
            deter=self.deter_size,
            hidden=self.deter_size,
        )
        self.actor = ActionDecoder(
            feature_size,
            self.action_size,
            4,
            self.hidden_size,
            init_std=float(model_config.get("action_init_std", 5.0)),
        )
        self.value = DenseDecoder(feature_size, 1, 3, self.hidden_size)
        init_dreamer_weights(self)

    def preprocess_obs(self, obs: torch.Tensor) -> torch.Tensor:
        """Observations `[*batch, *obs_shape]` as the env gives them -> frames
        `[*batch, C, 64, 64]` in [-0.5, 0.5] (see the module docstring)."""
        x = obs.float()
        if not self.channels_first:
            x = x.movedim(-1, -3)
        if self._obs_scale is not None:
            x = (x - self._obs_offset) * self._obs_scale - 0.5
        if self.frame_size != (MODEL_FRAME_SIZE, MODEL_FRAME_SIZE):
            batch_dims = x.shape[:-3]
            x = F.interpolate(
                x.reshape(-1, *x.shape[-3:]),
                size=(MODEL_FRAME_SIZE, MODEL_FRAME_SIZE),
                mode="bilinear",
                align_corners=False,
            )
            x = x.reshape(*batch_dims, *x.shape[-3:])
        return x

    def policy(
        self, obs: torch.Tensor, state: list[torch.Tensor] | None, explore: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor, list[torch.Tensor]]:
        """One acting step: the posterior after the frames `obs` (as the env gives them,
        `[B, *obs_shape]`) from `state` (`[mean, std, stoch, deter, action]`, each
        `[B, ...]`; the initial state when None), then the actor's action: a sample with
        `explore`, else tanh of the Gaussian's mean.

        Returns:
            (actions `[B, A]`, their log-densities `[B]`, the new state, whose action is
            the one returned; the caller puts the action it executes in its place).
        """
        if state is None:
            state = self.initial_state(obs.shape[0])
        post, prev_action = list(state[:4]), state[4]
        embed = self.encoder(self.preprocess_obs(obs))
        post, _ = self.dynamics.obs_step(post, prev_action, embed)
        feat = self.dynamics.get_feature(post)
        dist = self.actor(feat)
        if explore:
            action = dist.sample()
        else:
            action = torch.tanh(self.actor.gaussian(feat).mean)
        logp = dist.log_prob(action)
        return action, logp, [*post, action]

    def imagine_ahead(self, state: State, horizon: int) -> torch.Tensor:
        """Imagined features of `horizon` steps of the actor in the world model, from every
        state in `state` (`[mean, std, stoch, deter]` of `[B, T, ...]`, detached first).

        The actor reads the imagined features detached, and acts by reparameterised
        samples, so the imagined features depend on the actor's weights through its actions
        only (RLlib 1.13's choice).

        Returns:
            Features `[horizon, B * T, feature_size]` (the start states not included).
        """
        start = [s.detach().reshape(-1, s.shape[-1]) for s in state]
        feats = []
        for _ in range(horizon):
            action = self.actor(self.dynamics.get_feature(start).detach()).rsample()
            start = self.dynamics.img_step(start, action)
            feats.append(self.dynamics.get_feature(start))
        return torch.stack(feats, dim=0)

    def initial_state(self, batch_size: int) -> list[torch.Tensor]:
        """The acting state `[mean, std, stoch, deter, action]` of zeros, `[batch_size, ...]`."""
        state = self.dynamics.get_initial_state(batch_size)
        return [*state, state[3].new_zeros(batch_size, self.action_size)]

    def get_initial_state(self) -> list[TensorType]:
        """`[mean, std, stoch, deter, action]` of zeros, without a batch dimension."""
        return [s[0] for s in self.initial_state(1)]


def _frame_scaling(space: gym.spaces.Box) -> tuple[float, float | None]:
    """(offset, scale) mapping the space's values onto [0, 1] (`(x - offset) * scale`);
    scale None for unbounded frames, which are used as they are."""
    low, high = float(np.min(space.low)), float(np.max(space.high))
    if not (np.isfinite(low) and np.isfinite(high)) or high <= low:
        return 0.0, None
    return low, 1.0 / (high - low)


__all__ = [
    "ActFunc",
    "ActionDecoder",
    "ConvDecoder",
    "ConvEncoder",
    "DenseDecoder",
    "DreamerModel",
    "RSSM",
    "image_layout",
]
