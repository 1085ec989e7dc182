"""`PerWorkerOrnsteinUhlenbeckNoise`: OU action noise with a fixed scale per rollout worker."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from corral.utils.exploration.ornstein_uhlenbeck_noise import OrnsteinUhlenbeckNoise
from corral.utils.exploration.per_worker_gaussian_noise import per_worker_scale_schedule


class PerWorkerOrnsteinUhlenbeckNoise(OrnsteinUhlenbeckNoise):
    """Remote worker k of N adds OU noise scaled by ``0.4 ** (1 + 7 (k-1)/(N-1))``."""

    def __init__(self, action_space: gym.Space, **kwargs: Any) -> None:
        if "scale_schedule" not in kwargs:
            kwargs["scale_schedule"] = per_worker_scale_schedule(kwargs)
        super().__init__(action_space, **kwargs)
