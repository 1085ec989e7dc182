"""`ThompsonSampling`: act on scores of sampled model weights (linear Thompson sampling)."""

from __future__ import annotations

from typing import Any

import torch

from corral.utils.exploration.exploration import Exploration, zero_logp


class ThompsonSampling(Exploration):
    """The best arm under weights drawn from their posterior when exploring (Agrawal &
    Goyal 2013).

    The draw is the model's doing: a `...LinearModelThompsonSampling` (the bandit
    policies' model under this exploration) scores each arm with a `theta` drawn from
    N(theta, alpha A^-1), and those scores are the distribution inputs this takes the
    best arm of. Without exploration, the best arm of the estimates `x^T theta`.
    """

    def get_exploration_action(
        self, action_distribution: Any, timestep: int | None = None, explore: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor]:
        self._timestep(timestep)
        if explore:
            scores = action_distribution.inputs
        else:
            model: Any = self.model
            scores = model.predict(model.current_obs())
        actions = scores.argmax(dim=-1)
        return actions, zero_logp(actions)
