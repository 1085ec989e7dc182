"""Recurrent batches as padded sequences (RLlib 1.13's `rnn_sequencing`).

A batch of steps is cut into sequences: a new one starts where the trajectory changes
(episode, unroll or agent) and every `max_seq_len` steps into one. Each sequence is
zero-padded at its end to the same length `T`, so that `[B * T, ...]` rows become
`[B, T, ...]` with `add_time_dimension`; the recurrent state enters once per sequence
(`state_in_<i>` at its first step) and `seq_lens` says how many steps are real.
corral's learner pads its recurrent training batches with the same cut
(`corral.core.learner.training_data.pad_sequences`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from corral.policy.sample_batch import SampleBatch
from corral.utils._nest import flatten


def trajectory_boundaries(n: int, id_columns: Sequence[Any]) -> np.ndarray:
    """`[n]` bools: True where a row starts a new trajectory (row 0, and wherever one of
    `id_columns`, e.g. `eps_id` and `agent_index`, changes)."""
    new = np.zeros(n, np.bool_)
    if n:
        new[0] = True
    for ids in id_columns:
        ids = np.asarray(ids)
        new[1:] |= ids[1:] != ids[:-1]
    return new


def sequence_starts(boundaries: np.ndarray, max_seq_len: int) -> np.ndarray:
    """The rows where sequences start: each trajectory start (`boundaries`) and every
    `max_seq_len` rows into a trajectory."""
    index = np.arange(len(boundaries))
    trajectory_start = np.maximum.accumulate(np.where(boundaries, index, 0))
    return np.flatnonzero(boundaries | ((index - trajectory_start) % max_seq_len == 0))


def add_time_dimension(
    padded_inputs: Any,
    seq_lens: Any = None,
    time_major: bool = False,
    *,
    max_seq_len: int | None = None,
    framework: str = "torch",
) -> Any:
    """`[B * T, ...] -> [B, T, ...]`, or `[T * B, ...] -> [T, B, ...]` when `time_major`.

    The rows must already be padded so that every sequence takes `T` rows (consecutive
    ones, unless `time_major`). Give `seq_lens` (`B = len(seq_lens)`) or, as RLlib 1.13
    does, `max_seq_len` (`T`).

    Raises:
        ValueError: the rows do not split into equal sequences, or neither (or both) of
            `seq_lens` and `max_seq_len` is given.
    """
    if framework != "torch":
        raise ValueError(f"add_time_dimension(framework={framework!r}): corral runs on torch only.")
    if (seq_lens is None) == (max_seq_len is None):
        raise ValueError("add_time_dimension takes seq_lens or max_seq_len (one of them).")
    rows = int(padded_inputs.shape[0])
    if seq_lens is not None:
        batch = int(seq_lens.shape[0])
        if batch == 0 or rows % batch:
            raise ValueError(
                f"add_time_dimension: {rows} rows cannot hold {batch} equally padded "
                f"sequences (seq_lens={seq_lens.tolist()})."
            )
        length = rows // batch
    else:
        length = int(max_seq_len)  # type: ignore[arg-type]
        if length < 1 or rows % length:
            raise ValueError(
                f"add_time_dimension: {rows} rows do not split into sequences of "
                f"max_seq_len={max_seq_len}."
            )
        batch = rows // length
    shape = (length, batch) if time_major else (batch, length)
    return padded_inputs.reshape(*shape, *padded_inputs.shape[1:])


def chop_into_sequences(
    *,
    feature_columns: Sequence[Any],
    state_columns: Sequence[Any],
    max_seq_len: int,
    episode_ids: Any = None,
    unroll_ids: Any = None,
    agent_indices: Any = None,
    dynamic_max: bool = True,
    shuffle: bool = False,
    seq_lens: Any = None,
    states_already_reduced_to_init: bool = False,
    handle_nested_data: bool = False,
    _extra_padding: int = 0,
) -> tuple[list[Any], list[np.ndarray], np.ndarray]:
    """Cuts the rows into sequences of at most `max_seq_len` steps and zero-pads each.

    Args:
        feature_columns: per-row columns (nested structures of them with
            `handle_nested_data`, whose columns come back as lists of their padded
            leaves, dicts in sorted key order: RLlib 1.13's `tree.flatten`).
        state_columns: the recurrent states, per row (the first row of each sequence is
            kept), or already one per sequence (`states_already_reduced_to_init`).
        max_seq_len: the longest sequence.
        episode_ids, unroll_ids, agent_indices: where trajectories change (any of them).
        dynamic_max: pad to the longest sequence found (plus `_extra_padding`) instead of
            `max_seq_len`.
        shuffle: the sequences in a random order.
        seq_lens: the sequences' lengths, when the rows are already cut.

    Returns:
        `(padded feature columns [num_seqs * T, ...], initial states [num_seqs, ...],
        seq_lens [num_seqs])`, e.g. episode ids `[1, 1, 5, 5, 5, 5]`, a feature
        `[4, 4, 8, 8, 8, 8]` and `max_seq_len=3` give `[4, 4, 0, 8, 8, 8, 8, 0, 0]`
        and seq_lens `[2, 3, 1]`.
    """
    # Each column's leaves (RLlib: a list is one column, not a structure).
    columns = [
        flatten(np.asarray(c) if isinstance(c, list) else c) if handle_nested_data else [c]
        for c in feature_columns
    ]
    n = (
        len(columns[0][0])
        if columns
        else len(np.asarray(episode_ids if episode_ids is not None else []))
    )
    if seq_lens is None or len(seq_lens) == 0:
        ids = [c for c in (episode_ids, unroll_ids, agent_indices) if c is not None]
        starts = sequence_starts(trajectory_boundaries(n, ids), max_seq_len)
        lengths = np.diff(np.append(starts, n)).astype(np.int32)
    else:
        lengths = np.asarray(seq_lens, np.int32)
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
    length = int(lengths.max()) + _extra_padding if dynamic_max and len(lengths) else max_seq_len
    slot = np.arange(len(lengths) * length)
    seq, offset = slot // length, slot % length
    valid = offset < lengths[seq]
    source = (starts[seq] + offset)[valid]

    def pad(column: Any) -> np.ndarray:
        column = np.asarray(column)
        out = np.zeros((len(slot), *column.shape[1:]), column.dtype)
        out[valid] = column[source]
        return out

    order = np.random.permutation(len(lengths)) if shuffle else None

    def reorder(padded: np.ndarray) -> np.ndarray:
        if order is None:
            return padded
        return padded.reshape(len(lengths), length, *padded.shape[1:])[order].reshape(padded.shape)

    padded = [[reorder(pad(leaf)) for leaf in leaves] for leaves in columns]
    features: list[Any] = padded if handle_nested_data else [leaves[0] for leaves in padded]
    initial = [
        np.asarray(s) if states_already_reduced_to_init else np.asarray(s)[starts]
        for s in state_columns
    ]
    if order is not None:
        initial = [s[order] for s in initial]
        lengths = lengths[order]
    return features, initial, lengths


def pad_batch_to_sequences_of_same_size(
    batch: SampleBatch,
    max_seq_len: int,
    shuffle: bool = False,
    batch_divisibility_req: int = 1,
    feature_keys: Sequence[str] | None = None,
    view_requirements: Mapping[str, Any] | None = None,
) -> None:
    """Pads `batch` in place to sequences of one length, for a recurrent (or attention)
    model, or to `batch_divisibility_req` rows per sequence for a multi-agent batch that
    needs it; a batch that needs neither is left alone (shuffled with `shuffle`).

    After it, the feature columns hold `[num_seqs * T, ...]` rows, `state_in_<i>` one
    row per sequence, `seq_lens` the lengths; `batch.max_seq_len` is `T` and
    `batch.zero_padded` True (a second call does nothing).
    """
    if batch.zero_padded:
        return
    batch.zero_padded = True
    recurrent = "state_in_0" in batch or "state_out_0" in batch
    if batch_divisibility_req > 1:
        agents = batch.get(SampleBatch.AGENT_INDEX)
        single_agent = agents is None or len(agents) == 0 or int(np.max(agents)) == 0
        divisible = batch.count % batch_divisibility_req == 0 and single_agent
    else:
        divisible = True
    already_reduced = False
    if recurrent:
        seq_lens = batch.get(SampleBatch.SEQ_LENS)
        already_reduced = (
            seq_lens is not None
            and "state_in_0" in batch
            and len(batch["state_in_0"]) == len(seq_lens)
        )
        state_view = (view_requirements or {}).get("state_in_0")
        # A state over a range of steps (attention nets) cannot be cut shorter.
        dynamic_max = state_view is None or len(np.atleast_1d(state_view.shift_arr)) == 1
    elif not divisible:
        max_seq_len = batch_divisibility_req
        dynamic_max = False
    else:
        if shuffle:
            shuffled = batch.shuffle()
            batch.clear()
            batch.update(shuffled)
        return
    state_keys = sorted(k for k in batch if k.startswith("state_in_"))
    keys = (
        list(feature_keys)
        if feature_keys
        else [
            k
            for k in batch
            if not k.startswith(("state_in_", "state_out_"))
            and k not in (SampleBatch.SEQ_LENS, SampleBatch.INFOS)
        ]
    )
    infos = batch.get(SampleBatch.INFOS) if SampleBatch.INFOS in batch else None
    features, initial, lengths = chop_into_sequences(
        feature_columns=[batch[k] for k in keys]
        + ([np.arange(len(infos))] if infos is not None else []),
        state_columns=[batch[k] for k in state_keys],
        max_seq_len=max_seq_len,
        episode_ids=batch.get(SampleBatch.EPS_ID),
        unroll_ids=batch.get(SampleBatch.UNROLL_ID),
        agent_indices=batch.get(SampleBatch.AGENT_INDEX),
        dynamic_max=dynamic_max,
        shuffle=shuffle,
        seq_lens=batch.get(SampleBatch.SEQ_LENS),
        states_already_reduced_to_init=already_reduced,
    )
    padded_rows = len(features[0]) if features else 0
    if infos is not None:  # padded rows get empty infos
        index = features.pop()
        valid = _valid_rows(lengths, padded_rows)
        padded_infos = [infos[int(i)] if real else {} for i, real in zip(index, valid)]
        dict.__setitem__(batch, SampleBatch.INFOS, padded_infos)
    for key, column in zip(keys, features):
        dict.__setitem__(batch, key, column)
    for key, state in zip(state_keys, initial):
        dict.__setitem__(batch, key, state)
    dict.__setitem__(batch, SampleBatch.SEQ_LENS, np.asarray(lengths, np.int32))
    batch.max_seq_len = int(padded_rows // len(lengths)) if len(lengths) else max_seq_len


def divisible_train_batch(policy: Any, batch: SampleBatch) -> SampleBatch:
    """The train batch of a feed-forward `policy` with RLlib 1.13's
    `batch_divisibility_req` (`get_batch_divisibility_req`): `batch` itself where that is
    1, the policy is recurrent (the learner cuts its batches into sequences), the batch is
    padded already or its rows divide; else a copy padded to whole chunks of that many
    rows per trajectory (`pad_batch_to_sequences_of_same_size`; the caller's batch is kept).
    """
    req = int(getattr(policy, "batch_divisibility_req", 1))
    if req <= 1 or batch.zero_padded or policy.is_recurrent():
        return batch
    padded = batch.copy(shallow=True)  # (padding puts new columns in; none is changed)
    pad_batch_to_sequences_of_same_size(
        padded,
        max_seq_len=int(policy.config["model"]["max_seq_len"]),
        batch_divisibility_req=req,
        view_requirements=policy.view_requirements,
    )
    return padded


def _valid_rows(lengths: np.ndarray, padded_rows: int) -> np.ndarray:
    """Which of the padded rows are real steps (each sequence's first `length` rows)."""
    if not len(lengths):
        return np.zeros(0, np.bool_)
    length = padded_rows // len(lengths)
    return (np.arange(padded_rows) % length) < np.repeat(lengths, length)


def timeslice_along_seq_lens_with_overlap(
    sample_batch: SampleBatch,
    seq_lens: Sequence[int] | None = None,
    zero_pad_max_seq_len: int = 0,
    pre_overlap: int = 0,
    zero_init_states: bool = True,
) -> list[SampleBatch]:
    """Slices `sample_batch` along its sequences (`seq_lens`, or its own), each slice
    starting `pre_overlap` steps early (a burn-in, as R2D2 uses) and zero-padded to
    `zero_pad_max_seq_len` rows when that is set.

    With `zero_init_states` each slice starts from zero recurrent states (else the
    `state_in_<i>` of the row it starts at).
    """
    lengths = list(seq_lens if seq_lens is not None else sample_batch[SampleBatch.SEQ_LENS])
    plain = SampleBatch({k: v for k, v in sample_batch.items() if k != SampleBatch.SEQ_LENS})
    slices: list[SampleBatch] = []
    start = 0
    for length in lengths:
        begin = max(start - pre_overlap, 0)
        end = start + int(length)
        piece = plain.slice(begin, end).copy()
        if zero_init_states:
            for key in [k for k in piece if k.startswith("state_in_")]:
                dict.__setitem__(piece, key, np.zeros_like(piece[key][:1]))
        else:
            for key in [k for k in piece if k.startswith("state_in_")]:
                dict.__setitem__(piece, key, piece[key][:1])
        dict.__setitem__(piece, SampleBatch.SEQ_LENS, np.array([end - begin], np.int32))
        if zero_pad_max_seq_len:
            piece.right_zero_pad(zero_pad_max_seq_len, exclude_states_and_seq_lens=True)
        slices.append(piece)
        start = end
    return slices
