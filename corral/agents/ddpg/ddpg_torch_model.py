"""DDPG/TD3's networks: a deterministic tanh actor and one or two Q-networks."""

from __future__ import annotations

from typing import Literal, overload

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from corral.models.torch.mlp import MLP, EnsembleMLP, FlatObsActorCritic, flatten_obs
from corral.models.torch.torch_modelv2 import TensorType
from corral.utils.error import UnsupportedSpaceException
from corral.utils.spaces import is_int_box


class DDPGTorchModel(FlatObsActorCritic):
    """Actor mu(s) and critics Q_j(s, a), as RLlib 1.x's DDPG model exposes them.

    The actor ends in tanh: its actions lie in [-1, 1] (`normalize_actions`) or,
    stretched, in the action space's bounds. The critics (two with `twin_q`)
    run as one `EnsembleMLP` over `concat(obs, action)`.

    Args:
        actor_hiddens: the actor's dense layers (with `actor_hidden_activation`).
        critic_hiddens: each critic's dense layers (with `critic_hidden_activation`).
        twin_q: two critics (TD3's clipped double-Q).
        normalize_actions: act in [-1, 1] instead of the space's bounds.
    """

    algorithm = "DDPG"

    def build_heads(
        self,
        obs_dim: int,
        *,
        actor_hiddens: list[int],
        actor_hidden_activation: str = "relu",
        critic_hiddens: list[int],
        critic_hidden_activation: str = "relu",
        twin_q: bool = False,
        normalize_actions: bool = True,
    ) -> None:
        action_space = self.action_space
        if not (
            isinstance(action_space, gym.spaces.Box)
            and len(action_space.shape) == 1
            and not is_int_box(action_space)
        ):
            raise UnsupportedSpaceException(
                f"DDPG/TD3/APEX_DDPG need a 1-D float Box action space, got {action_space}."
            )
        if not normalize_actions and not (
            np.all(np.isfinite(action_space.low)) and np.all(np.isfinite(action_space.high))
        ):
            raise ValueError(f"normalize_actions=False needs finite bounds, got {action_space}.")
        action_dim = int(action_space.shape[0])
        self.twin_q = bool(twin_q)
        self.actor = MLP(
            obs_dim, [int(h) for h in actor_hiddens], action_dim, actor_hidden_activation
        )
        self.q_net = EnsembleMLP(
            2 if self.twin_q else 1,
            obs_dim + action_dim,
            [int(h) for h in critic_hiddens],
            1,
            critic_hidden_activation,
        )
        if normalize_actions:
            low, high = -np.ones(action_dim), np.ones(action_dim)
        else:
            low, high = action_space.low, action_space.high
        self.register_buffer("action_low", torch.as_tensor(low, dtype=torch.float32))
        self.register_buffer("action_high", torch.as_tensor(high, dtype=torch.float32))

    def get_policy_output(self, model_out: TensorType) -> TensorType:
        """mu(s): tanh of the actor's output, stretched onto [action_low, action_high]."""
        squashed = torch.tanh(self.actor(flatten_obs(model_out)))
        return self.action_low + (squashed + 1.0) * 0.5 * (self.action_high - self.action_low)

    def q_ensemble(
        self,
        model_out: TensorType,
        actions: TensorType,
        detach_params: bool = False,
        members: slice | None = None,
    ) -> TensorType:
        """All critics at once, `[E, B]` (`members`: only those, see `EnsembleMLP`)."""
        q_input = torch.cat([flatten_obs(model_out), actions], dim=-1)
        return self.q_net(q_input, detach_params, members).squeeze(-1)

    @overload
    def policy_variables(self, as_dict: Literal[False] = False) -> list[nn.Parameter]: ...
    @overload
    def policy_variables(self, as_dict: Literal[True]) -> dict[str, TensorType]: ...

    def policy_variables(self, as_dict: bool = False) -> list[nn.Parameter] | dict[str, TensorType]:
        """The actor's parameters (`as_dict`: its state dict, RLlib 1.13's option)."""
        if as_dict:
            return dict(self.actor.state_dict())
        return list(self.actor.parameters())
