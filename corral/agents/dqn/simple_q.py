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

from corral.agents.config import with_common_config
from corral.agents.dqn.dqn_torch_policy import DQNTorchPolicy
from corral.agents.off_policy import OffPolicyTrainer
from corral.utils.config_spec import Float, Schedule
from corral.utils.deprecation import DEPRECATED_VALUE, deprecation_warning

SIMPLE_Q_DEFAULT_CONFIG = with_common_config(
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
        # Target update: target <- tau * online + (1 - tau) * target (1.0: a hard copy).
        "tau": 1.0,
        # === Replay buffer ===
        # Deprecated: use `replay_buffer_config: {capacity: ...}`.
        "buffer_size": DEPRECATED_VALUE,
        # The replay buffer: one `MultiAgentReplayBuffer` holding `capacity`
        # transitions per policy (corral.utils.replay_buffers).
        "replay_buffer_config": {
            "type": "MultiAgentReplayBuffer",
            "capacity": 50000,
        },
        # Write the replay buffer into checkpoints (safetensors + JSON), so that
        # a restored trainer continues with the same experience.
        "store_buffer_in_checkpoints": False,
        # Uniform replay (prioritized replay is DQN's; these keys exist so that
        # the shared replay machinery reads one set of names).
        "prioritized_replay": False,
        "prioritized_replay_alpha": 0.6,
        "prioritized_replay_beta": 0.4,
        "final_prioritized_replay_beta": 0.4,
        "prioritized_replay_beta_annealing_timesteps": 20000,
        "prioritized_replay_eps": 1e-6,
        # Trained (replayed) rows per sampled env step; None: one train batch per
        # sampled fragment round (RLlib's "natural" ratio).
        "training_intensity": None,
        # === Optimisation ===
        "lr": 5e-4,
        # [[timestep, lr], ...] piecewise-linear learning-rate schedule (None: constant).
        "lr_schedule": None,
        # Adam's epsilon.
        "adam_epsilon": 1e-8,
        # Clip gradients to this global norm (None: no clipping).
        "grad_clip": 40,
        # Env steps sampled (with the initial exploration) before the first update.
        "learning_starts": 1000,
        # === Parallelism ===
        "rollout_fragment_length": 4,
        # Rows replayed per gradient step.
        "train_batch_size": 32,
        "num_workers": 0,
        # Compute priorities in the workers (not built: the driver computes them).
        "worker_side_prioritization": False,
        # Minimum seconds per `train()` call.
        "min_iter_time_s": 1,
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

    def validate_config(self, config: dict) -> None:
        if config["buffer_size"] != DEPRECATED_VALUE:
            deprecation_warning("buffer_size", "replay_buffer_config: {capacity: ...}")
            config["replay_buffer_config"]["capacity"] = int(config["buffer_size"])
            config["buffer_size"] = DEPRECATED_VALUE
        super().validate_config(config)
        kind = config["replay_buffer_config"].get("type", "MultiAgentReplayBuffer")
        if kind not in ("MultiAgentReplayBuffer", "MultiAgentPrioritizedReplayBuffer"):
            raise NotImplementedError(
                f"replay_buffer_config type {kind!r} is not built; corral uses a "
                "MultiAgentReplayBuffer (prioritized when `prioritized_replay` is True)."
            )
        if config["worker_side_prioritization"]:
            raise NotImplementedError(
                "worker_side_prioritization=True is not implemented yet: the driver computes "
                "the priorities (leave it False)."
            )
        if not 0.0 < config["tau"] <= 1.0:
            raise ValueError(f"`tau` must be in (0, 1], got {config['tau']}.")
