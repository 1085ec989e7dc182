"""`PerWorkerEpsilonGreedy`: a fixed epsilon per rollout worker (Ape-X).

Horgan et al. 2018, "Distributed Prioritized Experience Replay"
(arXiv:1803.00933), sec. 4.1: actor i of N explores with
epsilon_i = 0.4 ** (1 + 7 * i / (N - 1)), spreading the actors from very
exploratory (0.4) to nearly greedy (0.4 ** 8).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym

from corral.utils.exploration.epsilon_greedy import EpsilonGreedy
from corral.utils.schedules import ConstantSchedule

APEX_BASE_EPSILON = 0.4
APEX_ALPHA = 7.0


def apex_epsilon(i: int, num_actors: int) -> float:
    """Epsilon of actor `i` (0-based) out of `num_actors`."""
    spread = i / (num_actors - 1) if num_actors > 1 else 0.0
    return APEX_BASE_EPSILON ** (1.0 + APEX_ALPHA * spread)


class PerWorkerEpsilonGreedy(EpsilonGreedy):
    """Remote worker k (1..num_workers) acts with `apex_epsilon(k - 1, num_workers)`.

    With remote workers, the driver's local worker (index 0), which does not
    sample, acts greedily (epsilon 0). With no remote workers, the local
    worker samples and uses the ordinary annealed schedule of `EpsilonGreedy`.
    """

    def __init__(self, action_space: gym.Space, **kwargs: Any) -> None:
        num_workers = int(kwargs.get("num_workers", 0))
        worker_index = int(kwargs.get("worker_index", 0))
        if num_workers > 0 and "epsilon_schedule" not in kwargs:
            epsilon = apex_epsilon(worker_index - 1, num_workers) if worker_index > 0 else 0.0
            kwargs["epsilon_schedule"] = ConstantSchedule(epsilon)
        super().__init__(action_space, **kwargs)
