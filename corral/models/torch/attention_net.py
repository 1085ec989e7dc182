"""RLlib 1.13's attention models: ``GTrXLNet`` (the gated Transformer-XL of Parisotto et
al. 2019, arXiv:1910.06764) and ``AttentionWrapper`` (``use_attention``).

Each transformer unit attends to a memory of its own inputs at the last
``memory_inference`` steps. corral carries that memory as the model's recurrent state:
``state_in_<k>`` is unit ``k``'s memory window ``[memory_inference, attention_dim]`` (zeros
before an episode's first step), ``state_out_<k>`` the window moved on by the steps just
taken. The samplers and learners then treat an attention model as any recurrent one
(``RecurrentNetwork``): one step per env when acting, ``max_seq_len``-step sequences that
start from their first step's window when training. Each step attends to exactly the
``memory_inference`` steps before it, in training as when acting, so a training
sequence computes what acting computed (RLlib's training steps also see the earlier
steps of their sequence beyond that memory). RLlib keeps the per-step outputs and builds
the windows with a trajectory view (``shift="-50:-1"``); the memory is the same.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from corral.models.torch.misc import SlimFC
from corral.models.torch.modules import GRUGate, RelativeMultiHeadAttention, SkipConnection
from corral.models.torch.recurrent_net import RecurrentNetwork, WrapperInputs, prev_action_size
from corral.models.torch.torch_modelv2 import ModelConfigDict, TensorType, TorchModelV2


class GTrXLNet(RecurrentNetwork):
    """A gated Transformer-XL: a linear layer to ``attention_dim``, then
    ``num_transformer_units`` units of memory attention and a position-wise MLP, each
    around a ``GRUGate`` instead of a residual sum; logits and value heads on top.

    Args (after RLlib's five; ``num_outputs=None`` outputs the ``attention_dim``
    features and no logits layer):
        num_transformer_units: how many units.
        attention_dim: the features of the units' inputs and outputs.
        num_heads: attention heads per unit.
        memory_inference: how many earlier steps each unit attends to.
        memory_training: RLlib 1.13's training memory; corral's training steps attend
            to the same ``memory_inference`` steps acting did (accepted for RLlib's
            signature).
        head_dim: features per head.
        position_wise_mlp_dim: the hidden size of each unit's MLP.
        init_gru_gate_bias: the gates' initial bias (towards the identity).
    """

    def __init__(
        self,
        obs_space: gym.Space,
        action_space: gym.Space,
        num_outputs: int | None,
        model_config: ModelConfigDict,
        name: str,
        *,
        num_transformer_units: int = 1,
        attention_dim: int = 64,
        num_heads: int = 2,
        memory_inference: int = 50,
        memory_training: int = 50,
        head_dim: int = 32,
        position_wise_mlp_dim: int = 32,
        init_gru_gate_bias: float = 2.0,
        input_size: int | None = None,
    ) -> None:
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        for key, value in (
            ("num_transformer_units", num_transformer_units),
            ("attention_dim", attention_dim),
            ("num_heads", num_heads),
            ("memory_inference", memory_inference),
            ("head_dim", head_dim),
            ("position_wise_mlp_dim", position_wise_mlp_dim),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"GTrXLNet: {key} must be an int >= 1, got {value!r}")
        if attention_dim % 2:
            raise ValueError(
                f"GTrXLNet: attention_dim must be even (sine and cosine position "
                f"encodings), got {attention_dim}"
            )
        self.num_transformer_units = num_transformer_units
        self.attention_dim = attention_dim
        self.memory_inference = memory_inference
        self.memory_training = memory_training
        self.max_seq_len = int(self.model_config.get("max_seq_len", 20))
        in_size = input_size if input_size is not None else int(np.prod(obs_space.shape))
        self.linear_layer = SlimFC(in_size, attention_dim)
        self.units = nn.ModuleList()
        for _ in range(num_transformer_units):
            attention = SkipConnection(
                RelativeMultiHeadAttention(
                    attention_dim,
                    attention_dim,
                    num_heads,
                    head_dim,
                    input_layernorm=True,
                    output_activation=nn.ReLU,
                ),
                fan_in_layer=GRUGate(attention_dim, init_gru_gate_bias),
            )
            mlp = SkipConnection(
                nn.Sequential(
                    nn.LayerNorm(attention_dim),
                    SlimFC(attention_dim, position_wise_mlp_dim, activation_fn=nn.ReLU),
                    SlimFC(position_wise_mlp_dim, attention_dim, activation_fn=nn.ReLU),
                ),
                fan_in_layer=GRUGate(attention_dim, init_gru_gate_bias),
            )
            self.units.append(nn.ModuleList([attention, mlp]))
        self.logits: nn.Module | None = None
        self.values_out: nn.Module | None = None
        if num_outputs:
            self.logits = SlimFC(attention_dim, int(num_outputs))
            self.values_out = SlimFC(attention_dim, 1)
            self.num_outputs = int(num_outputs)
        else:
            self.num_outputs = attention_dim
        self._features: TensorType | None = None

    def get_initial_state(self) -> list[np.ndarray]:
        """Each unit's memory window, zeros of ``[memory_inference, attention_dim]``."""
        window = (self.memory_inference, self.attention_dim)
        return [np.zeros(window, np.float32) for _ in range(self.num_transformer_units)]

    def transformer(
        self, inputs: TensorType, memory: list[TensorType], seq_lens: TensorType | None
    ) -> tuple[TensorType, list[TensorType]]:
        """``inputs [B, T, F]`` and each unit's window ``[B, M, D]`` -> the last unit's
        outputs ``[B, T, D]`` and the windows after each sequence's ``seq_lens`` real
        steps (after all ``T`` when None)."""
        x = self.linear_layer(inputs)
        unit_inputs = []
        for (attention, mlp), window in zip(self.units, memory):
            unit_inputs.append(x)
            x = mlp(
                attention(x, memory=torch.as_tensor(window).float(), window=self.memory_inference)
            )
        new_memory = [
            _moved_window(torch.as_tensor(window).float(), steps, seq_lens)
            for window, steps in zip(memory, unit_inputs)
        ]
        return x, new_memory

    def forward_rnn(
        self, inputs: TensorType, state: list[TensorType], seq_lens: TensorType
    ) -> tuple[TensorType, list[TensorType]]:
        if self.time_major:
            inputs = inputs.transpose(0, 1)
        out, new_state = self.transformer(inputs, state, seq_lens)
        self._features = out.reshape(-1, self.attention_dim)
        if self.logits is not None:
            out = self.logits(out)
        if self.time_major:
            out = out.transpose(0, 1)
        return out, new_state

    def value_function(self) -> TensorType:
        if self._features is None:
            raise RuntimeError("value_function() called before forward().")
        if self.values_out is None:
            raise ValueError("GTrXLNet built with num_outputs=None has no value head.")
        return self.values_out(self._features).squeeze(-1)


