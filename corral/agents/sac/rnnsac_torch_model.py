"""RNNSAC's networks: SAC's actor and (twin) critics, each an LSTM-wrapped catalog model
with its own recurrent state (RLlib 1.13's `RNNSACTorchModel`)."""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from corral.agents.sac.sac_torch_model import LOG_STD_MAX, LOG_STD_MIN, resolve_target_entropy
from corral.models.catalog import ModelCatalog
from corral.models.model_defaults import MODEL_DEFAULTS
from corral.models.torch.torch_modelv2 import ModelConfigDict, TensorType, TorchModelV2
from corral.policy.sample_batch import SampleBatch
from corral.utils.error import UnsupportedSpaceException
from corral.utils.spaces import is_int_box

# The networks whose states `select_state` picks out of the model's state list, in order.
NETS = ("policy", "q", "twin_q")


class RNNSACTorchModel(TorchModelV2):
    """SAC's actor and critics as recurrent catalog models, plus the temperature.

    Each network is built by `ModelCatalog.get_model_v2` from `MODEL_DEFAULTS` updated
    with its config (`policy_model`, `Q_model`: `use_lstm`, `lstm_cell_size`,
    `lstm_use_prev_action`, `lstm_use_prev_reward`, `fcnet_hiddens`, ... or a
    `custom_model`), as RLlib 1.13 builds them:
    - the actor on the observations, with `2 * dim(A)` outputs (`concat(mean, log_std)` of
      the tanh-squashed Gaussian) for Box actions or `|A|` logits for Discrete ones;
    - each critic ("q", and "twin_q" with `twin_q`) on the observations with one output per
      action (Discrete), or on `concat(obs, action)` with one output (Box).
    The model's state is the actor's, then the critic's, then the twin critic's
    (`get_initial_state`, `select_state`). `forward` only gathers the networks' inputs
    (`model_out`); the heads run the networks.

    Args:
        policy_model_config: the actor's config (merged over `MODEL_DEFAULTS`).
        q_model_config: each critic's config (merged over `MODEL_DEFAULTS`).
        twin_q: two critics (clipped double-Q) instead of one.
        initial_alpha: initial entropy temperature.
        target_entropy: a number, or "auto" (see `resolve_target_entropy`).
    """

    # No state preprocessor (what SAC's policy asks its model).
    base_model = None

    def __init__(
        self,
        obs_space: gym.Space,
        action_space: gym.Space,
        num_outputs: int | None,
        model_config: ModelConfigDict,
        name: str,
        policy_model_config: ModelConfigDict | None = None,
        q_model_config: ModelConfigDict | None = None,
        twin_q: bool = False,
        initial_alpha: float = 1.0,
        target_entropy: float | str | None = None,
    ) -> None:
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        self.discrete = isinstance(action_space, gym.spaces.Discrete)
        obs_dim = int(gym.spaces.utils.flatdim(obs_space))
        if self.discrete:
            action_dim = int(action_space.n)
            policy_out, q_in, q_out = action_dim, obs_dim, action_dim
        elif (
            isinstance(action_space, gym.spaces.Box)
            and len(action_space.shape) == 1
            and not is_int_box(action_space)
        ):
            action_dim = int(action_space.shape[0])
            policy_out, q_in, q_out = 2 * action_dim, obs_dim + action_dim, 1
        else:
            raise UnsupportedSpaceException(
                f"RNNSAC needs a Discrete or 1-D float Box action space, got {action_space}."
            )
        self.action_dim = action_dim
        self.policy_outputs, self.q_outputs = policy_out, q_out
        self.twin_q = bool(twin_q)
        flat_obs = gym.spaces.Box(-np.inf, np.inf, (obs_dim,), np.float32)
        q_space = gym.spaces.Box(-np.inf, np.inf, (q_in,), np.float32)
        self.action_model = _net(flat_obs, action_space, policy_out, policy_model_config, "policy")
        self.q_net = _net(q_space, action_space, q_out, q_model_config, "q")
        self.twin_q_net = (
            _net(q_space, action_space, q_out, q_model_config, "twin_q") if self.twin_q else None
        )
        self.critics = nn.ModuleList([self.q_net, *([self.twin_q_net] if self.twin_q else [])])
        self.use_prev_action = any(
            bool((c or {}).get("lstm_use_prev_action"))
            for c in (model_config, policy_model_config, q_model_config)
        )
        self.use_prev_reward = any(
            bool((c or {}).get("lstm_use_prev_reward"))
            for c in (model_config, policy_model_config, q_model_config)
        )
        self._state_sizes = [
            len(self.action_model.get_initial_state()),
            len(self.q_net.get_initial_state()),
            len(self.twin_q_net.get_initial_state()) if self.twin_q_net is not None else 0,
        ]
        # Shape (1,), not (): safetensors checkpoints store 0-d arrays as (1,).
        self.log_alpha = nn.Parameter(torch.tensor([math.log(initial_alpha)], dtype=torch.float32))
        self.target_entropy = resolve_target_entropy(target_entropy, action_space)

    def forward(
        self,
        input_dict: dict[str, TensorType],
        state: list[TensorType],
        seq_lens: TensorType | None,
    ) -> tuple[dict[str, TensorType], list[TensorType]]:
        """`model_out`: the flat observations, and the previous actions and rewards where a
        network reads them; the state passes through."""
        obs = input_dict.get("obs_flat", input_dict[SampleBatch.OBS])
        model_out = {SampleBatch.OBS: obs.reshape(obs.shape[0], -1).float()}
        if self.use_prev_action:
            model_out[SampleBatch.PREV_ACTIONS] = input_dict[SampleBatch.PREV_ACTIONS]
        if self.use_prev_reward:
            model_out[SampleBatch.PREV_REWARDS] = input_dict[SampleBatch.PREV_REWARDS]
        return model_out, state

    def value_function(self) -> TensorType:
        raise NotImplementedError("RNNSAC has no state-value head; use get_q_values().")

    # -- RLlib 1.13's RNNSACTorchModel interface ------------------------------

    def get_initial_state(self) -> list[Any]:
        """The actor's initial state, then the critic's, then the twin critic's."""
        nets = [self.action_model, *self.critics]
        return [s for net in nets for s in net.get_initial_state()]

    def select_state(self, state_batch: list[TensorType], net: list[str]) -> dict[str, list]:
        """The parts of `state_batch` (the model's state) of the networks named in `net`
        ("policy", "q", "twin_q"; the twin's is [] without `twin_q`)."""
        unknown = [n for n in net if n not in NETS]
        if unknown:
            raise ValueError(f"select_state: unknown networks {unknown}; expected some of {NETS}.")
        bounds = np.cumsum([0, *self._state_sizes])
        return {n: list(state_batch[bounds[i] : bounds[i + 1]]) for i, n in enumerate(NETS)}

    def get_action_model_outputs(
        self, model_out: dict[str, TensorType], state_in: list[TensorType], seq_lens: TensorType
    ) -> tuple[TensorType, list[TensorType]]:
        """The actor's distribution inputs (`concat(mean, log_std)` with the log std clamped,
        or logits) of every row, and its state after each sequence."""
        out, state_out = self.action_model(dict(model_out), state_in, seq_lens)
        return self.clamp_dist_inputs(out), list(state_out)

    def clamp_dist_inputs(self, out: TensorType) -> TensorType:
        """Box actions: the log std clamped into [LOG_STD_MIN, LOG_STD_MAX]."""
        if self.discrete:
            return out
        mean, log_std = out.chunk(2, dim=-1)
        return torch.cat([mean, log_std.clamp(LOG_STD_MIN, LOG_STD_MAX)], dim=-1)

    def get_q_values(
        self,
        model_out: dict[str, TensorType],
        state_in: list[TensorType],
        seq_lens: TensorType,
        actions: TensorType | None = None,
    ) -> tuple[TensorType, list[TensorType]]:
        """The first critic's Q-values (`[rows, |A|]`, or `[rows, 1]` of `actions`) and its
        state after each sequence."""
        return self.critic_values(self.q_net, model_out, state_in, seq_lens, actions)

    def get_twin_q_values(
        self,
        model_out: dict[str, TensorType],
        state_in: list[TensorType],
        seq_lens: TensorType,
        actions: TensorType | None = None,
    ) -> tuple[TensorType, list[TensorType]]:
        """The twin critic's, as `get_q_values` (requires `twin_q`)."""
        if self.twin_q_net is None:
            raise ValueError("get_twin_q_values() needs twin_q=True.")
        return self.critic_values(self.twin_q_net, model_out, state_in, seq_lens, actions)

    def critic_values(
        self,
        net: nn.Module,
        model_out: dict[str, TensorType],
        state_in: list[TensorType],
        seq_lens: TensorType,
        actions: TensorType | None = None,
        detach_params: bool = False,
    ) -> tuple[TensorType, list[TensorType]]:
        """One critic (of this model or a copy of `critics`) over the rows; Box actions are
        concatenated to the observations. With `detach_params`, no gradient reaches the
        critic's parameters (the actor's loss through its critics)."""
        inputs = {**model_out, "is_training": True}
        if not self.discrete:
            if actions is None:
                raise ValueError("Critics of Box actions need the actions.")
            inputs[SampleBatch.OBS] = torch.cat([model_out[SampleBatch.OBS], actions], -1)
        if detach_params:
            params = {k: p.detach() for k, p in net.named_parameters()}
            out, state_out = torch.func.functional_call(net, params, (inputs, state_in, seq_lens))
        else:
            out, state_out = net(inputs, state_in, seq_lens)
        return out, list(state_out)

    def policy_variables(self) -> list[nn.Parameter]:
        """The actor's parameters."""
        return list(self.action_model.parameters())

    def q_variables(self) -> list[nn.Parameter]:
        """The critics' parameters."""
        return list(self.critics.parameters())


def _net(
    obs_space: gym.Space,
    action_space: gym.Space,
    num_outputs: int,
    net_config: ModelConfigDict | None,
    name: str,
) -> Any:
    """A catalog model for one of RNNSAC's networks, its config over `MODEL_DEFAULTS`."""
    config = {**MODEL_DEFAULTS, **(net_config or {})}
    return ModelCatalog.get_model_v2(
        obs_space, action_space, num_outputs, config, framework="torch", name=name
    )


__all__ = ["RNNSACTorchModel"]
