"""Sampling building blocks of `training_iteration()` (RLlib 1.13's `execution.rollout_ops`).

RLlib's iterator-based execution-plan operators (`ParallelRollouts`, `ConcatBatches`, ...)
are not built; their names are served by `corral._surface`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from corral.evaluation.backend import WorkerFailure, wait_all
from corral.execution.common import count_sampled
from corral.policy.sample_batch import MultiAgentBatch, SampleBatch, concat_samples


def synchronous_parallel_sample(
    worker_set: Any = None,
    max_env_steps: int | None = None,
    max_agent_steps: int | None = None,
    concat: bool = True,
    *,
    remote_fn: Any = None,
) -> Any:
    """Samples on all remote workers at once (the local worker when there are none).

    Rounds of one `sample()` per worker repeat until at least `max_env_steps` env steps,
    or `max_agent_steps` agent steps (one per agent action), are collected; with neither,
    one round is taken (RLlib 1.13's behaviour).

    Args:
        worker_set: the `WorkerSet` to sample from (RLlib 1.13 passes it by keyword).
        max_env_steps: env steps to collect at least.
        max_agent_steps: agent steps to collect at least (give at most one of the two).
        concat: True returns one concatenated batch, False the list of the batches
            (one per worker and round).
        remote_fn: not supported (RLlib 1.13 does not use it either).

    Returns:
        A `SampleBatch`/`MultiAgentBatch`, or a list of them when `concat` is False.

    When a remote worker fails, every batch of this call is thrown away (the
    trainer retries the step), so the other workers are told to forget the
    episodes that finished in them: `episodes_this_iter` counts only episodes
    whose steps were trained on.
    """
    if worker_set is None:
        raise TypeError("synchronous_parallel_sample() needs `worker_set` (a WorkerSet).")
    if remote_fn is not None:
        raise NotImplementedError("synchronous_parallel_sample(remote_fn=...) is not built.")
    if max_env_steps is not None and max_agent_steps is not None:
        raise ValueError("Give at most one of `max_env_steps` and `max_agent_steps`.")
    by_agent = max_agent_steps is not None
    target = (max_agent_steps if by_agent else max_env_steps) or 0
    batches: list[Any] = []
    steps = 0
    samples_sent: dict[Any, int] = {}
    while True:
        remote = worker_set.remote_workers()
        if remote:
            futures = [w.call("sample") for w in remote]
            for w in remote:
                samples_sent[w] = samples_sent.get(w, 0) + 1
            try:
                new = wait_all(futures)
            except WorkerFailure as e:
                _discard_sampled_episodes(samples_sent, failed=e.handle)
                raise
        else:
            new = [worker_set.local_worker().sample()]
        batches.extend(new)
        steps += sum(b.agent_steps() if by_agent else b.env_steps() for b in new)
        if steps >= target:
            return concat_samples(batches) if concat else batches


def sample_train_batch(trainer: Any) -> MultiAgentBatch:
    """`train_batch_size` steps from the trainer's workers, counted as sampled.

    The steps are env steps, or agent steps where `multiagent/count_steps_by` says so
    (the on-policy algorithms' sampling, RLlib 1.13's `synchronous_parallel_sample` call
    of their `training_iteration()`).

    Args:
        trainer: the trainer (its `config`, `workers` and `_counters`).

    Returns:
        The concatenated batch, as a `MultiAgentBatch`.
    """
    config = trainer.config
    size = config["train_batch_size"]
    by_agent = config["multiagent"]["count_steps_by"] == "agent_steps"
    batch = synchronous_parallel_sample(
        trainer.workers,
        max_env_steps=None if by_agent else size,
        max_agent_steps=size if by_agent else None,
    )
    count_sampled(trainer._counters, batch)
    return batch.as_multi_agent()


def standardize_fields(samples: Any, fields: list[str]) -> Any:
    """Shifts and scales each column in `fields` to mean 0, std 1 (per policy batch),
    in place; returns `samples`."""
    wrapped = not isinstance(samples, MultiAgentBatch)
    batches = {"": samples} if wrapped else samples.policy_batches
    for batch in batches.values():
        for field in fields:
            if field in batch:
                values = np.asarray(batch[field])
                std = max(1e-4, float(values.std()))
                batch[field] = ((values - values.mean()) / std).astype(values.dtype)
    return samples


__all__ = [
    "SampleBatch",
    "sample_train_batch",
    "standardize_fields",
    "synchronous_parallel_sample",
]


def _discard_sampled_episodes(samples_sent: dict[Any, int], failed: Any) -> None:
    """Asks each worker but `failed` to forget the episodes of the samples sent to it
    in this call (a worker runs requests in order, so this runs after them)."""
    for w, n in samples_sent.items():
        if w is not failed:
            # Not waited for: no reply is needed, and a worker that is unwell
            # too is handled by the recovery that follows.
            w.call("discard_metrics_of_last_samples", n)
