"""SAC's networks: a policy MLP and one or two Q MLPs run as a single ensemble
(`corral.models.torch.mlp.EnsembleMLP`, re-exported here with `MLP` and `flatten_obs`),
or, when `policy_model` / `Q_model` name a `custom_model`, networks built by
`ModelCatalog` (the Q-nets then run one after the other in a `CatalogQEnsemble`)."""

from __future__ import annotations

import math

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from corral.models.catalog import ModelCatalog
from corral.models.torch.mlp import MLP, EnsembleMLP, FlatObsActorCritic, flatten_obs
from corral.models.torch.torch_modelv2 import ModelConfigDict, TensorType, TorchModelV2
from corral.utils.error import UnsupportedSpaceException
from corral.utils.spaces import is_int_box

# Bounds of the policy's log standard deviation (Haarnoja et al.'s reference code).
LOG_STD_MIN = -20.0
LOG_STD_MAX = 2.0


def hidden_sizes(net_config: ModelConfigDict) -> list[int]:
    """`fcnet_hiddens` followed by `post_fcnet_hiddens` of a Q_model/policy_model dict."""
    sizes = list(net_config.get("fcnet_hiddens") or [])
    return [int(h) for h in sizes + list(net_config.get("post_fcnet_hiddens") or [])]


def model_output(
    net: TorchModelV2,
    inputs: TensorType,
    num_outputs: int,
    detach_params: bool = False,
    **extra_inputs: object,
) -> TensorType:
    """The first output of a catalog model called as `net({"obs": inputs, ...}, [], None)`,
    checked to be `[B, num_outputs]`.

    With `detach_params` the output still depends on `inputs` differentiably, but no
    gradient reaches `net`'s parameters (an actor's loss through its critics): the
    model runs on detached copies of them (`torch.func.functional_call`).
    """
    input_dict = {"obs": inputs, **extra_inputs}
    if detach_params:
        params = {name: p.detach() for name, p in net.named_parameters()}
        out, _ = torch.func.functional_call(net, params, (input_dict, [], None))
    else:
        out, _ = net(input_dict, [], None)
    if tuple(out.shape) != (inputs.shape[0], num_outputs):
        raise ValueError(
            f"Custom model {type(net).__name__} ({net.name!r}) returned an output of shape "
            f"{tuple(out.shape)}; SAC needs [batch, num_outputs] = "
            f"{[int(inputs.shape[0]), num_outputs]}."
        )
    return out


class CatalogQEnsemble(nn.Module):
    """SAC's Q-nets from `Q_model`'s `custom_model`, called like `EnsembleMLP`:
    `[B, in] -> [E, B, out]`, one catalog model per member (run one after another).

    Args:
        nets: the members (two with `twin_q`), each mapping `{"obs": [B, in]}` to
            `[B, out]`.
        num_outputs: `out`, 1 for Box actions (the input is `concat(obs, action)`),
            |A| for Discrete ones (the input is the observation).
    """

    def __init__(self, nets: list[TorchModelV2], num_outputs: int) -> None:
        super().__init__()
        self.nets = nn.ModuleList(nets)
        self.num_members = len(nets)
        self.num_outputs = num_outputs

    def forward(
        self, x: TensorType, detach_params: bool = False, members: slice | None = None
    ) -> TensorType:
        """`[B, in] -> [E, B, out]`; `detach_params` and `members` as in `EnsembleMLP`."""
        nets = list(self.nets) if members is None else list(self.nets)[members]
        return torch.stack(
            [
                model_output(net, x, self.num_outputs, detach_params, is_training=True)
                for net in nets
            ]
        )


def _overridden(model: nn.Module, method: str) -> bool:
    """Whether `model`'s class overrides `SACTorchModel.method`."""
    return getattr(type(model), method) is not getattr(SACTorchModel, method)


def heads_obs_space(obs_space: gym.Space | None, obs_dim: int) -> gym.spaces.Box:
    """The observation space of the custom heads: the model's own if it is a 1-D Box,
    else a flat Box of `obs_dim` (the heads read flattened observations; `obs_space` is
    None when they read a state preprocessor's `obs_dim` outputs)."""
    if isinstance(obs_space, gym.spaces.Box) and len(obs_space.shape) == 1:
        return obs_space
    return gym.spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32)


