"""Ape-X DQN (Horgan et al. 2018, "Distributed Prioritized Experience Replay").

Many rollout workers act with fixed, different epsilons
(`PerWorkerEpsilonGreedy`: worker i of N explores with
0.4 ** (1 + 7 i / (N - 1))) and feed one large prioritized replay buffer
from which a learner trains with n-step double-Q dueling DQN.

On corral's local backend the replay "actor" is the driver's own
`MultiAgentReplayBuffer` (Ape-X's replay shards become one buffer in the
driver process) and the driver computes the priorities
(`worker_side_prioritization` is not built); sampling from the workers and
learning alternate within each `training_step` rather than running
asynchronously. Weights go to the workers after every update round.
"""

from __future__ import annotations

from corral.agents.config import merge_trainer_configs
from corral.agents.dqn.dqn import DEFAULT_CONFIG as DQN_CONFIG
from corral.agents.dqn.dqn import DQNTrainer

APEX_DEFAULT_CONFIG = merge_trainer_configs(
    DQN_CONFIG,
    {
        "n_step": 3,
        "num_workers": 32,
        "replay_buffer_config": {"capacity": 2000000},
        "learning_starts": 50000,
        "train_batch_size": 512,
        "rollout_fragment_length": 50,
        "target_network_update_freq": 500000,
        "timesteps_per_iteration": 25000,
        # Each worker gets its own constant epsilon (see the module docstring).
        "exploration_config": {"type": "PerWorkerEpsilonGreedy"},
        "min_iter_time_s": 30,
    },
)


class ApexTrainer(DQNTrainer):
    """Ape-X: DQN fed by many differently exploring workers (arXiv:1803.00933)."""

    _name = "APEX"
    _default_config = APEX_DEFAULT_CONFIG
