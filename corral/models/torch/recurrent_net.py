"""Recurrent models: RLlib 1.x's ``RecurrentNetwork`` base and its ``use_lstm`` wrapper.

Training batches hold sequences flattened to ``[B * T, ...]`` rows: ``B = len(seq_lens)``
sequences, each zero-padded at its end to ``T`` steps (RLlib's ``add_time_dimension``
layout). :meth:`RecurrentNetwork.forward` restores the ``[B, T, ...]`` view, runs
:meth:`RecurrentNetwork.forward_rnn`, and flattens the outputs back. Acting runs one step
per env through :meth:`LSTMWrapper.forward_inference_rnn`, without input dicts.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from corral.models.torch.fcnet import POLICY_GAIN, VALUE_GAIN, _linear
from corral.models.torch.torch_modelv2 import ModelConfigDict, TensorType, TorchModelV2
from corral.policy.rnn_sequencing import add_time_dimension
from corral.policy.sample_batch import SampleBatch
from corral.utils.error import UnsupportedSpaceException
from corral.utils.spaces import action_leaves, flatten_space, is_nested_action, nest_action_rows


def prev_action_size(action_space: gym.Space) -> int:
    """The features of one previous action as a recurrent model's input gets it (of a
    Tuple/Dict space: its leaves' features, concatenated)."""
    if isinstance(action_space, gym.spaces.Discrete):
        return int(action_space.n)
    if isinstance(action_space, gym.spaces.MultiDiscrete):
        return int(np.sum(action_space.nvec))
    if isinstance(action_space, gym.spaces.Box):
        return int(np.prod(action_space.shape))
    if isinstance(action_space, gym.spaces.Tuple | gym.spaces.Dict):
        return sum(prev_action_size(leaf) for leaf in flatten_space(action_space))
    raise UnsupportedSpaceException(
        f"Feeding previous actions to a recurrent model (lstm_use_prev_action, "
        f"attention_use_n_prev_actions) supports Discrete, MultiDiscrete and Box action "
        f"spaces and Tuple/Dict spaces of those, got {action_space}."
    )


def check_prev_action_inputs(action_space: gym.Space, model_config: ModelConfigDict) -> None:
    """RLlib 1.13's rule: previous actions of a Tuple/Dict action space reach a recurrent
    model only with `_disable_action_flattening` (they then arrive nested).

    Raises:
        ValueError: the model reads previous actions of such a space without it.
    """
    reads_prev_actions = model_config.get("lstm_use_prev_action") or (
        int(model_config.get("attention_use_n_prev_actions", 0) or 0) > 0
    )
    if (
        reads_prev_actions
        and isinstance(action_space, gym.spaces.Tuple | gym.spaces.Dict)
        and not model_config.get("_disable_action_flattening")
    ):
        raise ValueError(
            "For your complex action space (Tuple|Dict) and your model's `prev-actions` "
            "setup of your model, you must set `_disable_action_flattening=True` in your "
            "main config dict!"
        )


def prev_action_features(action_space: gym.Space, prev_actions: Any) -> TensorType:
    """Previous actions ``[N, ...]`` as ``[N, prev_action_size]`` features: one-hot for
    discrete parts, flattened for boxes; a Tuple/Dict space's (nested, or flat rows)
    leaf by leaf, concatenated."""
    if isinstance(action_space, gym.spaces.Tuple | gym.spaces.Dict):
        if not is_nested_action(prev_actions):
            prev_actions = nest_action_rows(action_space, torch.as_tensor(prev_actions))
        leaves = zip(flatten_space(action_space), action_leaves(action_space, prev_actions))
        return torch.cat([prev_action_features(s, a) for s, a in leaves], dim=-1)
    a = torch.as_tensor(prev_actions)
    if isinstance(action_space, gym.spaces.Discrete):
        return nn.functional.one_hot(a.long().reshape(-1), int(action_space.n)).float()
    if isinstance(action_space, gym.spaces.MultiDiscrete):
        a = a.long().reshape(a.shape[0], -1)
        parts = [
            nn.functional.one_hot(a[:, i], int(n)).float()
            for i, n in enumerate(np.asarray(action_space.nvec).ravel())
        ]
        return torch.cat(parts, dim=-1)
    return a.float().reshape(a.shape[0], -1)


