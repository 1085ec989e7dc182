"""`PerWorkerGaussianNoise`: Gaussian action noise with a fixed scale per rollout worker."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from corral.utils.exploration.gaussian_noise import GaussianNoise
from corral.utils.exploration.per_worker_epsilon_greedy import apex_epsilon
from corral.utils.schedules import ConstantSchedule


def per_worker_scale_schedule(kwargs: dict[str, Any]) -> ConstantSchedule | None:
    """Ape-X's per-actor constants as a noise scale (see ``apex_epsilon``); the local
    worker gets 0 when there are remote workers; None (the annealed scale) without any."""
    num_workers = int(kwargs.get("num_workers", 0))
    worker_index = int(kwargs.get("worker_index", 0))
    if num_workers <= 0:
        return None
    return ConstantSchedule(apex_epsilon(worker_index - 1, num_workers) if worker_index else 0.0)


class PerWorkerGaussianNoise(GaussianNoise):
    """Remote worker k of N adds Gaussian noise scaled by ``0.4 ** (1 + 7 (k-1)/(N-1))``."""

    def __init__(self, action_space: gym.Space, **kwargs: Any) -> None:
        if "scale_schedule" not in kwargs:
            kwargs["scale_schedule"] = per_worker_scale_schedule(kwargs)
        super().__init__(action_space, **kwargs)
