"""Plain dense networks shared by the actor-critic models (SAC, DDPG/TD3).

`EnsembleMLP` runs E equally shaped MLPs (twin Q-networks) as stacked weights
`[E, in, out]`, with one batched matmul per layer (`torch.baddbmm`) instead of E
separate MLPs: half the kernel launches, which is what an update on small nets and
batch 256 costs on a CPU.

`FlatObsActorCritic` is the actor-critic models' base class. By default its heads read the
flattened observations; with `use_state_preprocessor` (DDPG's and TD3's key of RLlib 1.13,
which corral builds for SAC as well) they read the output of a catalog model built from the
policy's `model` config (see `build_state_preprocessor`).
"""

from __future__ import annotations

import math
from typing import Any, Literal, overload

import gymnasium as gym
import torch
from torch import nn

from corral.models.catalog import ModelCatalog
from corral.models.torch.fcnet import get_activation
from corral.models.torch.torch_modelv2 import ModelConfigDict, TorchModelV2
from corral.utils.typing import TensorType


class MLP(nn.Module):
    """Dense layers with one activation, then a linear output layer (torch's default init)."""

    def __init__(self, in_size: int, hiddens: list[int], out_size: int, activation: str) -> None:
        super().__init__()
        act = get_activation(activation)
        layers: list[nn.Module] = []
        for size in hiddens:
            layers.append(nn.Linear(in_size, size))
            if act is not None:
                layers.append(act())
            in_size = size
        layers.append(nn.Linear(in_size, out_size))
        self.layers = nn.Sequential(*layers)

    def forward(self, x: TensorType) -> TensorType:
        for layer in self.layers:
            x = layer.forward(x)
        return x


class EnsembleMLP(nn.Module):
    """E independent MLPs of equal shape evaluated together: `[B, in] -> [E, B, out]`.

    Each member is initialised like `nn.Linear` (uniform in +-1/sqrt(fan_in)).
    """

    def __init__(
        self, num_members: int, in_size: int, hiddens: list[int], out_size: int, activation: str
    ) -> None:
        super().__init__()
        act = get_activation(activation)
        self.activation = act() if act is not None else None
        self.num_members = num_members
        sizes = [in_size, *hiddens, out_size]
        self.weights = nn.ParameterList()
        self.biases = nn.ParameterList()
        for fan_in, fan_out in zip(sizes[:-1], sizes[1:]):
            bound = 1.0 / math.sqrt(fan_in)
            self.weights.append(nn.Parameter(torch.empty(num_members, fan_in, fan_out)))
            self.biases.append(nn.Parameter(torch.empty(num_members, 1, fan_out)))
            nn.init.uniform_(self.weights[-1], -bound, bound)
            nn.init.uniform_(self.biases[-1], -bound, bound)

    def forward(
        self, x: TensorType, detach_params: bool = False, members: slice | None = None
    ) -> TensorType:
        """`[B, in] -> [E, B, out]`. With `detach_params` the result still depends
        on `x` differentiably, but no gradient reaches this module's parameters
        (an actor's loss through its critics). `members`: only those members are
        evaluated (`[len(members), B, out]`), e.g. `slice(0, 1)` for the first alone."""
        weights, biases = list(self.weights), list(self.biases)
        if detach_params:
            weights = [w.detach() for w in weights]
            biases = [b.detach() for b in biases]
        if members is not None:
            weights = [w[members] for w in weights]
            biases = [b[members] for b in biases]
        # Every member reads the same input: a [E, B, in] view of it (no copy), so each
        # layer is one batched matmul over contiguous [E, B, ...] activations. (One shared
        # first-layer matmul, [B, in] x [in, E * out], gave them a transposed layout that
        # made every later layer and the backward slower: 2.8 -> 2.5 ms for TD3's twin
        # 256x256 critics on 256 rows, forward and backward. The outputs and the weights'
        # gradients are the same to the bit; the input's gradient, an actor's loss through
        # its critics, is summed over the members in another order: the last bits differ.)
        h = x.unsqueeze(0).expand(weights[0].shape[0], -1, -1)
        for i, (w, b) in enumerate(zip(weights, biases)):
            if i and self.activation is not None:
                h = self.activation(h)
            h = torch.baddbmm(b, h, w)
        return h