class AttentionWrapper(WrapperInputs):
    """A ``GTrXLNet`` on top of a feed-forward model's features (``use_attention``).

    The wrapped ``base`` model is built with ``num_outputs=None`` so that its output is
    its last hidden layer; the transformer's input is those features, plus (with
    ``attention_use_n_prev_actions`` / ``_rewards`` = n > 0) the previous n actions, one-hot
    for discrete spaces, and the previous n rewards, oldest first (zeros before the
    episode's start). The n - 1 older ones are carried as recurrent state after the units'
    memory windows, so training sequences see what acting saw. Logits and the value come
    from linear heads on the transformer's output. The ``attention_*`` keys of the model
    config size it.
    """

    prev_action_key = "attention_use_n_prev_actions"
    prev_reward_key = "attention_use_n_prev_rewards"

    def __init__(
        self,
        obs_space: gym.Space,
        action_space: gym.Space,
        num_outputs: int | None,
        model_config: ModelConfigDict,
        name: str,
        base: TorchModelV2,
    ) -> None:
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        cfg = self.model_config
        n_actions = int(cfg.get("attention_use_n_prev_actions", 0))
        n_rewards = int(cfg.get("attention_use_n_prev_rewards", 0))
        step_size = self.init_inputs(base, n_actions > 0, n_rewards > 0)
        # A step's input is the base model's features, then the newest previous action and
        # reward; the ``n - 1`` older ones are carried as state after the units' windows.
        action_size = prev_action_size(action_space) if n_actions else 0
        features = step_size - action_size - (1 if n_rewards else 0)
        self._histories = [
            history
            for history in (
                _History(features, action_size, n_actions),
                _History(features + action_size, 1, n_rewards),
            )
            if history.n > 0
        ]
        in_size = features + sum(h.size * h.n for h in self._histories)
        self.max_seq_len = int(cfg.get("max_seq_len", 20))
        self.gtrxl = GTrXLNet(
            obs_space,
            action_space,
            None,
            cfg,
            "gtrxl",
            num_transformer_units=int(cfg.get("attention_num_transformer_units", 1)),
            attention_dim=int(cfg.get("attention_dim", 64)),
            num_heads=int(cfg.get("attention_num_heads", 1)),
            head_dim=int(cfg.get("attention_head_dim", 32)),
            memory_inference=int(cfg.get("attention_memory_inference", 50)),
            memory_training=int(cfg.get("attention_memory_training", 50)),
            position_wise_mlp_dim=int(cfg.get("attention_position_wise_mlp_dim", 32)),
            init_gru_gate_bias=float(cfg.get("attention_init_gru_gate_bias", 2.0)),
            input_size=in_size,
        )
        self.attention_dim = self.gtrxl.attention_dim
        out_size = int(num_outputs) if num_outputs else self.attention_dim
        self._logits_branch: nn.Module = (
            SlimFC(self.attention_dim, out_size) if num_outputs else nn.Identity()
        )
        self._value_branch = SlimFC(self.attention_dim, 1)
        self.num_outputs = out_size
        self._features: TensorType | None = None

    def get_initial_state(self) -> list[np.ndarray]:
        """The units' memory windows, then (with ``attention_use_n_prev_*`` > 1) the
        ``n - 1`` previous actions / rewards before the newest, zeros."""
        histories = [np.zeros((h.n - 1, h.size), np.float32) for h in self._histories if h.n > 1]
        return self.gtrxl.get_initial_state() + histories

    def _transformer(
        self, inputs: TensorType, state: list[TensorType], seq_lens: TensorType | None
    ) -> tuple[TensorType, list[TensorType]]:
        """The transformer on ``inputs [B, T, F]`` (each step's features, newest previous
        action and reward) with each step's previous ``n`` actions and rewards in place of
        the newest (oldest first, as RLlib's ``shift="-n:-1"`` view), and the state after."""
        units = self.gtrxl.num_transformer_units
        memory, carried = list(state[:units]), list(state[units:])
        if self._histories:
            parts, moved = [inputs[..., : self._histories[0].start]], []
            for history in self._histories:
                newest = inputs[..., history.start : history.start + history.size]
                if history.n == 1:
                    parts.append(newest)
                    continue
                older = torch.as_tensor(carried.pop(0)).to(newest.dtype)
                joined = torch.cat([older, newest], dim=1)  # [B, n - 1 + T, size]
                windows = joined.unfold(1, history.n, 1)  # [B, T, size, n]
                parts.append(windows.transpose(-1, -2).flatten(-2))
                moved.append(_moved_window(older, newest, seq_lens))
            inputs = torch.cat(parts, dim=-1)
        else:
            moved = []
        out, new_memory = self.gtrxl.transformer(inputs, memory, seq_lens)
        return out, new_memory + moved

    def forward_rnn(
        self, inputs: TensorType, state: list[TensorType], seq_lens: TensorType
    ) -> tuple[TensorType, list[TensorType]]:
        if self.time_major:
            inputs = inputs.transpose(0, 1)
        out, new_state = self._transformer(inputs, state, seq_lens)
        self._features = out.reshape(-1, self.attention_dim)
        out = self._logits_branch(out)
        if self.time_major:
            out = out.transpose(0, 1)
        return out, new_state

    def forward_inference_rnn(
        self,
        obs: TensorType,
        state_in: list[Any],
        prev_action: Any = None,
        prev_reward: Any = None,
    ) -> tuple[TensorType, TensorType, list[TensorType]]:
        """One step for ``N`` envs: ``obs [N, ...]`` and each unit's window ``[N, M, D]``
        -> ``(dist_inputs [N, num_outputs], values [N], the moved windows)``; the
        sampler's fast path (no input dict, nothing cached)."""
        x = self.wrapped_inputs(obs, prev_action, prev_reward).unsqueeze(1)
        out, new_state = self._transformer(x, state_in, None)
        out = out.squeeze(1)
        value = self._value_branch(out).squeeze(-1)
        return self._logits_branch(out), value, new_state


class _History(NamedTuple):
    """Where one previous-value input (actions or rewards) sits in a step's input:
    columns ``[start, start + size)``, and how many steps of it the transformer sees."""

    start: int
    size: int
    n: int


def _moved_window(window: TensorType, steps: TensorType, seq_lens: TensorType | None) -> TensorType:
    """``window [B, M, D]`` moved on by each row's first ``seq_lens`` of ``steps [B, T,
    D]``: the last ``M`` of their concatenation up to the last real step."""
    memory = window.shape[1]
    joined = torch.cat([window, steps.detach()], dim=1)
    if seq_lens is None:
        return joined[:, -memory:]
    lengths = torch.as_tensor(seq_lens, device=joined.device).long()
    index = lengths[:, None] + torch.arange(memory, device=joined.device)[None, :]
    return joined.gather(1, index[:, :, None].expand(-1, -1, joined.shape[-1]))


__all__ = ["AttentionWrapper", "GTrXLNet"]
