"""RLlib's framework-independent ``ActionDistribution`` base class.

corral's torch distributions (``corral.models.torch.torch_action_dist``) derive from it
through ``TorchDistributionWrapper``, so ``isinstance(dist, ActionDistribution)`` holds as in
RLlib and a custom distribution may subclass either.
"""

from __future__ import annotations

from typing import Any

__all__ = ["ActionDistribution"]


class ActionDistribution:
    """A distribution over actions, parameterised by a model's outputs.

    Args:
        inputs: the distribution's parameters (the model's output batch).
        model: the model that produced them.
    """

    def __init__(self, inputs: Any, model: Any) -> None:
        self.inputs = inputs
        self.model = model

    def sample(self) -> Any:
        """Draws one action per batch row."""
        raise NotImplementedError

    def deterministic_sample(self) -> Any:
        """The most likely action per batch row."""
        raise NotImplementedError

    def sampled_action_logp(self) -> Any:
        """The log-likelihood of the action the last ``sample()`` drew."""
        raise NotImplementedError

    def logp(self, x: Any) -> Any:
        """The log-likelihood of actions `x`."""
        raise NotImplementedError

    def kl(self, other: ActionDistribution) -> Any:
        """``KL(self || other)``."""
        raise NotImplementedError

    def entropy(self) -> Any:
        """The entropy per batch row."""
        raise NotImplementedError

    def multi_kl(self, other: ActionDistribution) -> Any:
        """The KL per component (one component unless overridden)."""
        return self.kl(other)

    def multi_entropy(self) -> Any:
        """The entropy per component (one component unless overridden)."""
        return self.entropy()

    @staticmethod
    def required_model_output_shape(action_space: Any, model_config: Any) -> Any:
        """How many model outputs the distribution needs for `action_space`."""
        raise NotImplementedError
