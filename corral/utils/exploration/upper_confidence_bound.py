"""`UpperConfidenceBound`: act on the bandit model's upper confidence bounds (LinUCB)."""

from __future__ import annotations

from typing import Any

import torch

from corral.utils.exploration.exploration import Exploration, zero_logp


class UpperConfidenceBound(Exploration):
    """The arm with the highest upper confidence bound when exploring (Li et al. 2010).

    The bound is the model's doing: a `...LinearModelUCB` (the bandit policies' model
    under this exploration) scores each arm `x^T theta` plus its confidence width, and
    those scores are the distribution inputs this takes the best arm of. Without
    exploration, the best arm of the plain estimates `x^T theta` (RLlib 1.13 took the
    bounds then too).
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