class RecurrentNetwork(TorchModelV2):
    """Base class for models with state: implement :meth:`forward_rnn` and
    :meth:`get_initial_state`; :meth:`forward` does the ``[B * T] <-> [B, T]`` reshaping."""

    def forward(
        self,
        input_dict: dict[str, TensorType],
        state: list[TensorType],
        seq_lens: TensorType | None,
    ) -> tuple[TensorType, list[TensorType]]:
        """Outputs ``[B * T, num_outputs]`` and the state after each sequence."""
        inputs = self.rnn_inputs(input_dict)
        if seq_lens is None:
            # One step per row (acting through the generic policy path).
            seq_lens = torch.ones(inputs.shape[0], dtype=torch.int32)
        seq_lens = torch.as_tensor(seq_lens)
        timed = add_time_dimension(inputs, seq_lens, self.time_major)
        out, new_state = self.forward_rnn(timed, state, seq_lens)
        # Rows come back in the order they came in ([B, T] or [T, B]).
        return out.reshape(-1, out.shape[-1]), new_state

    def rnn_inputs(self, input_dict: dict[str, TensorType]) -> TensorType:
        """The per-row inputs ``[B * T, F]`` fed to the RNN (default: the observations)."""
        obs = input_dict.get("obs_flat", input_dict[SampleBatch.OBS]).float()
        return obs.reshape(obs.shape[0], -1)

    def forward_rnn(
        self, inputs: TensorType, state: list[TensorType], seq_lens: TensorType
    ) -> tuple[TensorType, list[TensorType]]:
        """``inputs [B, T, F]`` -> ``(outputs [B, T, num_outputs], new_state)``; both
        ``[T, B, ...]`` when the model is time major."""
        raise NotImplementedError(f"{type(self).__name__} must implement forward_rnn()")


class WrapperInputs(RecurrentNetwork):
    """A recurrent model on top of a feed-forward ``base`` model's features (the
    ``use_lstm`` and ``use_attention`` wrappers): the recurrent input of a step is the
    base model's output, plus (when the config says so) the previous action, one-hot for
    discrete spaces, and the previous reward.

    Subclasses call :meth:`init_inputs` in ``__init__``, run :meth:`wrapped_inputs`, and
    keep their value head in ``_value_branch`` and the last forward pass's features in
    ``_features`` (:meth:`value_function`).
    """

    base: TorchModelV2
    use_prev_action: bool
    use_prev_reward: bool
    _value_branch: nn.Module
    _features: TensorType | None
    # The config keys that turn the previous action / reward on (for error messages).
    prev_action_key = "lstm_use_prev_action"
    prev_reward_key = "lstm_use_prev_reward"

    def value_function(self) -> TensorType:
        """The value head (``_value_branch``, set by the subclass) on the features of the
        last forward pass (``_features``)."""
        if self._features is None:
            raise RuntimeError("value_function() called before forward().")
        return self._value_branch(self._features).squeeze(-1)

    def init_inputs(self, base: TorchModelV2, use_prev_action: bool, use_prev_reward: bool) -> int:
        """Keeps ``base`` and the switches; returns the size of one step's input."""
        if use_prev_action:
            check_prev_action_inputs(self.action_space, self.model_config)
        self.base = base
        self.use_prev_action = use_prev_action
        self.use_prev_reward = use_prev_reward
        size = int(base.num_outputs)
        if use_prev_action:
            size += prev_action_size(self.action_space)
        if use_prev_reward:
            size += 1
        return size

    def wrapped_inputs(
        self, obs: TensorType, prev_actions: Any = None, prev_rewards: Any = None
    ) -> TensorType:
        """``[N, input size]``: the base model's features of ``obs``, then the previous
        actions and rewards where used."""
        features, _ = self.base({SampleBatch.OBS: obs}, [], None)
        parts = [features]
        if self.use_prev_action:
            if prev_actions is None:
                raise ValueError(f"{self.prev_action_key} needs the previous actions.")
            parts.append(prev_action_features(self.action_space, prev_actions))
        if self.use_prev_reward:
            if prev_rewards is None:
                raise ValueError(f"{self.prev_reward_key} needs the previous rewards.")
            parts.append(torch.as_tensor(prev_rewards).float().reshape(-1, 1))
        return torch.cat(parts, dim=-1) if len(parts) > 1 else features

    def rnn_inputs(self, input_dict: dict[str, TensorType]) -> TensorType:
        obs = input_dict[SampleBatch.OBS]
        if not torch.is_tensor(obs):  # restored Dict/Tuple observations: the flat rows
            obs = input_dict["obs_flat"]
        return self.wrapped_inputs(
            obs,
            input_dict.get(SampleBatch.PREV_ACTIONS),
            input_dict.get(SampleBatch.PREV_REWARDS),
        )


