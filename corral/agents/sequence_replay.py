"""Replay of whole sequences for the recurrent off-policy trainers (R2D2, RNNSAC).

`SequenceReplayMixin` overrides the replay hooks of `OffPolicyTrainer`: the buffer stores
sequences of `replay_buffer_config.replay_sequence_length` = `model.max_seq_len + burn_in`
steps cut from complete episodes, each with the recurrent state recorded at its first step
(`state_in_<i>`), and replays them whole; with prioritized replay, a sequence's priority is
the mean |TD error| of its trained steps.

The stored sequences do not overlap (RLlib 1.13's buffer overlaps consecutive ones by
`burn_in` steps): the first `burn_in` steps of each sequence only warm up the recurrent
state and are never trained on.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from corral.policy.sample_batch import MultiAgentBatch, SampleBatch
from corral.utils.config_spec import Rule
from corral.utils.replay_buffers import BATCH_INDEXES, N_STEP

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


def sequence_rules(algorithm: str) -> tuple[Rule, ...]:
    """The config checks of a trainer that replays sequences: whole episodes, and
    sequences of at least two steps (step t trains on step t + 1 of its sequence)."""
    return (
        Rule(
            lambda c: c.get("batch_mode") == "complete_episodes",
            f"{algorithm} needs batch_mode='complete_episodes', got {{batch_mode!r}}.",
        ),
        Rule(
            lambda c: c["model"]["max_seq_len"] >= 2,
            f"{algorithm} trains step t on step t + 1 of its sequence: model.max_seq_len "
            "must be >= 2, got {model[max_seq_len]}.",
        ),
    )


def set_replay_sequence_length(config: dict) -> int:
    """Sets `replay_buffer_config.replay_sequence_length` to `model.max_seq_len + burn_in`
    (RLlib 1.13's rule) and returns it.

    Raises:
        ValueError: the config sets another sequence length (-1 leaves it to this rule).
    """
    length = int(config["burn_in"]) + int(config["model"]["max_seq_len"])
    buffer_config = config["replay_buffer_config"]
    if buffer_config.get("replay_sequence_length", -1) not in (-1, length):
        raise ValueError(
            "`replay_buffer_config.replay_sequence_length` is set automatically to "
            f"model.max_seq_len + burn_in = {length}; leave it at -1 (got "
            f"{buffer_config['replay_sequence_length']!r})."
        )
    buffer_config["replay_sequence_length"] = length
    return length


class SequenceReplayMixin:
    """The replay hooks of `OffPolicyTrainer` for sequences (put it before the trainer
    class in the bases): what is stored, what is replayed, and the priorities."""

    config: dict
    local_replay_buffer: Any
    workers: Any

    def replay_columns(self, batch: SampleBatch | MultiAgentBatch) -> MultiAgentBatch:
        """The columns stored (`SEQUENCE_COLUMNS` and the `state_in_<i>`), cut into
        sequences by the buffer."""
        return sequence_columns(batch)

    def replay(self, num_updates: int) -> tuple[MultiAgentBatch, MultiAgentBatch, int]:
        """Whole sequences: `train_batch_size // replay_sequence_length` per update."""
        length = self.local_replay_buffer.replay_sequence_length
        sequences_per_update = max(1, self.config["train_batch_size"] // length)
        replayed = self.local_replay_buffer.sample(num_updates * sequences_per_update)
        return replayed, as_learner_sequences(replayed), sequences_per_update * length

    def _update_priorities(self, replayed: MultiAgentBatch, train_batch: MultiAgentBatch) -> None:
        """Each replayed sequence's priority from the mean |TD error| of its steps in the
        update's losses (`pop_td_errors`, where the policy logs them), else recomputed
        (`compute_td_error`), as also where the log is not finite."""
        local = self.workers.local_worker()
        length = self.local_replay_buffer.replay_sequence_length
        updates = {}
        for pid, policy_batch in train_batch.policy_batches.items():
            if not local.is_policy_to_train(pid, train_batch):
                continue
            policy: Any = local.get_policy(pid)
            indexes = replayed.policy_batches[pid][BATCH_INDEXES][::length]
            pop = getattr(policy, "pop_td_errors", None)
            td_error = pop() if pop is not None else None
            if (
                td_error is None
                or len(td_error) != len(indexes)
                or not math.isfinite(np.add.reduce(td_error, axis=None))
            ):
                td_error = policy.compute_td_error(policy_batch)
            updates[pid] = (indexes, td_error)
        self.local_replay_buffer.update_priorities(updates)


def sequence_columns(batch: SampleBatch | MultiAgentBatch) -> MultiAgentBatch:
    """The columns stored (`SEQUENCE_COLUMNS` and the `state_in_<i>`) of each policy's
    rows."""
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


__all__ = [
    "SEQUENCE_COLUMNS",
    "SequenceReplayMixin",
    "as_learner_sequences",
    "sequence_columns",
    "sequence_rules",
    "set_replay_sequence_length",
]
