"""SAC's networks: a policy MLP and one or two Q MLPs run as a single ensemble
(`corral.models.torch.mlp.EnsembleMLP`, re-exported here with `MLP` and `flatten_obs`)."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from corral.models.torch.mlp import MLP, EnsembleMLP, FlatObsActorCritic, flatten_obs
from corral.models.torch.torch_modelv2 import ModelConfigDict, TensorType
from corral.utils.error import UnsupportedSpaceException

# Bounds of the policy's log standard deviation (Haarnoja et al.'s reference code).
LOG_STD_MIN = -20.0
LOG_STD_MAX = 2.0


def hidden_sizes(net_config: ModelConfigDict) -> list[int]:
    """`fcnet_hiddens` followed by `post_fcnet_hiddens` of a Q_model/policy_model dict."""
    sizes = list(net_config.get("fcnet_hiddens") or [])
    return [int(h) for h in sizes + list(net_config.get("post_fcnet_hiddens") or [])]


class SACTorchModel(FlatObsActorCritic):
    """Policy and (twin) Q-networks of SAC, plus the learned temperature `log_alpha`.

    Continuous (1-D `Box`) actions: the policy outputs `concat(mean, log_std)`
    of a Gaussian whose samples are squashed by tanh into [-1, 1]; each Q-net
    maps `concat(obs, action)` to one value. Discrete actions (Christodoulou
    2019, arXiv:1910.07207): the policy outputs logits, each Q-net maps `obs`
    to one value per action.

    Args:
        policy_model_config: `fcnet_hiddens`/`fcnet_activation` of the policy net.
        q_model_config: the same for the Q-nets.
        twin_q: two Q-nets (clipped double-Q, Fujimoto et al. 2018) instead of one.
        initial_alpha: initial entropy temperature.
        target_entropy: a number, or "auto" (-dim(A) for Box, 0.98 log|A| for Discrete).
    """

    algorithm = "SAC"

    def build_heads(
        self,
        obs_dim: int,
        *,
        policy_model_config: ModelConfigDict,
        q_model_config: ModelConfigDict,
        twin_q: bool = True,
        initial_alpha: float = 1.0,
        target_entropy: float | str | None = "auto",
    ) -> None:
        action_space = self.action_space
        self.discrete = isinstance(action_space, gym.spaces.Discrete)
        if self.discrete:
            action_dim = int(action_space.n)
            policy_out, q_in_extra, q_out = action_dim, 0, action_dim
        elif isinstance(action_space, gym.spaces.Box) and len(action_space.shape) == 1:
            action_dim = int(action_space.shape[0])
            policy_out, q_in_extra, q_out = 2 * action_dim, action_dim, 1
        else:
            raise UnsupportedSpaceException(
                f"SAC needs a Discrete or 1-D Box action space, got {action_space}."
            )
        self.action_dim = action_dim
        self.twin_q = bool(twin_q)
        self.action_model = MLP(
            obs_dim,
            hidden_sizes(policy_model_config),
            policy_out,
            policy_model_config.get("fcnet_activation", "relu"),
        )
        self.q_net = EnsembleMLP(
            2 if self.twin_q else 1,
            obs_dim + q_in_extra,
            hidden_sizes(q_model_config),
            q_out,
            q_model_config.get("fcnet_activation", "relu"),
        )
        # Shape (1,), not (): safetensors checkpoints store 0-d arrays as (1,).
        self.log_alpha = nn.Parameter(torch.tensor([math.log(initial_alpha)], dtype=torch.float32))
        self.target_entropy = resolve_target_entropy(target_entropy, action_space)

    # -- RLlib 1.x's SACTorchModel interface -------------------------------

    def get_policy_output(self, model_out: TensorType) -> TensorType:
        """Action-distribution inputs: `concat(mean, log_std)` (Box) or logits (Discrete)."""
        out = self.action_model(flatten_obs(model_out))
        if self.discrete:
            return out
        mean, log_std = out.chunk(2, dim=-1)
        return torch.cat([mean, log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)], dim=-1)

    def q_ensemble(
        self,
        model_out: TensorType,
        actions: TensorType | None = None,
        detach_params: bool = False,
        members: slice | None = None,
    ) -> TensorType:
        """All Q-nets at once: `[E, B]` for Box actions, `[E, B, |A|]` for Discrete
        (`members`: only those, see `EnsembleMLP`)."""
        model_out = flatten_obs(model_out)
        if self.discrete:
            return self.q_net(model_out, detach_params, members)
        q_input = torch.cat([model_out, actions], dim=-1)
        return self.q_net(q_input, detach_params, members).squeeze(-1)

    def policy_variables(self) -> list[nn.Parameter]:
        return list(self.action_model.parameters())


def resolve_target_entropy(target_entropy: float | str | None, action_space: gym.Space) -> float:
    """SAC's entropy target: "auto" (or None) is -dim(A) for Box spaces (Haarnoja et al.
    2018b, sec. 5) and 0.98 * -log(1/|A|) for Discrete ones (Christodoulou 2019)."""
    if target_entropy is not None and target_entropy != "auto":
        return float(target_entropy)
    if isinstance(action_space, gym.spaces.Discrete):
        return 0.98 * -float(np.log(1.0 / action_space.n))
    return -float(np.prod(action_space.shape))


__all__ = [
    "LOG_STD_MAX",
    "LOG_STD_MIN",
    "MLP",
    "EnsembleMLP",
    "SACTorchModel",
    "flatten_obs",
    "hidden_sizes",
    "resolve_target_entropy",
]
