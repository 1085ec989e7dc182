"""Simple Q-learning: DQN without its extensions (Mnih et al. 2015).

A Q-network trained on uniformly replayed transitions against a periodically
copied target network, acting epsilon-greedily. No dueling streams, no double
Q, no n-step returns, no prioritized replay: `DQNTrainer` adds those.

One training step (shared with DQN, SAC and TD3 in `OffPolicyTrainer`):
sample one fragment per worker into the replay buffer; once
`learning_starts` env steps were sampled, replay `train_batch_size` rows per
gradient step, as many steps as `training_intensity` asks (default: one per
fragment round); copy the online network into the target network every
`target_network_update_freq` sampled env steps; push the weights to the workers.
"""

from __future__ import annotations

from corral.agents.dqn.dqn_torch_policy import DQNTorchPolicy
from corral.agents.off_policy import OffPolicyTrainer, with_off_policy_config
from corral.utils.config_spec import Float, Schedule

SIMPLE_Q_DEFAULT_CONFIG = with_off_policy_config(
    {
        # === Exploration ===
        # Epsilon-greedy: epsilon falls linearly from 1.0 to 0.02 over 10k env steps.
        "exploration_config": {
            "type": "EpsilonGreedy",
            "initial_epsilon": 1.0,
            "final_epsilon": 0.02,
            "epsilon_timesteps": 10000,
        },
        # Evaluate greedily.
        "evaluation_config": {"explore": False},
        # Minimum env steps per `train()` call.
        "timesteps_per_iteration": 1000,
        # Copy the online network into the target network every this many sampled env steps.
        "target_network_update_freq": 500,
        # === Optimisation ===
        "lr": 5e-4,
        # [[timestep, lr], ...] piecewise-linear learning-rate schedule (None: constant).
        "lr_schedule": None,
        # Adam's epsilon.
        "adam_epsilon": 1e-8,
        # Clip gradients to this global norm (None: no clipping).
        "grad_clip": 40,
        # === Parallelism ===
        "rollout_fragment_length": 4,
        # Rows replayed per gradient step.
        "train_batch_size": 32,
    }
)

# Type and range of Simple Q's own keys (the replay keys are in
# `REPLAY_CONFIG_SPECS`, COMMON_CONFIG's in COMMON_CONFIG_SPECS).
SIMPLE_Q_CONFIG_SPECS = {
    "tau": Float(0, 1, lo_open=True),
    "lr_schedule": Schedule(Float(0)),
    "adam_epsilon": Float(0, lo_open=True),
}


class SimpleQTrainer(OffPolicyTrainer):
    """Q-learning with experience replay and a target network (Mnih et al. 2015)."""

    _name = "SimpleQ"
    _default_config = SIMPLE_Q_DEFAULT_CONFIG
    _config_specs = SIMPLE_Q_CONFIG_SPECS
    _policy_class = DQNTorchPolicy
