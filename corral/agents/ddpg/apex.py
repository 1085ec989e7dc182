"""Ape-X DDPG (Horgan et al. 2018, "Distributed Prioritized Experience Replay": the
paper's Ape-X DPG, Ape-X with DDPG's learner for continuous control).

DDPG's losses (`DDPGTorchPolicy`, TD3's switches included) fed by many rollout workers,
each adding Ornstein-Uhlenbeck noise of its own constant scale
(`PerWorkerOrnsteinUhlenbeckNoise`: worker i of N scales it by
0.4 ** (1 + 7 (i - 1) / (N - 1))), computing the initial priorities of the transitions
it samples (`worker_side_prioritization`) into one large prioritized buffer of 3-step
transitions. `APEX_DDPG_DEFAULT_CONFIG` keeps RLlib 1.13's defaults; Ape-X's settings and
how it runs on corral are shared with Ape-X DQN in `corral.agents.apex_common`.
"""

from __future__ import annotations

from corral.agents.apex_common import ApexTrainerMixin, apex_default_config
from corral.agents.ddpg.ddpg import DEFAULT_CONFIG as DDPG_CONFIG
from corral.agents.ddpg.ddpg import DDPGTrainer

APEX_DDPG_DEFAULT_CONFIG = apex_default_config(
    DDPG_CONFIG,
    {
        # Each worker adds Ornstein-Uhlenbeck noise of its own constant scale (see the
        # module docstring); the OU process keys take `OrnsteinUhlenbeckNoise`'s defaults.
        "exploration_config": {"type": "PerWorkerOrnsteinUhlenbeckNoise"},
    },
)


class ApexDDPGTrainer(ApexTrainerMixin, DDPGTrainer):
    """Ape-X DDPG: DDPG fed by many differently exploring workers (arXiv:1803.00933)."""

    _name = "APEX_DDPG"
    _default_config = APEX_DDPG_DEFAULT_CONFIG


__all__ = ["APEX_DDPG_DEFAULT_CONFIG", "ApexDDPGTrainer"]
