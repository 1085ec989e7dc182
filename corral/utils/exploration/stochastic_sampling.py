"""`StochasticSampling`: act by sampling the action distribution (policy gradients)."""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import torch

from corral.utils.config_spec import Int, Spec
from corral.utils.exploration.exploration import Exploration, random_actions, zero_logp


class StochasticSampling(Exploration):
    """Samples from the distribution when exploring, takes its mode otherwise.

    Args:
        random_timesteps: act uniformly at random for this many initial timesteps.
    """

    CONFIG_SPECS: ClassVar[dict[str, Spec]] = {"random_timesteps": Int(0, integral_float_ok=True)}

    def __init__(self, action_space: gym.Space, *, random_timesteps: int = 0, **kwargs: Any):
        super().__init__(action_space, **kwargs)
        self.random_timesteps = int(random_timesteps)

    def get_exploration_action(
        self, action_distribution: Any, timestep: int | None = None, explore: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor]:
        t = self._timestep(timestep)
        if not explore:
            actions = action_distribution.deterministic_sample()
            return actions, zero_logp(actions)
        if t < self.random_timesteps:
            actions = random_actions(self.action_space, action_distribution.inputs.shape[0])
            return actions, zero_logp(actions)
        actions = action_distribution.sample()
        return actions, action_distribution.sampled_action_logp()
