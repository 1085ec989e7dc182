"""What a `Learner.update` trains on, made ready for the learner: the training data of its
arguments as one batch (`training_data_of`), numpy columns as torch tensors once per update
(`to_tensors`), and recurrent batches cut into padded sequences (`pad_sequences`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
import torch

from corral.policy.sample_batch import MultiAgentBatch, SampleBatch, concat_samples
from corral.utils.compression import is_compressed, unpack_column

if TYPE_CHECKING:
    import ray

# Column of recurrent training minibatches: True on real steps, False on padding.
SEQ_MASK = "seq_mask"


@dataclass
class TrainingData:
    """What an update trains on: one batch, several, or episodes (trajectories)."""

    batch: SampleBatch | MultiAgentBatch | None = None
    batches: Sequence[SampleBatch | MultiAgentBatch] | None = None
    episodes: Sequence[SampleBatch | MultiAgentBatch] | None = None

    def solve(self) -> MultiAgentBatch:
        """All inputs concatenated into one `MultiAgentBatch`."""
        parts: list[SampleBatch | MultiAgentBatch] = []
        if self.batch is not None:
            parts.append(self.batch)
        parts.extend(self.batches or ())
        parts.extend(self.episodes or ())
        if not parts:
            raise ValueError(
                "Learner.update needs training data: pass `batch`, `batches`, `episodes` "
                "or `training_data`."
            )
        return concat_samples(parts).as_multi_agent()


def training_data_of(
    batch: SampleBatch | MultiAgentBatch | None = None,
    batches: Sequence[SampleBatch | MultiAgentBatch] | None = None,
    batch_refs: Sequence[ray.ObjectRef] | None = None,
    episodes: Sequence[SampleBatch | MultiAgentBatch] | None = None,
    episodes_refs: Sequence[object] | None = None,
    data_iterators: Sequence[object] | None = None,
    training_data: TrainingData | None = None,
) -> MultiAgentBatch:
    """The training data of an update (`Learner.update`'s arguments) as one batch.

    Raises:
        NotImplementedError: `episodes_refs` or `data_iterators` (Ray Data) were given.
        ValueError: there is no data.
    """
    if episodes_refs or data_iterators:
        raise NotImplementedError(
            "episodes_refs and data_iterators (Ray Data iterators) are not implemented "
            "yet; pass batches, or `batch_refs` (Ray object refs of batches)."
        )
    if batch_refs:
        batches = [*(batches or []), *_resolve_refs(batch_refs)]
    return (training_data or TrainingData(batch, batches, episodes)).solve()


def _resolve_refs(refs: Sequence[ray.ObjectRef]) -> list[SampleBatch | MultiAgentBatch]:
    """The batches behind Ray object refs (`ray.get`); needs the `ray` extra."""
    from corral.evaluation.ray_backend import RAY_MISSING, ray_available

    if not ray_available():
        raise ImportError(f"batch_refs are Ray object refs. {RAY_MISSING}")
    import ray

    return list(ray.get(list(refs)))


def pad_sequences(
    batch: SampleBatch, columns: Sequence[str] | None, num_states: int, max_len: int
) -> tuple[dict[str, torch.Tensor], dict[str, torch.Tensor]]:
    """Cuts trajectories (runs of one eps_id) into sequences of <= `max_len`
    steps, each padded to `max_len` rows.

    Returns (row tensors [num_seqs * max_len, ...] incl. `seq_mask`,
    per-sequence tensors: `seq_lens` and the `state_in_<i>` at each start).
    """
    eps = batch[SampleBatch.EPS_ID]
    n = len(eps)
    index = np.arange(n)
    new_trajectory = np.ones(n, bool)
    new_trajectory[1:] = eps[1:] != eps[:-1]
    if SampleBatch.AGENT_INDEX in batch:
        # Multi-agent: the agents of one episode are separate trajectories.
        agents = batch[SampleBatch.AGENT_INDEX]
        new_trajectory[1:] |= agents[1:] != agents[:-1]
    trajectory_start = np.maximum.accumulate(np.where(new_trajectory, index, 0))
    starts = np.flatnonzero(new_trajectory | ((index - trajectory_start) % max_len == 0))
    seq_lens = np.diff(np.append(starts, n))
    slot = np.arange(len(starts) * max_len)
    seq, offset = slot // max_len, slot % max_len
    valid = offset < seq_lens[seq]
    source = np.where(valid, starts[seq] + offset, 0)
    rows = {k: v[source] for k, v in to_tensors(batch, columns).items()}
    rows[SEQ_MASK] = torch.from_numpy(valid)
    per_seq = {
        f"state_in_{i}": torch.from_numpy(batch[f"state_in_{i}"][starts]) for i in range(num_states)
    }
    per_seq[SampleBatch.SEQ_LENS] = torch.from_numpy(seq_lens.astype(np.int32))
    return rows, per_seq


def to_tensors(batch: SampleBatch, columns: Sequence[str] | None) -> dict[str, torch.Tensor]:
    """The batch's numeric `columns` (all when None) as torch tensors, zero-copy where
    the arrays allow (compressed observation columns unpacked first)."""
    keys = batch.keys() if columns is None else [c for c in columns if c in batch]
    out = {}
    for k in keys:
        v = batch[k]
        if is_compressed(v):  # a batch sampled with `compress_observations`
            v = unpack_column(v)
        if isinstance(v, np.ndarray) and v.dtype != object:
            if not v.flags.writeable:  # e.g. zero-copy from Ray's object store
                v = v.copy()
            out[k] = torch.from_numpy(np.ascontiguousarray(v))
    return out