# `EnsembleMLP(..., members=FIRST)`: the first member alone (e.g. the first critic).
FIRST = slice(0, 1)


def flatten_obs(obs: TensorType) -> TensorType:
    """Observations as float rows: the heads take flat inputs (images, 2-D boxes)."""
    return obs.reshape(obs.shape[0], -1).float()


class TwinQHeads:
    """RLlib 1.x's Q accessors of the actor-critic models (SAC, DDPG/TD3), over the
    model's `q_ensemble(model_out, actions)` (all critics at once, `[E, B, ...]`) and its
    `q_net` (one or two critics, `twin_q`, called as an `EnsembleMLP` is: an
    `EnsembleMLP`, or SAC's `CatalogQEnsemble` of custom models)."""

    twin_q: bool
    q_net: nn.Module

    def get_q_values(self, model_out: TensorType, actions: TensorType | None = None) -> TensorType:
        """Q-values of the first critic."""
        return self.q_ensemble(model_out, actions, members=FIRST)[0]  # type: ignore[attr-defined]

    def get_twin_q_values(
        self, model_out: TensorType, actions: TensorType | None = None
    ) -> TensorType:
        """Q-values of the second critic (requires `twin_q`)."""
        if not self.twin_q:
            raise ValueError("get_twin_q_values() needs twin_q=True.")
        return self.q_ensemble(model_out, actions, members=slice(1, 2))[0]  # type: ignore[attr-defined]

    @overload
    def q_variables(self, as_dict: Literal[False] = False) -> list[nn.Parameter]: ...
    @overload
    def q_variables(self, as_dict: Literal[True]) -> dict[str, TensorType]: ...

    def q_variables(self, as_dict: bool = False) -> list[nn.Parameter] | dict[str, TensorType]:
        """The critics' parameters (`as_dict`: their state dict, RLlib 1.13's option)."""
        if as_dict:
            return dict(self.q_net.state_dict())
        return list(self.q_net.parameters())


# The state preprocessor's output size: RLlib 1.13's DDPG asks the catalog for 256
# ("arbitrary"), which is the last conv layer's width of the default 42x42 and 84x84 stacks.
STATE_PREPROCESSOR_OUTPUTS = 256


def build_state_preprocessor(
    obs_space: gym.Space, action_space: gym.Space, model_config: ModelConfigDict
) -> TorchModelV2:
    """The network of `use_state_preprocessor`: a catalog model for `obs_space`, built as
    RLlib 1.13's DDPG builds it (`ModelCatalog.get_model_v2` with the `model` config, 256
    outputs and `no_final_linear`), i.e. the user's `custom_model`, else a `VisionNetwork`
    for images or a `FullyConnectedNetwork` (its last hidden layer, 256 wide and activated,
    is the output; corral's `VisionNetwork` ends in a 256-wide linear layer instead).

    Raises:
        ValueError: the model is recurrent (`use_lstm`, or a custom model with a state):
            the actor-critic policies act and learn on single steps.
    """
    config = {**model_config, "no_final_linear": True}
    base = ModelCatalog.get_model_v2(
        obs_space,
        action_space,
        STATE_PREPROCESSOR_OUTPUTS,
        config,
        framework="torch",
        name="state_preprocessor",
    )
    if base.get_initial_state():
        raise ValueError(
            f"use_state_preprocessor needs a feed-forward `model`; {type(base).__name__} "
            "has a recurrent state (turn off use_lstm)."
        )
    return base


