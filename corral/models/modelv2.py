"""RLlib's ``ModelV2``: the framework-independent model interface, and its helpers.

corral's ``TorchModelV2`` derives from it (after ``nn.Module``), so
``isinstance(model, ModelV2)`` holds for every corral model as in RLlib; custom models
subclass ``TorchModelV2``.
"""

from __future__ import annotations

import contextlib
from typing import Any

from corral.models.preprocessors import restore_original_dimensions
from corral.utils.typing import ModelConfigDict, TensorType

__all__ = ["ModelV2", "flatten", "restore_original_dimensions"]


class ModelV2:
    """A model: ``forward(input_dict, state, seq_lens) -> (outputs, state_out)`` and
    ``value_function()``.

    Args:
        obs_space: the (preprocessed) observation space; its ``original_space`` tells how
            flat rows are restored for ``forward``.
        action_space: the env's action space.
        num_outputs: the size of the model's output.
        model_config: the ``"model"`` config.
        name: the model's name.
        framework: "torch".
    """

    def __init__(
        self,
        obs_space: Any,
        action_space: Any,
        num_outputs: int,
        model_config: ModelConfigDict,
        name: str,
        framework: str,
    ) -> None:
        self.obs_space = obs_space
        self.action_space = action_space
        self.num_outputs = num_outputs
        self.model_config = model_config or {}
        self.name = name or "default_model"
        self.framework = framework
        self._last_output = None
        self.time_major = self.model_config.get("_time_major")

    def get_initial_state(self) -> list[Any]:
        """The initial RNN state (one entry per state slot, no batch dimension); ``[]``."""
        return []

    def forward(
        self, input_dict: dict[str, TensorType], state: list[TensorType], seq_lens: TensorType
    ) -> tuple[TensorType, list[TensorType]]:
        """The model's outputs and new RNN state for a batch (``input_dict["obs"]`` holds
        the restored observations, ``"obs_flat"`` the flat rows)."""
        raise NotImplementedError

    def value_function(self) -> TensorType:
        """The value estimates ``[B]`` of the last ``forward`` batch."""
        raise NotImplementedError

    def custom_loss(self, policy_loss: Any, loss_inputs: dict[str, Any]) -> Any:
        """Hook to add model losses to the policy loss; returns it unchanged by default."""
        return policy_loss

    def metrics(self) -> dict[str, Any]:
        """Model metrics for the learner stats; ``{}`` by default."""
        return {}

    def __call__(
        self,
        input_dict: dict[str, Any],
        state: list[Any] | None = None,
        seq_lens: Any = None,
    ) -> tuple[Any, list[Any]]:
        """Restores structured observations into ``"obs"`` (flat rows in ``"obs_flat"``)
        and runs :meth:`forward`."""
        restored = dict(input_dict)
        if not state:
            state = []
            i = 0
            while f"state_in_{i}" in input_dict:
                state.append(input_dict[f"state_in_{i}"])
                i += 1
        if seq_lens is None:
            seq_lens = input_dict.get("seq_lens")
        obs = input_dict["obs"]
        restored["obs"] = restore_original_dimensions(obs, self.obs_space)
        shape = getattr(obs, "shape", None)
        restored["obs_flat"] = flatten(obs, self.framework) if shape and len(shape) > 2 else obs
        with self.context():
            res = self.forward(restored, state or [], seq_lens)
        outputs, state_out = checked_forward_result(res)
        self._last_output = outputs
        return outputs, state_out if state_out else (state or [])

    def import_from_h5(self, h5_file: str) -> None:
        """Loads weights from an HDF5 file (implemented by ``TorchModelV2``)."""
        raise NotImplementedError

    def last_output(self) -> TensorType:
        """The outputs of the last call."""
        return getattr(self, "_last_output", None)

    def context(self) -> contextlib.AbstractContextManager:
        """A context manager the forward pass runs in (none by default)."""
        return contextlib.nullcontext()

    def variables(self, as_dict: bool = False) -> Any:
        """The model's variables (a list, or a dict by name)."""
        raise NotImplementedError

    def trainable_variables(self, as_dict: bool = False) -> Any:
        """The model's trainable variables (a list, or a dict by name)."""
        raise NotImplementedError

    def is_time_major(self) -> bool:
        """Whether RNN inputs are ``[T, B, ...]``."""
        return self.time_major is True

    def from_batch(self, train_batch: dict[str, Any], is_training: bool = True) -> Any:
        """Runs the model on a batch (RLlib's deprecated form of ``__call__``)."""
        input_dict = dict(train_batch)
        input_dict["is_training"] = is_training
        states = []
        i = 0
        while f"state_in_{i}" in input_dict:
            states.append(input_dict[f"state_in_{i}"])
            i += 1
        return self.__call__(input_dict, states, input_dict.get("seq_lens"))


def checked_forward_result(res: Any) -> tuple[Any, list[Any]]:
    """``(outputs, state_out)`` of a model's ``forward`` result, checked as RLlib 1.13's
    ``ModelV2.__call__`` checks it (``ModelV2.__call__`` and `TorchPolicy`'s one check at
    construction, whose model call is ``nn.Module.__call__``, both use this).

    Raises:
        ValueError: ``res`` is not a 2-item tuple (or list), or its state output is not a
            list.
    """
    if not isinstance(res, list | tuple) or len(res) != 2:
        raise ValueError(f"forward() must return a tuple of (output, state) tensors, got {res}")
    outputs, state_out = res
    if not isinstance(state_out, list):
        raise ValueError(f"State output is not a list: {state_out}")
    return outputs, state_out


def flatten(obs: TensorType, framework: str) -> TensorType:
    """``[B, ...]`` -> ``[B, n]``.

    Raises:
        TensorFlowOnlyError: a TF `framework`.
    """
    if framework in ("tf", "tf2", "tfe"):
        from corral._surface import TensorFlowOnlyError

        raise TensorFlowOnlyError(
            f"flatten(framework={framework!r}): corral runs on PyTorch only (framework='torch')."
        )
    return obs.reshape(obs.shape[0], -1)
