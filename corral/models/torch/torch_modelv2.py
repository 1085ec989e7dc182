"""The base class of every torch model a corral policy runs, RLlib 1.x's ``TorchModelV2``."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch
from torch import nn

from corral.models.modelv2 import ModelV2
from corral.models.preprocessors import raw_observations, restore_original_dimensions
from corral.policy.view_requirement import model_view_requirements
from corral.utils.spaces import is_nested_action, nest_action_rows

TensorType = torch.Tensor
ModelConfigDict = dict[str, Any]


class TorchModelV2(nn.Module, ModelV2):
    """A policy network: maps an input dict (and RNN state) to action-distribution inputs.

    Subclasses implement :meth:`forward` and :meth:`value_function`. Both of RLlib 1.x's
    construction patterns work::

        class MyModel(TorchModelV2, nn.Module):
            def __init__(self, obs_space, action_space, num_outputs, model_config, name):
                TorchModelV2.__init__(self, obs_space, action_space, num_outputs,
                                      model_config, name)
                nn.Module.__init__(self)
                ...

    or a plain ``super().__init__(obs_space, action_space, num_outputs, model_config, name)``.
    ``TorchModelV2.__init__`` initialises ``nn.Module`` only when that has not happened yet,
    so layers created before it are kept, and a later ``nn.Module.__init__(self)`` (the
    RLlib pattern) only resets the still-empty module registries.

    Args:
        obs_space: observation space of the (preprocessed) observations the model sees.
        action_space: the env's action space.
        num_outputs: size of the output vector (the action distribution's input size).
        model_config: the policy's ``"model"`` config dict.
        name: a name for this model, used in error messages and exports.
    """

    def __init__(
        self,
        obs_space: gym.Space,
        action_space: gym.Space,
        num_outputs: int | None,
        model_config: ModelConfigDict,
        name: str,
    ) -> None:
        if "_modules" not in self.__dict__:
            nn.Module.__init__(self)
        model_config = model_config if model_config is not None else {}
        self.obs_space = obs_space
        self.action_space = action_space
        self.num_outputs = num_outputs
        self.model_config = model_config
        self.name = name or "default_model"
        self.framework = "torch"
        self.time_major = bool(model_config.get("_time_major", False))
        # RLlib 1.13's trajectory view API: models add their own views here.
        self.view_requirements = model_view_requirements(obs_space)

    def __call__(
        self,
        input_dict: dict[str, TensorType],
        state: list[TensorType] | None = None,
        seq_lens: TensorType | None = None,
    ) -> tuple[TensorType, list[TensorType]]:
        """Runs :meth:`forward`; Dict/Tuple observations arrive restored.

        As in RLlib 1.x, ``input_dict["obs"]`` holds the observation's original
        structure (dicts/tuples of tensors) and ``input_dict["obs_flat"]`` the
        flat rows the sampler stored.

        A model built for the env's own observation space under
        `_disable_preprocessor_api` (in its model config) gets the observations as the
        env gave them instead (see `raw_observations`: discrete parts as their values,
        not one-hot), whether the caller passes those or the flat float rows the policy
        stores; ``"obs_flat"`` is then that same ``"obs"`` (RLlib 1.13's rule). Under
        `_disable_action_flattening`, the ``"prev_actions"`` of a Tuple/Dict action space
        arrive nested (see `nest_action_rows`).
        """
        obs = input_dict.get("obs")
        if self.model_config.get("_disable_preprocessor_api"):
            if _flat_rows_of_structured(obs, self.obs_space):
                obs = raw_observations(obs, self.obs_space)
                input_dict = {**input_dict, "obs": obs}
            if "obs_flat" not in input_dict:
                input_dict = {**input_dict, "obs_flat": obs}
        elif "obs_flat" not in input_dict and torch.is_tensor(obs):
            restored = restore_original_dimensions(obs, self.obs_space)
            if restored is not obs:
                input_dict = {**input_dict, "obs": restored, "obs_flat": obs}
            else:
                # RLlib always provides "obs_flat" (images flattened to [B, n]).
                flat = obs.reshape(obs.shape[0], -1) if obs.dim() > 2 else obs
                input_dict = {**input_dict, "obs_flat": flat}
        prev_actions = input_dict.get("prev_actions")
        if (
            prev_actions is not None
            and self.model_config.get("_disable_action_flattening")
            and isinstance(self.action_space, gym.spaces.Tuple | gym.spaces.Dict)
            and not is_nested_action(prev_actions)
        ):
            # RLlib 1.13: the previous actions arrive as the policy computed them, nested.
            nested = nest_action_rows(self.action_space, torch.as_tensor(prev_actions))
            input_dict = {**input_dict, "prev_actions": nested}
        if state is None:
            # RLlib 1.x: `model(train_batch)` takes the state and seq_lens from the batch.
            state = []
            while f"state_in_{len(state)}" in input_dict:
                state.append(input_dict[f"state_in_{len(state)}"])
        if seq_lens is None and state:
            seq_lens = input_dict.get("seq_lens")
        outputs = super().__call__(input_dict, state, seq_lens)
        # RLlib's `last_output()`; stored past nn.Module.__setattr__ (a plain tensor).
        self.__dict__["_last_output"] = outputs[0] if isinstance(outputs, tuple) else outputs
        return outputs

    def forward(
        self,
        input_dict: dict[str, TensorType],
        state: list[TensorType],
        seq_lens: TensorType | None,
    ) -> tuple[TensorType, list[TensorType]]:
        """Compute the action-distribution inputs for a batch.

        Args:
            input_dict: at least ``"obs"``, a float tensor ``[B, ...]``; may also hold
                ``"prev_actions"``, ``"prev_rewards"`` and ``"is_training"``.
            state: RNN state tensors (empty list for feed-forward models).
            seq_lens: sequence lengths for RNNs, else ``None``.

        Returns:
            ``(outputs [B, num_outputs], new_state)``.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement forward()")

    def value_function(self) -> TensorType:
        """Value estimates ``[B]`` for the batch of the most recent :meth:`forward` call.

        Returning the value of the *last* forward (rather than taking observations) lets
        models share the trunk's activations between policy and value heads for free.
        """
        raise NotImplementedError(f"{type(self).__name__} must implement value_function()")

    def get_initial_state(self) -> list[TensorType]:
        """The RNN state for a fresh episode, one tensor per state slot without a batch
        dimension; an empty list for feed-forward models."""
        return []

    def is_time_major(self) -> bool:
        """Whether RNN inputs are laid out ``[T, B, ...]`` instead of ``[B, T, ...]``."""
        return self.time_major

    def custom_loss(self, policy_loss: Any, loss_inputs: dict[str, Any]) -> Any:
        """Hook to add model-specific losses (e.g. self-supervised terms) to the policy loss.

        Args:
            policy_loss: the policy's loss tensor, or a list of them (one per optimizer).
            loss_inputs: the train batch the loss was computed on.

        Returns:
            the (possibly modified) loss in the same structure as ``policy_loss``.
        """
        return policy_loss

    def metrics(self) -> dict[str, Any]:
        """Extra learner stats to report from this model (merged into ``learner_stats``)."""
        return {}

    def variables(self, as_dict: bool = False) -> list[TensorType] | dict[str, TensorType]:
        """All parameters and buffers, as a list or a name-keyed dict."""
        state = self.state_dict()
        return state if as_dict else list(state.values())

    def trainable_variables(
        self, as_dict: bool = False
    ) -> list[TensorType] | dict[str, TensorType]:
        """Parameters with ``requires_grad``, as a list or a name-keyed dict."""
        params = {k: v for k, v in self.named_parameters() if v.requires_grad}
        return params if as_dict else list(params.values())

    def import_from_h5(self, h5_file: str) -> None:
        """Keras h5 weights do not map onto torch modules; load a state dict instead."""
        raise NotImplementedError(
            f"import_from_h5({h5_file!r}): importing Keras h5 weights is not supported by "
            "corral's torch models; convert the weights and use load_state_dict() instead."
        )


def _flat_rows_of_structured(obs: Any, space: gym.Space) -> bool:
    """Whether `obs` are the policy's flat float rows of observations of a space that is
    not a Box (Discrete, MultiDiscrete, MultiBinary, Dict, Tuple, ...): the raw form of
    those is a structure or integers, never a float tensor."""
    return (
        torch.is_tensor(obs)
        and obs.is_floating_point()
        and space is not None
        and not isinstance(space, gym.spaces.Box)
        and not hasattr(space, "original_space")
    )
