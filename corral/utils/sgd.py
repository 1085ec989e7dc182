"""RLlib 1.13's SGD helpers: ``standardized``, ``minibatches``, ``do_minibatch_sgd``."""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from typing import Any

import numpy as np

__all__ = ["do_minibatch_sgd", "minibatches", "standardized"]


def standardized(array: np.ndarray) -> np.ndarray:
    """``(array - mean) / max(1e-4, std)``: zero mean, unit variance (e.g. advantages)."""
    array = np.asarray(array)
    return (array - array.mean()) / max(1e-4, array.std())


def minibatches(samples: Any, sgd_minibatch_size: int, shuffle: bool = True) -> Iterator[Any]:
    """Yields `samples` in slices of `sgd_minibatch_size` rows (all of it when 0).

    The rows are shuffled first, and the slices visited in random order with `shuffle`;
    a batch of RNN sequences (``state_in_0``/``seq_lens``) is sliced along whole
    sequences, unshuffled within.

    Raises:
        NotImplementedError: `samples` is a MultiAgentBatch (as RLlib's).
    """
    from corral.policy.sample_batch import MultiAgentBatch

    if not sgd_minibatch_size:
        yield samples
        return
    if isinstance(samples, MultiAgentBatch):
        raise NotImplementedError("Minibatching not implemented for multi-agent in simple mode")
    seq_lens = samples.get("seq_lens") if hasattr(samples, "get") else None
    if seq_lens is None or len(seq_lens) == 0:
        if shuffle:
            samples = samples.shuffle()
        starts = list(range(0, samples.count, sgd_minibatch_size))
        if shuffle:
            random.shuffle(starts)
        for start in starts:
            yield samples.slice(start, min(start + sgd_minibatch_size, samples.count))
        return
    # Whole sequences: consecutive sequences until a slice holds sgd_minibatch_size rows.
    bounds, start, rows, first = [], 0, 0, 0
    lengths = np.asarray(seq_lens)
    for i, length in enumerate(lengths):
        rows += int(length)
        if rows >= sgd_minibatch_size or i == len(lengths) - 1:
            end = start + rows
            bounds.append((start, end, first, i + 1))
            start, rows, first = end, 0, i + 1
    if shuffle:
        random.shuffle(bounds)
    for i, j, si, sj in bounds:
        yield _slice_sequences(samples, i, j, si, sj, len(lengths))


def _slice_sequences(samples: Any, i: int, j: int, si: int, sj: int, num_seqs: int) -> Any:
    """Rows ``i:j``; per-sequence columns (``seq_lens``, RNN states) ``si:sj``."""
    from corral.policy.sample_batch import SampleBatch

    out = {}
    for key, value in samples.items():
        per_sequence = key == "seq_lens" or (key.startswith("state_in_") and len(value) == num_seqs)
        out[key] = value[si:sj] if per_sequence else value[i:j]
    return SampleBatch(out)


def do_minibatch_sgd(
    samples: Any,
    policies: dict[str, Any],
    local_worker: Any,
    num_sgd_iter: int,
    sgd_minibatch_size: int,
    standardize_fields: Sequence[str],
) -> dict[str, Any]:
    """`num_sgd_iter` passes of minibatch SGD over each policy's part of `samples`.

    Returns:
        The learner info (``{policy_id: averaged learn_on_batch results}``).
    """
    from corral.policy.sample_batch import MultiAgentBatch
    from corral.utils.metrics.learner_info import LearnerInfoBuilder

    samples = samples.as_multi_agent()
    builder = LearnerInfoBuilder(num_devices=1)
    for policy_id, policy in policies.items():
        if policy_id not in samples.policy_batches:
            continue
        batch = samples.policy_batches[policy_id]
        for field in standardize_fields:
            batch[field] = standardized(batch[field])
        max_seq_len = policy.config.get("model", {}).get("max_seq_len", 0)
        if policy.is_recurrent() and max_seq_len > sgd_minibatch_size:
            raise ValueError(
                f"`sgd_minibatch_size` ({sgd_minibatch_size}) cannot be smaller than "
                f"`max_seq_len` ({max_seq_len})."
            )
        for _ in range(num_sgd_iter):
            for minibatch in minibatches(batch, sgd_minibatch_size):
                results = local_worker.learn_on_batch(
                    MultiAgentBatch({policy_id: minibatch}, minibatch.count)
                )[policy_id]
                builder.add_learn_on_batch_results(results, policy_id)
    return builder.finalize()
