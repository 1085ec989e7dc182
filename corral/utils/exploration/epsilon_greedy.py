"""`EpsilonGreedy`: with probability epsilon a uniform random action, else argmax Q.

The action-distribution inputs are read as Q-values (Mnih et al. 2015,
"Human-level control through deep RL"); epsilon anneals linearly from
`initial_epsilon` to `final_epsilon` over `epsilon_timesteps` after
`warmup_timesteps`. Actions whose Q-value is -inf (masked) are never drawn.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch

from corral.utils.config_spec import CallableSpec, Float, Int, Optional, Spec
from corral.utils.exploration.exploration import Exploration, zero_logp
from corral.utils.schedules import PiecewiseSchedule

# Up to this many rows, epsilon-greedy picks the exploring rows with Python numbers; from
# there on numpy's vectorised calls are cheaper (measured with 2 actions and every row
# exploring: about equal at 8 rows; for 256 rows of 18 actions numpy is 2.7-11x faster).
_PYTHON_ROWS = 8


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

    CONFIG_SPECS: ClassVar[dict[str, Spec]] = {
        "initial_epsilon": Float(0, 1),
        "final_epsilon": Float(0, 1),
        "epsilon_timesteps": Int(0, integral_float_ok=True),
        "warmup_timesteps": Int(0, integral_float_ok=True),
        "epsilon_schedule": Optional(CallableSpec("a schedule (timestep -> epsilon)")),
    }

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
        self.check_action_space(action_space)
        super().__init__(action_space, **kwargs)
        self.epsilon_schedule = epsilon_schedule or PiecewiseSchedule(
            [
                [0, initial_epsilon],
                [warmup_timesteps, initial_epsilon],
                [warmup_timesteps + epsilon_timesteps, final_epsilon],
            ],
            outside_value=final_epsilon,
        )

    @staticmethod
    def check_action_space(action_space: gym.Space) -> None:
        """Raises `ValueError` for an action space this exploration cannot act in."""
        if not isinstance(action_space, gym.spaces.Discrete):
            raise ValueError(
                f"EpsilonGreedy needs a Discrete action space, got {action_space}; use "
                "GaussianNoise or OrnsteinUhlenbeckNoise for Box actions."
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
        actions = self._epsilon_greedy(q_values.detach().cpu().numpy(), timestep)
        out = torch.from_numpy(actions).to(q_values.device)
        return out, zero_logp(out)

    def get_exploration_action_numpy(
        self, q_values: np.ndarray, timestep: int | None = None, explore: bool = True
    ) -> tuple[np.ndarray, np.ndarray]:
        """`get_exploration_action` on numpy Q-values `[B, A]`, for a policy that acts
        wholly in numpy (`TorchPolicy` with a built-in model): (actions, zero
        log-likelihoods). Greedy is the argmax, as `TorchCategorical`'s."""
        actions = self._epsilon_greedy(q_values, timestep) if explore else q_values.argmax(axis=1)
        return actions, np.zeros(len(q_values), np.float32)

    def _epsilon_greedy(self, q: np.ndarray, timestep: int | None) -> np.ndarray:
        """Per row of `q`, a uniform random allowed (finite-Q) action with probability
        epsilon, else the argmax."""
        epsilon = self.epsilon(timestep)
        n, num_actions = q.shape
        # One torch draw per step whether or not a row explores (the same stream as
        # n x A noise, then one coin per row): a uniform action among the allowed
        # (finite-Q) ones is the argmax of the noise.
        split = n * num_actions
        draws = torch.rand(split + n)
        actions = q.argmax(axis=1)
        if n <= _PYTHON_ROWS:
            # The coins and the exploring rows as Python numbers: for the one or few rows
            # a sampler acts on, each numpy call on a tiny array costs more than the
            # arithmetic (2-4 us each, right after the forward pass).
            values = draws.tolist()
            for row, coin in enumerate(values[split:]):
                if coin < epsilon:
                    actions[row] = _noise_argmax(
                        values[row * num_actions : (row + 1) * num_actions], q[row].tolist()
                    )
        else:
            numbers = draws.cpu().numpy()  # (drawn on the policy's device while it acts there)
            noise, coins = numbers[:split].reshape(n, num_actions), numbers[split:]
            take_random = coins < epsilon
            if take_random.any():
                random_actions = np.where(np.isfinite(q), noise, -1.0).argmax(axis=1)
                actions = np.where(take_random, random_actions, actions)
        return actions

    def get_info(self, sess: Any = None) -> dict[str, Any]:
        return {"cur_epsilon": self.epsilon()}


def _noise_argmax(noise: list[float], q: list[float]) -> int:
    """The action with the largest noise among those with a finite Q-value (the first
    on a tie; action 0 when none is finite): a uniform draw over the allowed actions."""
    best, best_noise = 0, -1.0
    for action, (value, draw) in enumerate(zip(q, noise)):
        if draw > best_noise and math.isfinite(value):
            best, best_noise = action, draw
    return best
