"""`SoftQ`: Boltzmann exploration, a ~ softmax(Q(s, .) / temperature)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch

from corral.models.torch.torch_action_dist import TorchCategorical
from corral.utils.exploration.exploration import Exploration, zero_logp


class SoftQ(Exploration):
    """Samples actions from a categorical over Q-values divided by `temperature`."""

    def __init__(self, action_space: gym.Space, *, temperature: float = 1.0, **kwargs: Any):
        self.check_action_space(action_space)
        if temperature <= 0:
            raise ValueError(f"SoftQ temperature must be > 0, got {temperature}.")
        super().__init__(action_space, **kwargs)
        self.temperature = float(temperature)

    @staticmethod
    def check_action_space(action_space: gym.Space) -> None:
        """Raises `ValueError` for an action space this exploration cannot act in."""
        if not isinstance(action_space, gym.spaces.Discrete):
            raise ValueError(f"SoftQ needs a Discrete action space, got {action_space}.")

    def get_exploration_action(
        self, action_distribution: Any, timestep: int | None = None, explore: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor]:
        self._timestep(timestep)
        if not explore:
            actions = action_distribution.deterministic_sample()
            return actions, zero_logp(actions)
        dist = TorchCategorical(action_distribution.inputs, self.model, self.temperature)
        actions = dist.sample()
        return actions, dist.sampled_action_logp()
