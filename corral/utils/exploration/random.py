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
        return self.get_torch_exploration_action(action_distribution, explore)

    def get_torch_exploration_action(
        self, action_dist: Any, explore: bool
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """RLlib 1.13's torch half of `get_exploration_action` (the timestep untouched):
        one uniformly random action per row of `action_dist.inputs` when `explore`, else
        the distribution's mode; and zero log-likelihoods."""
        if explore:
            actions = random_actions(self.action_space, action_dist.inputs.shape[0])
        else:
            actions = action_dist.deterministic_sample()
        return actions, zero_logp(actions)

    def get_tf_exploration_action_op(self, action_dist: Any, explore: Any) -> Any:
        """RLlib 1.13's TensorFlow half of `get_exploration_action` (a graph op).

        Raises:
            TensorFlowOnlyError: always; corral runs on PyTorch only: use
                `get_torch_exploration_action(action_dist, explore)`.
        """
        from corral._surface import TensorFlowOnlyError

        raise TensorFlowOnlyError(
            "Random.get_tf_exploration_action_op() builds a TensorFlow graph op; corral runs "
            "on PyTorch only: use Random.get_torch_exploration_action(action_dist, explore)."
        )
