"""Ape-X DQN (Horgan et al. 2018, "Distributed Prioritized Experience Replay").

Many rollout workers act with fixed, different epsilons
(`PerWorkerEpsilonGreedy`: worker i of N explores with
0.4 ** (1 + 7 (i - 1) / (N - 1))), compute the initial priorities of the
transitions they sample (`worker_side_prioritization`, on by default as in
RLlib 1.13) and feed one large prioritized replay buffer from which a learner
trains with n-step double-Q dueling DQN.

Ape-X's settings and how it runs on corral (one buffer in the driver; sampling
and learning alternate within each `training_step`) are shared with Ape-X DDPG
in `corral.agents.apex_common`.
"""

from __future__ import annotations

from corral.agents.apex_common import ApexTrainerMixin, apex_default_config
from corral.agents.dqn.dqn import DEFAULT_CONFIG as DQN_CONFIG
from corral.agents.dqn.dqn import DQNTrainer

APEX_DEFAULT_CONFIG = apex_default_config(
    DQN_CONFIG,
    {
        # Each worker gets its own constant epsilon (see the module docstring).
        "exploration_config": {"type": "PerWorkerEpsilonGreedy"},
    },
)


class ApexTrainer(ApexTrainerMixin, DQNTrainer):
    """Ape-X: DQN fed by many differently exploring workers (arXiv:1803.00933)."""

    _name = "APEX"
    _default_config = APEX_DEFAULT_CONFIG
