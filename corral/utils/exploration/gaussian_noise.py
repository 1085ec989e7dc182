"""`GaussianNoise`: deterministic actions plus annealed Gaussian noise (DDPG/TD3).

Fujimoto et al. 2018, "Addressing Function Approximation Error in
Actor-Critic Methods" (TD3), sec. 6: a = clip(mu(s) + scale * N(0, stddev^2)),
with uniform random actions for the first `random_timesteps`.
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import numpy as np
import torch

from corral.utils.config_spec import AnyValue, Float, Int, Spec
from corral.utils.exploration.exploration import Exploration, random_actions, zero_logp
from corral.utils.schedules import PiecewiseSchedule


class GaussianNoise(Exploration):
    """Additive Gaussian noise on a Box action space.

    Args:
        random_timesteps: uniform random actions before this timestep.
        stddev: standard deviation of the noise (in action units).
        initial_scale: noise scale at timestep 0.
        final_scale: noise scale after `scale_timesteps`.
        scale_timesteps: length of the linear decay of the scale.
        scale_schedule: a schedule (timestep -> scale) that replaces that decay.
    """

    CONFIG_SPECS: ClassVar[dict[str, Spec]] = {
        "random_timesteps": Int(0, integral_float_ok=True),
        "stddev": Float(0),
        "initial_scale": Float(0),
        "final_scale": Float(0),
        "scale_timesteps": Int(0, integral_float_ok=True),
        "scale_schedule": AnyValue("None or a schedule (timestep -> scale)"),
    }

    def __init__(
        self,
        action_space: gym.Space,
        *,
        random_timesteps: int = 1000,
        stddev: float = 0.1,
        initial_scale: float = 1.0,
        final_scale: float = 0.02,
        scale_timesteps: int = 10000,
        scale_schedule: Any = None,
        **kwargs: Any,
    ) -> None:
        if not isinstance(action_space, gym.spaces.Box):
            raise ValueError(f"{type(self).__name__} needs a Box action space, got {action_space}.")
        super().__init__(action_space, **kwargs)
        self.random_timesteps = int(random_timesteps)
        self.stddev = float(stddev)
        # RLlib's `scale_schedule` (a Schedule) replaces the initial->final annealing.
        self.scale_schedule = scale_schedule or PiecewiseSchedule(
            [[0, initial_scale], [max(int(scale_timesteps), 1), final_scale]]
        )
        # With `normalize_actions` the policy acts in [-1, 1]; else in the space's bounds.
        if self.policy_config.get("normalize_actions"):
            low = -np.ones(action_space.shape, np.float32)
            high = np.ones(action_space.shape, np.float32)
        else:
            low = action_space.low.astype(np.float32)
            high = action_space.high.astype(np.float32)
        self.low, self.high = torch.as_tensor(low), torch.as_tensor(high)

    def scale(self, timestep: int | None = None) -> float:
        return float(self.scale_schedule(self._timestep(timestep)))

    def get_exploration_action(
        self, action_distribution: Any, timestep: int | None = None, explore: bool = True
    ) -> tuple[torch.Tensor, torch.Tensor]:
        deterministic = action_distribution.deterministic_sample()
        if not explore:
            return deterministic, zero_logp(deterministic)
        t = self._timestep(timestep)
        if t < self.random_timesteps:
            actions = random_actions(
                self.action_space, deterministic.shape[0], (self.low.numpy(), self.high.numpy())
            )
        else:
            noise = self.scale(t) * self._noise(deterministic)
            actions = torch.clamp(deterministic + noise, self.low, self.high)
        return actions, zero_logp(actions)

    def _noise(self, deterministic: torch.Tensor) -> torch.Tensor:
        return self.stddev * torch.randn_like(deterministic)

    def get_info(self, sess: Any = None) -> dict[str, Any]:
        return {"cur_scale": self.scale()}