class SACTorchModel(FlatObsActorCritic):
    """Policy and (twin) Q-networks of SAC, plus the learned temperature `log_alpha`.

    Continuous (1-D `Box`) actions: the policy outputs `concat(mean, log_std)`
    of a Gaussian whose samples are squashed by tanh into [-1, 1]; each Q-net
    maps `concat(obs, action)` to one value. Discrete actions (Christodoulou
    2019, arXiv:1910.07207): the policy outputs logits, each Q-net maps `obs`
    to one value per action.

    Custom networks (`custom_model` in `policy_model` / `Q_model`, a class or a name
    registered with `ModelCatalog.register_custom_model`) are built by
    `ModelCatalog.get_model_v2` with RLlib's constructor arguments, as RLlib 1.13's
    SAC builds them:
    - the policy net: `(obs_space, action_space, 2 * dim(A) or |A|, policy_model_config,
      "policy_model", **custom_model_config)`, called as `net({"obs": obs}, [], None)`;
    - each Q-net ("q", and "twin_q" with `twin_q`): for Discrete actions
      `(obs_space, action_space, |A|, ...)` on the observations; for Box actions
      `(Box(dim(obs) + dim(A)), action_space, 1, ...)` on `concat(obs, action)`.
    `obs_space` is the flat space of the observations the heads read: corral's SAC
    flattens observations before its heads, so a Q-net always gets the concatenated
    form (RLlib passes a `Tuple([obs, action])` space for non-flat observations).
    With `use_state_preprocessor` the heads read the state preprocessor's output
    instead (`FlatObsActorCritic`): `obs_space` is then a Box of its width.
    Without a `custom_model`, the nets are the `MLP` and `EnsembleMLP` above.

    Args:
        policy_model_config: `fcnet_hiddens`/`fcnet_activation` of the policy net
            (or its `custom_model` and `custom_model_config`).
        q_model_config: the same for the Q-nets.
        twin_q: two Q-nets (clipped double-Q, Fujimoto et al. 2018) instead of one.
        initial_alpha: initial entropy temperature.
        target_entropy: a number, or "auto" (-dim(A) for Box, 0.98 log|A| for Discrete).
        use_beta_distribution: Box actions: the policy outputs the inputs of a Beta
            distribution (`TorchBeta`: `concat(alpha, beta)` before softplus + 1) instead
            of a squashed Gaussian's `concat(mean, log_std)`.
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
        use_beta_distribution: bool = False,
    ) -> None:
        action_space = self.action_space
        self.discrete = isinstance(action_space, gym.spaces.Discrete)
        if self.discrete:
            action_dim = int(action_space.n)
            policy_out, q_in_extra, q_out = action_dim, 0, action_dim
        elif (
            isinstance(action_space, gym.spaces.Box)
            and len(action_space.shape) == 1
            and not is_int_box(action_space)
        ):
            action_dim = int(action_space.shape[0])
            policy_out, q_in_extra, q_out = 2 * action_dim, action_dim, 1
        else:
            raise UnsupportedSpaceException(
                f"SAC needs a Discrete or 1-D float Box action space, got {action_space}."
            )
        self.action_dim = action_dim
        # Box actions from a Beta distribution (`_use_beta_distribution`): the policy's
        # outputs are its two concentrations (before softplus + 1), not clamped.
        self.use_beta_distribution = bool(use_beta_distribution) and not self.discrete
        self.twin_q = bool(twin_q)
        num_q = 2 if self.twin_q else 1
        self.policy_outputs = policy_out
        # What the heads read: the observations, or the state preprocessor's outputs.
        read_space = self.obs_space if self.base_model is None else None
        heads_space = heads_obs_space(read_space, obs_dim)
        self.action_model: MLP | TorchModelV2
        if policy_model_config.get("custom_model") or _overridden(self, "build_policy_model"):
            self.action_model = self.build_policy_model(
                heads_space, policy_out, policy_model_config, "policy_model"
            )
        else:
            self.action_model = MLP(
                obs_dim,
                hidden_sizes(policy_model_config),
                policy_out,
                policy_model_config.get("fcnet_activation", "relu"),
            )
        self.q_net: EnsembleMLP | CatalogQEnsemble
        if q_model_config.get("custom_model") or _overridden(self, "build_q_model"):
            nets = [
                self.build_q_model(heads_space, action_space, q_out, q_model_config, name)
                for name in ("q", "twin_q")[:num_q]
            ]
            self.q_net = CatalogQEnsemble(nets, q_out)
        else:
            self.q_net = EnsembleMLP(
                num_q,
                obs_dim + q_in_extra,
                hidden_sizes(q_model_config),
                q_out,
                q_model_config.get("fcnet_activation", "relu"),
            )
        # Shape (1,), not (): safetensors checkpoints store 0-d arrays as (1,).
        self.log_alpha = nn.Parameter(torch.tensor([math.log(initial_alpha)], dtype=torch.float32))
        self.target_entropy = resolve_target_entropy(target_entropy, action_space)

    # -- RLlib 1.x's SACTorchModel interface -------------------------------

    def build_policy_model(
        self,
        obs_space: gym.Space,
        num_outputs: int,
        policy_model_config: ModelConfigDict,
        name: str,
    ) -> TorchModelV2:
        """The policy net (RLlib 1.13's override point): a catalog model of
        `policy_model_config` (its `custom_model`), mapping `{"obs": [B, dim]}` rows of
        `obs_space` to `num_outputs` action-distribution inputs. Called when the config
        names a `custom_model` or a subclass overrides this; else the policy net is
        corral's `MLP`."""
        return ModelCatalog.get_model_v2(
            obs_space,
            self.action_space,
            num_outputs,
            policy_model_config,
            framework="torch",
            name=name,
        )

    def build_q_model(
        self,
        obs_space: gym.Space,
        action_space: gym.Space,
        num_outputs: int,
        q_model_config: ModelConfigDict,
        name: str,
    ) -> TorchModelV2:
        """One Q-net, "q" or "twin_q" (RLlib 1.13's override point): a catalog model of
        `q_model_config` on the observations (Discrete actions: `num_outputs` = |A|
        values) or on `concat(obs, action)` (Box actions: one value). Called when the
        config names a `custom_model` or a subclass overrides this; else the Q-nets are
        one `EnsembleMLP`."""
        if isinstance(action_space, gym.spaces.Discrete):
            q_space = obs_space
        else:
            width = int(np.prod(obs_space.shape)) + int(np.prod(action_space.shape))
            q_space = gym.spaces.Box(-np.inf, np.inf, (width,), np.float32)
        return ModelCatalog.get_model_v2(
            q_space, action_space, num_outputs, q_model_config, framework="torch", name=name
        )

    def get_action_model_outputs(
        self,
        model_out: TensorType,
        state_in: list[TensorType] | None = None,
        seq_lens: TensorType | None = None,
    ) -> tuple[TensorType, list[TensorType]]:
        """RLlib 1.13's `(distribution inputs, state_out)` of the policy net for the
        model's outputs (see `get_policy_output`; the policy net keeps no state)."""
        return self.get_policy_output(model_out), list(state_in or [])

    def get_policy_output(self, model_out: TensorType) -> TensorType:
        """Action-distribution inputs: `concat(mean, log_std)` (Box; with
        `use_beta_distribution` the Beta's `concat(alpha, beta)` before softplus + 1) or
        logits (Discrete)."""
        obs = flatten_obs(model_out)
        if isinstance(self.action_model, TorchModelV2):
            out = model_output(self.action_model, obs, self.policy_outputs)
        else:
            out = self.action_model(obs)
        if self.discrete or self.use_beta_distribution:
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
        (`members`: only those, see `EnsembleMLP`; `detach_params`: no gradient reaches
        the Q-nets' parameters)."""
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
    "CatalogQEnsemble",
    "EnsembleMLP",
    "SACTorchModel",
    "flatten_obs",
    "heads_obs_space",
    "hidden_sizes",
    "model_output",
    "resolve_target_entropy",
]
