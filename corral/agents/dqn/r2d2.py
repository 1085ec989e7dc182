"""R2D2: DQN with a recurrent Q-network trained on replayed sequences.

Kapturowski et al. 2019, "Recurrent Experience Replay in Distributed Reinforcement
Learning" (ICLR), as RLlib 1.13's `R2D2Trainer`: double-Q, dueling DQN whose Q-network is
wrapped in an LSTM (`model.use_lstm`), the value rescaling h (`use_h_function`) and a
replay buffer of fixed-length sequences. The loss is in `r2d2_torch_policy.py`.

One training step: sample complete episodes from the workers; cut each episode into
sequences of `model.max_seq_len + burn_in` steps (the last one zero-padded), stored with
the recurrent state at their first step (`replay_buffer_config.capacity` counts
sequences); once `learning_starts` env steps were sampled, replay
`train_batch_size // replay_sequence_length` sequences per gradient step, as many steps as
`training_intensity` asks for (default: one per sampling round); update the sequences'
priorities with prioritized replay (off by default, as in RLlib 1.13); copy the online
network into the target every `target_network_update_freq` sampled env steps.

Unlike RLlib 1.13, whose buffer overlaps consecutive sequences by `burn_in` steps, the
stored sequences do not overlap: the first `burn_in` steps of each sequence only warm up
the recurrent state and are never trained on.
"""

from __future__ import annotations

from corral.agents.config import merge_trainer_configs
from corral.agents.dqn.dqn import DEFAULT_CONFIG as DQN_DEFAULT_CONFIG
from corral.agents.dqn.dqn import DQNTrainer
from corral.agents.dqn.r2d2_torch_policy import R2D2TorchPolicy
from corral.agents.sequence_replay import (
    SequenceReplayMixin,
    sequence_columns,
    sequence_rules,
    set_replay_sequence_length,
)

# (Still importable from here, where it was defined before RNNSAC shared it.)
from corral.agents.sequence_replay import (
    as_learner_sequences as as_learner_sequences,
)
from corral.utils.config_spec import Bool, Float, Int, Rule

R2D2_DEFAULT_CONFIG = merge_trainer_configs(
    DQN_DEFAULT_CONFIG,
    {
        "lr": 1e-4,
        "gamma": 0.997,
        # Replayed env steps per gradient step: train_batch_size // replay_sequence_length
        # whole sequences.
        "train_batch_size": 64 * 20,
        "adam_epsilon": 1e-3,
        "num_workers": 2,
        # Must be "complete_episodes": sequences are cut from whole episodes.
        "batch_mode": "complete_episodes",
        # === Replay buffer ===
        # Prioritized replay of sequences (priority: a sequence's mean |TD error|); off,
        # as in RLlib 1.13's R2D2.
        "prioritized_replay": False,
        "replay_buffer_config": {
            "type": "MultiAgentReplayBuffer",
            # Size of the replay buffer in sequences (not timesteps).
            "capacity": 100000,
            # Set automatically to model.max_seq_len + burn_in: leave it at -1.
            "replay_sequence_length": -1,
        },
        # True: each replayed sequence starts from a zero recurrent state. False: from the
        # state recorded when its first step was sampled.
        "zero_init_states": True,
        # The first `burn_in` steps of each replayed sequence only run the recurrent
        # state forward (from zeros or the stored state) and are left out of the loss:
        # the loss is over `max_seq_len` steps of each `max_seq_len + burn_in`.
        "burn_in": 0,
        # Rescale the targets with h(x) = sign(x) (sqrt(|x| + 1) - 1) + eps x:
        # y = h(r + gamma h^-1(Q_target)).
        "use_h_function": True,
        # The eps of h (used with `use_h_function`).
        "h_function_epsilon": 1e-3,
        # Copy the online network into the target every this many sampled env steps.
        "target_network_update_freq": 2500,
    },
    allow_unknown_configs=True,
)

# Type and range of R2D2's own keys (DQN's and the replay keys are checked too).
R2D2_CONFIG_SPECS = {
    "zero_init_states": Bool(),
    "burn_in": Int(0),
    "use_h_function": Bool(),
    "h_function_epsilon": Float(0, lo_open=True),
}


class R2D2Trainer(SequenceReplayMixin, DQNTrainer):
    """Recurrent Experience Replay in Distributed RL (Kapturowski et al. 2019)."""

    _name = "R2D2"
    _default_config = R2D2_DEFAULT_CONFIG
    _config_specs = R2D2_CONFIG_SPECS
    _policy_class = R2D2TorchPolicy
    _config_rules: tuple[Rule, ...] = (
        *sequence_rules("R2D2"),
        Rule(
            lambda c: c["num_atoms"] == 1,
            "Distributional R2D2 is not built (as in RLlib 1.13): num_atoms must be 1, "
            "got {num_atoms}.",
        ),
    )

    def validate_config(self, config: dict) -> None:
        """RLlib 1.13's checks; sets `replay_buffer_config.replay_sequence_length` to
        `model.max_seq_len + burn_in`."""
        super().validate_config(config)
        set_replay_sequence_length(config)


# (The names R2D2's module had before the sequence replay was shared with RNNSAC.)
_sequence_columns = sequence_columns

__all__ = ["R2D2_DEFAULT_CONFIG", "R2D2Trainer"]