class FlatObsActorCritic(TwinQHeads, TorchModelV2):
    """The actor-critic models (SAC, DDPG/TD3): the heads (built by `build_heads`) read
    `model_out`, which `forward` returns.

    Without a state preprocessor (the default) `model_out` is the flattened observations
    and the policies pass those to the heads directly. With `state_preprocessor`,
    `model_out` is `base_model`'s output (`state_features`, `[B, base_model.num_outputs]`):
    the policies run it first, train it with the critics' loss (its parameters are in the
    critic optimiser's group, `state_preprocessor_variables()`), and give the actor its
    output detached. The target model is a full copy, state preprocessor included.

    The keyword arguments after `state_preprocessor` are the heads' (`build_heads`' own).
    """

    # Named in `value_function`'s error.
    algorithm = "This algorithm"

    def __init__(
        self,
        obs_space: gym.Space,
        action_space: gym.Space,
        num_outputs: int | None,
        model_config: ModelConfigDict,
        name: str,
        *,
        state_preprocessor: bool = False,
        **heads: Any,
    ) -> None:
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        self.base_model: TorchModelV2 | None = None
        if state_preprocessor:
            self.base_model = build_state_preprocessor(obs_space, action_space, model_config)
            heads_in = int(self.base_model.num_outputs)
        else:
            heads_in = int(gym.spaces.utils.flatdim(obs_space))
        self.build_heads(heads_in, **heads)

    def build_heads(self, obs_dim: int, **heads: Any) -> None:
        """Builds the actor and critics for `obs_dim` flat inputs (`model_out`'s width)
        and `self.action_space`."""
        raise NotImplementedError

    def state_features(self, obs: TensorType) -> TensorType:
        """`base_model`'s output for a batch of observations, as flat rows `[B, n]` (how
        the policies pass them) or in the observation space's shape.

        Raises:
            RuntimeError: the model has no state preprocessor.
        """
        base = self.base_model
        if base is None:
            raise RuntimeError("state_features() needs use_state_preprocessor=True.")
        obs = obs.reshape(obs.shape[0], *self.obs_space.shape).float()
        out, _ = base({"obs": obs}, [], None)
        return out

    def state_preprocessor_variables(self) -> list[nn.Parameter]:
        """The state preprocessor's parameters (none without one)."""
        return [] if self.base_model is None else list(self.base_model.parameters())

    def forward(
        self,
        input_dict: dict[str, TensorType],
        state: list[TensorType],
        seq_lens: TensorType | None,
    ) -> tuple[TensorType, list[TensorType]]:
        """`model_out`: the (flattened) observations, or the state preprocessor's output."""
        obs = input_dict.get("obs_flat", input_dict["obs"])
        if self.base_model is None:
            return flatten_obs(obs), state
        return self.state_features(obs), state

    def value_function(self) -> TensorType:
        raise NotImplementedError(f"{self.algorithm} has no state-value head; use get_q_values().")


def preprocessed_transition(
    model: FlatObsActorCritic,
    target_model: FlatObsActorCritic,
    obs: TensorType,
    next_obs: TensorType,
) -> tuple[TensorType, TensorType, TensorType]:
    """The heads' inputs of a transition batch with a state preprocessor:
    `(critic_in, actor_in, target_next_in)`.

    `critic_in` is the model's `state_features(obs)`, through which the critics' loss
    trains the state preprocessor; `actor_in` is the same tensor detached (the actor's loss
    does not train it); `target_next_in` is the target model's features of `next_obs`
    (without a gradient), for the target critics (and DDPG's target actor).
    """
    critic_in = model.state_features(obs)
    with torch.no_grad():
        target_next_in = target_model.state_features(next_obs)
    return critic_in, critic_in.detach(), target_next_in


__all__ = [
    "MLP",
    "STATE_PREPROCESSOR_OUTPUTS",
    "EnsembleMLP",
    "FlatObsActorCritic",
    "TwinQHeads",
    "build_state_preprocessor",
    "flatten_obs",
    "preprocessed_transition",
]