class LSTMWrapper(WrapperInputs):
    """An LSTM on top of a feed-forward model's features (``use_lstm``).

    The wrapped ``base`` model is built with ``num_outputs=None`` so that its output is its
    last hidden layer. The LSTM's input is those features, plus (with
    ``lstm_use_prev_action``) the previous action, one-hot for discrete spaces, and (with
    ``lstm_use_prev_reward``) the previous reward. Policy logits and the value come from
    linear heads on the LSTM output.
    """

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
        self.cell_size = int(cfg.get("lstm_cell_size", 256))
        self.max_seq_len = int(cfg.get("max_seq_len", 20))
        in_size = self.init_inputs(
            base,
            bool(cfg.get("lstm_use_prev_action", False)),
            bool(cfg.get("lstm_use_prev_reward", False)),
        )
        self.lstm = nn.LSTM(in_size, self.cell_size, batch_first=True)
        out_size = int(num_outputs) if num_outputs else self.cell_size
        self._logits: nn.Module = (
            _linear(self.cell_size, out_size, POLICY_GAIN) if num_outputs else nn.Identity()
        )
        self.num_outputs = out_size
        self._value_branch = _linear(self.cell_size, 1, VALUE_GAIN)
        self._features: TensorType | None = None

    def get_initial_state(self) -> list[np.ndarray]:
        """``[h, c]``, zeros of ``[lstm_cell_size]`` each (one env's state, no batch axis)."""
        return [np.zeros(self.cell_size, np.float32), np.zeros(self.cell_size, np.float32)]

    def forward_rnn(
        self, inputs: TensorType, state: list[TensorType], seq_lens: TensorType
    ) -> tuple[TensorType, list[TensorType]]:
        if self.time_major:
            inputs = inputs.transpose(0, 1)
        h, c = (torch.as_tensor(s).float().unsqueeze(0) for s in state)
        lengths = torch.as_tensor(seq_lens).to("cpu", torch.int64)
        if bool((lengths == inputs.shape[1]).all()):
            out, (h, c) = self.lstm(inputs, (h, c))
        else:
            # Packing makes the returned state the one after each sequence's last real
            # step, not after its padding; outputs at padded steps are zeros.
            packed = nn.utils.rnn.pack_padded_sequence(
                inputs, lengths, batch_first=True, enforce_sorted=False
            )
            out, (h, c) = self.lstm(packed, (h, c))
            out, _ = nn.utils.rnn.pad_packed_sequence(
                out, batch_first=True, total_length=inputs.shape[1]
            )
        if self.time_major:
            out = out.transpose(0, 1)
        self._features = out.reshape(-1, self.cell_size)
        return self._logits(out), [h.squeeze(0), c.squeeze(0)]

    def forward_inference_rnn(
        self,
        obs: TensorType,
        state_in: list[Any],
        prev_action: Any = None,
        prev_reward: Any = None,
    ) -> tuple[TensorType, TensorType, list[TensorType]]:
        """One step for ``N`` envs: ``obs [N, ...]``, ``state_in [h [N, cell], c [N, cell]]``
        -> ``(dist_inputs [N, num_outputs], values [N], [h, c])``.

        The sampler's fast path: no input dict, no reshaping by ``seq_lens``, nothing cached.
        """
        x = self.wrapped_inputs(obs, prev_action, prev_reward).unsqueeze(1)
        h, c = (torch.as_tensor(s).float().unsqueeze(0) for s in state_in)
        out, (h, c) = self.lstm.forward(x, (h, c))
        out = out.squeeze(1)
        value = self._value_branch.forward(out).squeeze(-1)
        return self._logits.forward(out), value, [h.squeeze(0), c.squeeze(0)]


__all__ = [
    "LSTMWrapper",
    "RecurrentNetwork",
    "WrapperInputs",
    "add_time_dimension",
    "check_prev_action_inputs",
    "prev_action_features",
    "prev_action_size",
]
