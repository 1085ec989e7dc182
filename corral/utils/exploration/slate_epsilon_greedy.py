"""`SlateEpsilonGreedy`: epsilon-greedy over whole slates (SlateQ's exploration).

A slate policy's action distribution holds one Q-value per slate (`TorchSlateMultiCategorical`
over the model's `slates`); the exploration picks a slate index as `EpsilonGreedy` picks an
action (same epsilon schedule, same random stream) and returns that slate's candidates.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch

from corral.models.torch.torch_action_dist import slate_shape
from corral.utils.exploration.epsilon_greedy import EpsilonGreedy
from corral.utils.exploration.exploration import zero_logp


def slates_of(action_distribution: Any, model: Any) -> torch.Tensor:
    """The ``[A, S]`` slates the distribution's ``A`` inputs score: its own `all_slates`
    (a `TorchSlateMultiCategorical`), else the model's `slates`.

    Raises:
        ValueError: neither has them.
    """
    slates = getattr(action_distribution, "all_slates", None)
    if slates is None:
        slates = getattr(model, "slates", None)
    if slates is None:
        raise ValueError(
            "A slate exploration needs the slates its Q-values score: a "
            "TorchSlateMultiCategorical distribution or a model with a `slates` attribute."
        )
    return slates


def check_slate_space(action_space: gym.Space, exploration: str) -> None:
    """Raises `ValueError`, naming `exploration`, unless `action_space` is a slate space
    (`slate_shape`)."""
    try:
        slate_shape(action_space)
    except ValueError as e:
        raise ValueError(f"{exploration}: {e}") from None


class SlateEpsilonGreedy(EpsilonGreedy):
    """With probability epsilon a uniformly random slate, else the slate of highest Q-value.

    The action space is ``MultiDiscrete([num_candidates] * slate_size)``; the distribution's
    inputs ``[B, A]`` are the Q-values of the ``A`` slates (of distinct candidates) the
    distribution or the model lists. Takes `EpsilonGreedy`'s arguments (`initial_epsilon`,
    `final_epsilon`, `epsilon_timesteps`, `warmup_timesteps`, `epsilon_schedule`).
    """

    @staticmethod
    def check_action_space(action_space: gym.Space) -> None:
        """Raises `ValueError` unless `action_space` is a slate space (`slate_shape`)."""
        check_slate_space(action_space, "SlateEpsilonGreedy")

    def get_exploration_action(
        self, action_distribution: Any, timestep: int | None = None, explore: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor]:
        slates = slates_of(action_distribution, self.model)
        q_values = action_distribution.inputs
        if explore:
            index = self._epsilon_greedy(q_values.detach().cpu().numpy(), timestep)
            chosen = torch.from_numpy(index).to(slates.device)
        else:
            chosen = q_values.argmax(-1).to(slates.device)
        actions = slates[chosen]
        return actions, zero_logp(actions)
