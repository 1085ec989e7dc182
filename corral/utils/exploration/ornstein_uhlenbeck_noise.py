"""`OrnsteinUhlenbeckNoise`: temporally correlated exploration noise (DDPG).

Lillicrap et al. 2016, "Continuous control with deep RL" (arXiv:1509.02971),
sec. 7: the noise follows the discretised Ornstein-Uhlenbeck process
x <- x + theta * (0 - x) + sigma * N(0, 1), and the action is
clip(mu(s) + scale * base_scale * x * (high - low)).
"""

from __future__ import annotations

from typing import Any, ClassVar

import gymnasium as gym
import torch

from corral.utils.config_spec import Float, Spec
from corral.utils.exploration.gaussian_noise import GaussianNoise


class OrnsteinUhlenbeckNoise(GaussianNoise):
    """OU noise on a Box action space; `ou_state` persists across steps.

    Args:
        ou_theta: mean-reversion rate of the process.
        ou_sigma: scale of its Gaussian increments.
        ou_base_scale: multiplies the process value (times the action range).
        random_timesteps, initial_scale, final_scale, scale_timesteps: as in `GaussianNoise`.
    """

    CONFIG_SPECS: ClassVar[dict[str, Spec]] = {
        "ou_theta": Float(0),
        "ou_sigma": Float(0),
        "ou_base_scale": Float(0),
    }

    def __init__(
        self,
        action_space: gym.Space,
        *,
        ou_theta: float = 0.15,
        ou_sigma: float = 0.2,
        ou_base_scale: float = 0.1,
        random_timesteps: int = 1000,
        initial_scale: float = 1.0,
        final_scale: float = 0.02,
        scale_timesteps: int = 10000,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            action_space,
            random_timesteps=random_timesteps,
            stddev=1.0,
            initial_scale=initial_scale,
            final_scale=final_scale,
            scale_timesteps=scale_timesteps,
            **kwargs,
        )
        self.ou_theta = float(ou_theta)
        self.ou_sigma = float(ou_sigma)
        self.ou_base_scale = float(ou_base_scale)
        self.ou_state = torch.zeros(action_space.shape)
        span = self.high - self.low
        # Unbounded dimensions use a range of 1.
        self.action_range = torch.where(torch.isfinite(span), span, torch.ones_like(span))

    def _noise(self, deterministic: torch.Tensor) -> torch.Tensor:
        self.ou_state = (
            self.ou_state
            - self.ou_theta * self.ou_state
            + self.ou_sigma * torch.randn(self.ou_state.shape)
        )
        return self.ou_base_scale * self.ou_state * self.action_range

    def on_episode_start(self, policy: Any = None, **kwargs: Any) -> None:
        self.ou_state = torch.zeros_like(self.ou_state)

    def get_state(self, sess: Any = None) -> dict[str, Any]:
        return {**super().get_state(), "ou_state": self.ou_state.tolist()}

    def set_state(self, state: dict[str, Any], sess: Any = None) -> None:
        super().set_state(state)
        if "ou_state" in state:
            self.ou_state = torch.as_tensor(state["ou_state"], dtype=torch.float32).reshape(
                self.ou_state.shape
            )
