"""`EpsilonGreedy`: with probability epsilon a uniform random action, else argmax Q.

The action-distribution inputs are read as Q-values (Mnih et al. 2015,
"Human-level control through deep RL"); epsilon anneals linearly from
`initial_epsilon` to `final_epsilon` over `epsilon_timesteps` after
`warmup_timesteps`. Actions whose Q-value is -inf (masked) are never drawn.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import torch

from corral.utils.exploration.exploration import Exploration, zero_logp
from corral.utils.schedules import PiecewiseSchedule


class EpsilonGreedy(Exploration):
    """Epsilon-greedy over the Q-values of a Discrete action space.

    Args:
        initial_epsilon: epsilon until `warmup_timesteps`.
        final_epsilon: epsilon after `warmup_timesteps + epsilon_timesteps`.
        epsilon_timesteps: length of the linear decay.
        warmup_timesteps: timesteps at `initial_epsilon` before the decay starts.
        epsilon_schedule: a schedule (callable timestep -> epsilon, e.g. a
            `PiecewiseSchedule`) that replaces the linear one.
    """

    def __init__(
        self,
        action_space: gym.Space,
        *,
        initial_epsilon: float = 1.0,
        final_epsilon: float = 0.05,
        epsilon_timesteps: int = int(1e5),
        warmup_timesteps: int = 0,
        epsilon_schedule: Callable[[int], float] | None = None,
        **kwargs: Any,
    ) -> None:
        if not isinstance(action_space, gym.spaces.Discrete):
            raise ValueError(
                f"EpsilonGreedy needs a Discrete action space, got {action_space}; use "
                "GaussianNoise or OrnsteinUhlenbeckNoise for Box actions."
            )
        super().__init__(action_space, **kwargs)
        self.epsilon_schedule = epsilon_schedule or PiecewiseSchedule(
            [
                [0, initial_epsilon],
                [warmup_timesteps, initial_epsilon],
                [warmup_timesteps + epsilon_timesteps, final_epsilon],
            ],
            outside_value=final_epsilon,
        )

    def epsilon(self, timestep: int | None = None) -> float:
        return float(self.epsilon_schedule(self._timestep(timestep)))

    def get_exploration_action(
        self, action_distribution: Any, timestep: int | None = None, explore: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor]:
        if not explore:
            greedy = action_distribution.deterministic_sample()
            return greedy, zero_logp(greedy)
        q_values = action_distribution.inputs
        epsilon = self.epsilon(timestep)
        n, num_actions = q_values.shape
        # One torch draw per step whether or not a row explores (the same stream as
        # n x A noise, then one coin per row): a uniform action among the allowed
        # (finite-Q) ones is the argmax of the noise. The rest is numpy: for the one
        # or few rows a sampler acts on, each torch op costs several numpy ops.
        split = n * num_actions
        draws = torch.rand(split + n).numpy()
        noise, coins = draws[:split].reshape(n, num_actions), draws[split:]
        q = q_values.detach().cpu().numpy()
        actions = q.argmax(axis=1)
        take_random = coins < epsilon
        if take_random.any():
            random_actions = np.where(np.isfinite(q), noise, -1.0).argmax(axis=1)
            actions = np.where(take_random, random_actions, actions)
        out = torch.from_numpy(actions).to(q_values.device)
        return out, zero_logp(out)

    def get_info(self) -> dict[str, Any]:
        return {"cur_epsilon": self.epsilon()}
