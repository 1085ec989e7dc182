"""`SlateSoftQ`: Boltzmann exploration over whole slates, slate ~ softmax(Q(s, slate) / T)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch

from corral.models.torch.torch_action_dist import TorchSlateMultiCategorical
from corral.utils.exploration.exploration import zero_logp
from corral.utils.exploration.slate_epsilon_greedy import check_slate_space, slates_of
from corral.utils.exploration.soft_q import SoftQ


class SlateSoftQ(SoftQ):
    """Samples a slate from the categorical over the slates' Q-values divided by
    `temperature`; without exploration, the slate of highest Q-value.

    The action space is ``MultiDiscrete([num_candidates] * slate_size)``; the distribution's
    inputs ``[B, A]`` score the ``A`` slates the distribution or the model lists. The
    returned log-likelihoods are the sampled slates' (0 for greedy slates).
    """

    @staticmethod
    def check_action_space(action_space: gym.Space) -> None:
        """Raises `ValueError` unless `action_space` is a slate space (`slate_shape`)."""
        check_slate_space(action_space, "SlateSoftQ")

    def get_exploration_action(
        self, action_distribution: Any, timestep: int | None = None, explore: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor]:
        self._timestep(timestep)
        slates = slates_of(action_distribution, self.model)
        dist = TorchSlateMultiCategorical(
            action_distribution.inputs, None, self.temperature, all_slates=slates
        )
        if not explore:
            actions = dist.deterministic_sample()
            return actions, zero_logp(actions)
        actions = dist.sample()
        return actions, dist.sampled_action_logp()
