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

import math
from typing import Any

import numpy as np

from corral.agents.config import merge_trainer_configs
from corral.agents.dqn.dqn import DEFAULT_CONFIG as DQN_DEFAULT_CONFIG
from corral.agents.dqn.dqn import DQNTrainer
from corral.agents.dqn.r2d2_torch_policy import R2D2TorchPolicy
from corral.policy.sample_batch import MultiAgentBatch, SampleBatch
from corral.utils.config_spec import Bool, Float, Int, Rule
from corral.utils.replay_buffers import BATCH_INDEXES, N_STEP

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

# The columns a stored sequence keeps (and its `state_in_<i>`).
SEQUENCE_COLUMNS = (
    SampleBatch.OBS,
    SampleBatch.ACTIONS,
    SampleBatch.REWARDS,
    SampleBatch.TERMINATEDS,
    N_STEP,
    SampleBatch.EPS_ID,
    SampleBatch.PREV_ACTIONS,
    SampleBatch.PREV_REWARDS,
)


class R2D2Trainer(DQNTrainer):
    """Recurrent Experience Replay in Distributed RL (Kapturowski et al. 2019)."""

    _name = "R2D2"
    _default_config = R2D2_DEFAULT_CONFIG
    _config_specs = R2D2_CONFIG_SPECS
    _policy_class = R2D2TorchPolicy
    _config_rules: tuple[Rule, ...] = (
        Rule(
            lambda c: c.get("batch_mode") == "complete_episodes",
            "R2D2 needs batch_mode='complete_episodes', got {batch_mode!r}.",
        ),
        Rule(
            lambda c: c["model"]["max_seq_len"] >= 2,
            "R2D2 trains step t on step t + 1 of its sequence: model.max_seq_len must be "
            ">= 2, got {model[max_seq_len]}.",
        ),
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
        length = int(config["burn_in"]) + int(config["model"]["max_seq_len"])
        buffer_config = config["replay_buffer_config"]
        if buffer_config.get("replay_sequence_length", -1) not in (-1, length):
            raise ValueError(
                "`replay_buffer_config.replay_sequence_length` is set automatically to "
                f"model.max_seq_len + burn_in = {length}; leave it at -1 (got "
                f"{buffer_config['replay_sequence_length']!r})."
            )
        buffer_config["replay_sequence_length"] = length

    def replay_columns(self, batch: SampleBatch | MultiAgentBatch) -> MultiAgentBatch:
        """The columns R2D2 stores (`SEQUENCE_COLUMNS` and the `state_in_<i>`), cut into
        sequences by the buffer."""
        return _sequence_columns(batch)

    def replay(self, num_updates: int) -> tuple[MultiAgentBatch, MultiAgentBatch, int]:
        """Whole sequences: `train_batch_size // replay_sequence_length` per update."""
        length = self.local_replay_buffer.replay_sequence_length
        sequences_per_update = max(1, self.config["train_batch_size"] // length)
        replayed = self.local_replay_buffer.sample(num_updates * sequences_per_update)
        return replayed, as_learner_sequences(replayed), sequences_per_update * length

    def _update_priorities(self, replayed: MultiAgentBatch, train_batch: MultiAgentBatch) -> None:
        """Each replayed sequence's priority from the mean |TD error| of its steps in the
        update's losses (recomputed where a policy logged none, or a non-finite one)."""
        local = self.workers.local_worker()
        length = self.local_replay_buffer.replay_sequence_length
        updates = {}
        for pid, policy_batch in train_batch.policy_batches.items():
            if not local.is_policy_to_train(pid, train_batch):
                continue
            policy: Any = local.get_policy(pid)
            indexes = replayed.policy_batches[pid][BATCH_INDEXES][::length]
            td_error = policy.pop_td_errors()
            if (
                td_error is None
                or len(td_error) != len(indexes)
                or not math.isfinite(np.add.reduce(td_error, axis=None))
            ):
                td_error = policy.compute_td_error(policy_batch)
            updates[pid] = (indexes, td_error)
        self.local_replay_buffer.update_priorities(updates)


def _sequence_columns(batch: SampleBatch | MultiAgentBatch) -> MultiAgentBatch:
    """The columns R2D2 stores (`SEQUENCE_COLUMNS` and the `state_in_<i>`) of each
    policy's rows."""
    ma_batch = batch.as_multi_agent()
    return MultiAgentBatch(
        {
            pid: SampleBatch(
                {k: v for k, v in b.items() if k in SEQUENCE_COLUMNS or k.startswith("state_in_")}
            )
            for pid, b in ma_batch.policy_batches.items()
        },
        ma_batch.env_steps(),
    )


def as_learner_sequences(replayed: MultiAgentBatch) -> MultiAgentBatch:
    """Replayed sequences (rows zero-padded to the sequence length, with `seq_lens`) as the
    learner cuts them: their real rows only, each sequence its own `eps_id`, so that the
    learner pads each sequence again on its own, with its stored `state_in_<i>`."""
    out = {}
    for pid, b in replayed.policy_batches.items():
        seq_lens = np.asarray(b[SampleBatch.SEQ_LENS])
        length = b.count // max(len(seq_lens), 1)
        real = (np.arange(length)[None, :] < seq_lens[:, None]).reshape(-1)
        rows = SampleBatch({k: v[real] for k, v in b.items() if k != SampleBatch.SEQ_LENS})
        rows[SampleBatch.EPS_ID] = np.repeat(np.arange(len(seq_lens)), seq_lens)
        out[pid] = rows
    return MultiAgentBatch(out, replayed.env_steps())


__all__ = ["R2D2_DEFAULT_CONFIG", "R2D2Trainer"]
