"""What a `Learner.update` trains on, made ready for the learner: the training data of its
arguments as one batch (`training_data_of`), numpy columns as torch tensors once per update
(`to_tensors`), and recurrent batches cut into padded sequences (`pad_sequences`).

Besides batches and episodes in this process, an update can train on Ray object refs of
them (`batch_refs`, `episodes_refs`: fetched with `ray.get`) and on Ray Data iterators
(`data_iterators`: `num_iters` batches of `minibatch_size` rows from each, see
`rows_of_iterator`).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import torch

from corral.policy.rnn_sequencing import sequence_starts, trajectory_boundaries
from corral.policy.sample_batch import (
    DEFAULT_POLICY_ID,
    MultiAgentBatch,
    SampleBatch,
    concat_samples,
    map_column,
)
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
    episodes_refs: Sequence[ray.ObjectRef] | None = None,
    data_iterators: Sequence[Any] | None = None,
    training_data: TrainingData | None = None,
    *,
    num_iters: int | None = None,
    minibatch_size: int | None = None,
) -> MultiAgentBatch:
    """The training data of an update (`Learner.update`'s arguments) as one batch.

    Args:
        batch: one batch.
        batches: more batches.
        batch_refs: Ray object refs of batches (fetched here with `ray.get`).
        episodes: episodes (trajectories) as batches.
        episodes_refs: Ray object refs of episodes: each ref holds one episode (a batch)
            or a list of them.
        data_iterators: Ray Data iterators (`ray.data.DataIterator`, e.g. a
            `Dataset.iterator()` or one part of `Dataset.streaming_split(n)`); from each,
            `num_iters` batches of `minibatch_size` rows (`rows_of_iterator`).
        training_data: a `TrainingData` (instead of the arguments above it).
        num_iters: batches to take from each data iterator (None: until it ends).
        minibatch_size: rows per batch taken from a data iterator.

    Raises:
        ValueError: there is no data, or `data_iterators` came without a
            `minibatch_size`.
        ImportError: refs or iterators were given and Ray is not installed.
    """
    if batch_refs:
        batches = [*(batches or []), *resolve_refs(batch_refs)]
    if episodes_refs:
        episodes = [*(episodes or []), *_flatten_episodes(resolve_refs(episodes_refs))]
    if data_iterators:
        batches = [
            *(batches or []),
            *(rows_of_iterator(it, num_iters, minibatch_size) for it in data_iterators),
        ]
    return (training_data or TrainingData(batch, batches, episodes)).solve()


def resolve_refs(refs: Sequence[ray.ObjectRef]) -> list[Any]:
    """The objects behind Ray object refs (`ray.get`); needs the `ray` extra."""
    from corral.evaluation.ray_backend import RAY_MISSING, ray_available

    if not ray_available():
        raise ImportError(f"batch_refs and episodes_refs are Ray object refs. {RAY_MISSING}")
    import ray

    return list(ray.get(list(refs)))


def _flatten_episodes(resolved: Sequence[Any]) -> list[SampleBatch | MultiAgentBatch]:
    """Episodes out of what `episodes_refs` held: an episode, or a list of episodes."""
    episodes: list[SampleBatch | MultiAgentBatch] = []
    for item in resolved:
        items = item if isinstance(item, list | tuple) else [item]
        for episode in items:
            if not isinstance(episode, SampleBatch | MultiAgentBatch):
                raise TypeError(
                    "episodes_refs must refer to episodes (SampleBatch or MultiAgentBatch) "
                    f"or lists of them; one holds a {type(episode).__name__}."
                )
            episodes.append(episode)
    return episodes


# Per Ray Data iterator: (rows per batch, the batches still to come of its current pass).
# Kept across updates, so that each update continues where the previous one stopped; a
# new pass starts when one ends (for `streaming_split` parts, in step with the others).
_STREAMS: weakref.WeakKeyDictionary[Any, tuple[int, Iterator[Mapping[str, Any]]]] = (
    weakref.WeakKeyDictionary()
)


def rows_of_iterator(
    iterator: Any,
    num_iters: int | None,
    minibatch_size: int | None,
    prepare: Callable[[Mapping[str, Any]], SampleBatch] | None = None,
) -> SampleBatch:
    """`num_iters` batches of `minibatch_size` rows of a Ray Data iterator, as one batch.

    The iterator's rows come as numpy columns (`iter_batches(batch_format="numpy",
    drop_last=True)`) and are concatenated, so that a learner update with the same
    `minibatch_size` and one epoch runs exactly one minibatch per batch taken, in order.
    Successive calls continue the iterator's pass; when it ends, the next call starts a
    new pass (`num_iters=None`: the rest of the current pass, or a whole new one).

    Args:
        iterator: a `ray.data.DataIterator` (or anything with its `iter_batches`).
        num_iters: batches to take (>= 1), or None for the rest of the pass.
        minibatch_size: rows per batch (>= 1).
        prepare: turns each batch taken (numpy columns) into the rows to train on, with
            the reading process's policy bound to it (an offline algorithm's
            `prepare_rows`: action clipping, the policy's postprocessing); default
            `columns_to_batch`.

    Raises:
        ValueError: a bad `num_iters` / `minibatch_size`, or the iterator holds fewer
            than `minibatch_size` rows.
    """
    if minibatch_size is None or minibatch_size < 1:
        raise ValueError(
            "data_iterators need minibatch_size >= 1 (the rows of each batch taken from an "
            f"iterator), got {minibatch_size!r}."
        )
    if num_iters is not None and num_iters < 1:
        raise ValueError(f"num_iters must be None or >= 1, got {num_iters!r}.")
    if not callable(getattr(iterator, "iter_batches", None)):
        raise TypeError(
            "data_iterators must be Ray Data iterators (ray.data.DataIterator, e.g. "
            f"dataset.iterator() or dataset.streaming_split(n)), got {type(iterator).__name__}."
        )
    parts: list[SampleBatch] = []
    restarted = False
    while num_iters is None or len(parts) < num_iters:
        stream = _STREAMS.get(iterator)
        if stream is None or stream[0] != minibatch_size:
            batches = iterator.iter_batches(
                batch_size=minibatch_size, batch_format="numpy", drop_last=True
            )
            stream = (minibatch_size, iter(batches))
            _STREAMS[iterator] = stream
            if restarted:  # a whole fresh pass gave no batch
                break
            restarted = True
        columns = next(stream[1], None)
        if columns is None:  # the pass ended
            del _STREAMS[iterator]
            if num_iters is None and parts:
                break
            continue
        restarted = False
        parts.append((prepare or columns_to_batch)(columns))
    if not parts:
        raise ValueError(
            f"The Ray Data iterator {iterator!r} holds fewer than minibatch_size="
            f"{minibatch_size} rows: no batch to train on."
        )
    return concat_samples(parts)


def end_streams(iterators: Sequence[Any] | None = None) -> None:
    """Closes the passes `rows_of_iterator` holds open of `iterators` (all of this
    process's when None): Ray Data's batch generators, which would otherwise be finalised
    whenever the garbage collector gets to them, possibly after Ray has shut down and in
    the middle of unrelated code. A closed iterator starts a new pass when read again."""
    for iterator in list(_STREAMS) if iterators is None else iterators:
        batches = _STREAMS.pop(iterator, (0, None))[1]
        close = getattr(batches, "close", None)  # a generator (Ray Data's) has one
        if close is not None:
            close()


def with_reading_policy(
    prepare_rows: Callable[..., SampleBatch] | None, policies: Mapping[str, Any]
) -> Callable[[Mapping[str, Any]], SampleBatch] | None:
    """`prepare_rows(policy, columns)` (`LearnerGroup.update`'s option) as the `prepare`
    of `rows_of_iterator`, with the default policy of the process that reads the rows;
    None without `prepare_rows`."""
    if prepare_rows is None:
        return None
    policy = policies[DEFAULT_POLICY_ID]
    return lambda columns: prepare_rows(policy, columns)


def columns_to_batch(columns: Mapping[str, Any]) -> SampleBatch:
    """A `SampleBatch` of numpy columns from Ray Data (`batch_format="numpy"`).

    Columns of per-row arrays (Ray's object arrays for lists of arrays) are stacked;
    float64 columns become float32, as corral's sampled batches hold them.
    """
    out: dict[str, np.ndarray] = {}
    for name, values in columns.items():
        arr = np.asarray(values)
        if arr.dtype == object and arr.size and isinstance(arr.flat[0], np.ndarray | list):
            arr = np.stack([np.asarray(v) for v in arr])
        out[name] = arr.astype(np.float32) if arr.dtype == np.float64 else arr
    return SampleBatch(out)


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
    # Multi-agent: the agents of one episode are separate trajectories.
    ids = [eps] + ([batch[SampleBatch.AGENT_INDEX]] if SampleBatch.AGENT_INDEX in batch else [])
    starts = sequence_starts(trajectory_boundaries(n, ids), max_len)
    seq_lens = np.diff(np.append(starts, n))
    slot = np.arange(len(starts) * max_len)
    seq, offset = slot // max_len, slot % max_len
    valid = offset < seq_lens[seq]
    source = np.where(valid, starts[seq] + offset, 0)
    source_t = torch.from_numpy(source)
    rows = {
        k: map_column(lambda t: t.index_select(0, source_t), v)
        for k, v in to_tensors(batch, columns).items()
    }
    rows[SEQ_MASK] = torch.from_numpy(valid)
    per_seq = {
        f"state_in_{i}": torch.from_numpy(batch[f"state_in_{i}"][starts]) for i in range(num_states)
    }
    per_seq[SampleBatch.SEQ_LENS] = torch.from_numpy(seq_lens.astype(np.int32))
    return rows, per_seq


def to_tensors(batch: SampleBatch, columns: Sequence[str] | None) -> dict[str, Any]:
    """The batch's numeric `columns` (all when None) as torch tensors, zero-copy where
    the arrays allow (compressed observation columns unpacked first); a nested column
    (`_disable_action_flattening`'s actions) as the same structure of tensors."""
    keys = batch.keys() if columns is None else [c for c in columns if c in batch]
    out = {}
    for k in keys:
        v = batch[k]
        if is_compressed(v):  # a batch sampled with `compress_observations`
            v = unpack_column(v)
        if isinstance(v, np.ndarray):
            if v.dtype != object:
                out[k] = _tensor(v)
        elif k != SampleBatch.INFOS and isinstance(v, dict | tuple):
            out[k] = map_column(_tensor, v)
    return out


def _tensor(array: np.ndarray) -> torch.Tensor:
    if not array.flags.writeable:  # e.g. zero-copy from Ray's object store
        array = array.copy()
    return torch.from_numpy(np.ascontiguousarray(array))
