"""`Random`: uniform random actions when exploring (a baseline, and warm-up)."""

from __future__ import annotations

from typing import Any

import torch

from corral.utils.exploration.exploration import Exploration, random_actions, zero_logp


class Random(Exploration):
    """Uniform random actions when exploring; the distribution's mode otherwise."""

    def get_exploration_action(
        self, action_distribution: Any, timestep: int | None = None, explore: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor]:
        self._timestep(timestep)
        if explore:
            actions = random_actions(self.action_space, action_distribution.inputs.shape[0])
        else:
            actions = action_distribution.deterministic_sample()
        return actions, zero_logp(actions)
