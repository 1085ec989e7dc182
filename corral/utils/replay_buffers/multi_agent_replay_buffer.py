"""`MultiAgentReplayBuffer`: one (prioritized) replay buffer per policy id.

With `replay_sequence_length > 1`, each policy's rows are cut into
contiguous sequences of that length (within one trajectory, by `eps_id`;
the last sequence of a trajectory is zero-padded) and a sequence is the unit
that is stored, prioritised and sampled; a sample of `num_items` sequences
comes back flattened (`num_items * replay_sequence_length` rows) with a
`seq_lens` column giving each sequence's unpadded length.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from corral.policy.sample_batch import MultiAgentBatch, SampleBatch
from corral.utils.replay_buffers.prioritized_replay_buffer import (
    BATCH_INDEXES,
    WEIGHTS,
    PrioritizedReplayBuffer,
)
from corral.utils.replay_buffers.replay_buffer import ReplayBuffer

_SEQ_LEN = "_seq_len"  # stored per sequence; returned as `seq_lens`


class MultiAgentReplayBuffer:
    """Replay buffers keyed by policy id, created on the first add for that policy.

    Args:
        capacity: rows (or sequences) per policy buffer.
        prioritized: use `PrioritizedReplayBuffer`s (else uniform `ReplayBuffer`s).
        alpha: prioritisation exponent (`prioritized_replay_alpha`).
        beta: importance-sampling exponent used by `sample` (`prioritized_replay_beta`);
            the attribute may be changed between calls to anneal it.
        eps: added to |td_error| to get a priority (`prioritized_replay_eps`).
        replay_sequence_length: 1 for transitions; > 1 stores sequences (RNNs).
        seed: seed of the buffers' random generators (each policy gets its own stream).
    """

    def __init__(
        self,
        capacity: int,
        prioritized: bool = False,
        alpha: float = 0.6,
        beta: float = 0.4,
        eps: float = 1e-6,
        replay_sequence_length: int = 1,
        seed: int | None = None,
    ) -> None:
        if replay_sequence_length < 1:
            raise ValueError(f"replay_sequence_length must be >= 1, got {replay_sequence_length}.")
        self.capacity = int(capacity)
        self.prioritized = bool(prioritized)
        self.alpha = float(alpha)
        self.beta = float(beta)
        self.eps = float(eps)
        self.replay_sequence_length = int(replay_sequence_length)
        self.seed = seed
        self.replay_buffers: dict[str, ReplayBuffer] = {}
        self._num_added = 0

    def __len__(self) -> int:
        return sum(len(b) for b in self.replay_buffers.values())

    def _buffer(self, policy_id: str) -> ReplayBuffer:
        buf = self.replay_buffers.get(policy_id)
        if buf is None:
            seed = None if self.seed is None else self.seed + len(self.replay_buffers)
            if self.prioritized:
                buf = PrioritizedReplayBuffer(self.capacity, alpha=self.alpha, seed=seed)
            else:
                buf = ReplayBuffer(self.capacity, seed=seed)
            self.replay_buffers[policy_id] = buf
        return buf

    def add(self, batch: SampleBatch | MultiAgentBatch) -> None:
        """Adds each policy's rows to that policy's buffer."""
        ma_batch = batch.as_multi_agent()
        self._num_added += ma_batch.env_steps()
        for pid, policy_batch in ma_batch.policy_batches.items():
            if policy_batch.count == 0:
                continue
            if self.replay_sequence_length > 1:
                policy_batch = _to_sequences(policy_batch, self.replay_sequence_length)
            self._buffer(pid).add(policy_batch)

    def sample(self, num_items: int, policy_ids: list[str] | None = None) -> MultiAgentBatch:
        """`num_items` rows (or sequences) from each policy's buffer."""
        out = {}
        for pid in policy_ids or list(self.replay_buffers):
            buf = self.replay_buffers.get(pid)
            if buf is None or len(buf) == 0:
                continue
            if isinstance(buf, PrioritizedReplayBuffer):
                sample = buf.sample(num_items, beta=self.beta)
            else:
                sample = buf.sample(num_items)
            if self.replay_sequence_length > 1:
                sample = _from_sequences(sample)
            out[pid] = sample
        return MultiAgentBatch(out, max((b.count for b in out.values()), default=0))

    def update_priorities(self, prio_dict: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
        """Sets priorities |td_error| + eps for each policy's sampled indexes.

        With sequences, pass one index per sequence (`batch_indexes` of its
        first row) and one TD error per row; a sequence gets its mean |td|.
        """
        for pid, (idxes, td_errors) in prio_dict.items():
            buf = self.replay_buffers.get(pid)
            if not isinstance(buf, PrioritizedReplayBuffer):
                continue
            idxes = np.asarray(idxes).reshape(-1)
            priorities = np.abs(np.asarray(td_errors, dtype=np.float64).reshape(-1))
            if self.replay_sequence_length > 1 and len(priorities) != len(idxes):
                idxes = idxes[:: self.replay_sequence_length]
                priorities = priorities.reshape(len(idxes), -1).mean(axis=1)
            buf.update_priorities(idxes, priorities + self.eps)

    def stats(self) -> dict[str, Any]:
        return {
            "num_added": self._num_added,
            "policies": {pid: b.stats() for pid, b in self.replay_buffers.items()},
        }

    def get_state(self) -> dict[str, Any]:
        return {
            "num_added": self._num_added,
            "beta": self.beta,
            "buffers": {pid: b.get_state() for pid, b in self.replay_buffers.items()},
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self.replay_buffers = {}
        for pid, buf_state in state["buffers"].items():
            self._buffer(pid).set_state(buf_state)
        self._num_added = int(state.get("num_added", 0))
        self.beta = float(state.get("beta", self.beta))


def _to_sequences(batch: SampleBatch, length: int) -> SampleBatch:
    """Rows -> sequences: columns become [num_seqs, length, ...], zero-padded."""
    starts: list[int] = []
    lens: list[int] = []
    for trajectory_start, trajectory_end in _trajectory_bounds(batch):
        for s in range(trajectory_start, trajectory_end, length):
            starts.append(s)
            lens.append(min(length, trajectory_end - s))
    offsets = np.arange(length)
    rows = np.asarray(starts)[:, None] + offsets[None, :]
    valid = offsets[None, :] < np.asarray(lens)[:, None]
    rows = np.where(valid, rows, 0)
    out = {}
    for k, v in batch.items():
        if k in (SampleBatch.INFOS, SampleBatch.SEQ_LENS):
            continue
        seq = v[rows]
        seq[~valid] = 0
        out[k] = seq
    out[_SEQ_LEN] = np.asarray(lens, dtype=np.int32)
    return SampleBatch(out)


def _from_sequences(sample: SampleBatch) -> SampleBatch:
    seq_lens = sample.pop(_SEQ_LEN)
    num_seqs = len(seq_lens)
    per_seq = (BATCH_INDEXES, WEIGHTS)
    out = SampleBatch(
        {k: v.reshape(-1, *v.shape[2:]) for k, v in sample.items() if k not in per_seq}
    )
    length = out.count // max(num_seqs, 1)
    for k in per_seq:
        if k in sample:
            out[k] = np.repeat(sample[k], length)
    out[SampleBatch.SEQ_LENS] = seq_lens
    return out


def _trajectory_bounds(batch: SampleBatch) -> list[tuple[int, int]]:
    if SampleBatch.EPS_ID not in batch:
        return [(0, batch.count)]
    eps = batch[SampleBatch.EPS_ID]
    cuts = np.flatnonzero(eps[1:] != eps[:-1]) + 1
    bounds = [0, *cuts.tolist(), len(eps)]
    return list(zip(bounds[:-1], bounds[1:]))
