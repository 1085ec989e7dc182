"""Sampling building blocks (RLlib 1.13's `execution.rollout_ops`).

`synchronous_parallel_sample` and `standardize_fields` serve `training_iteration()`;
`ParallelRollouts`, `AsyncGradients`, `ConcatBatches`, `SelectExperiences` and
`StandardizeFields` are the operators of execution plans (`corral.execution.local_iterator`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from corral.evaluation.backend import WorkerFailure, wait_all
from corral.execution.common import (
    GRAD_WAIT_TIMER,
    SAMPLE_TIMER,
    StepCount,
    _check_sample_batch_type,
    _get_shared_metrics,
    count_sampled,
    count_sampled_in_plan,
    learner_info_by_policy,
)
from corral.execution.local_iterator import LocalIterator, ParallelIterator, from_actors
from corral.policy.sample_batch import (
    DEFAULT_POLICY_ID,
    MultiAgentBatch,
    SampleBatch,
    concat_samples,
)
from corral.utils.metrics.learner_info import LEARNER_INFO

logger = logging.getLogger(__name__)

_ROLLOUT_MODES = ("bulk_sync", "async", "raw")


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
    # The trainer's "sample" timer, unless a `with` block of it (a 1.13-style training
    # step of one's own) times this call already.
    timers = getattr(worker_set, "timers", None)
    timer = None if timers is None else timers[SAMPLE_TIMER]
    if timer is None or timer.running:
        return _sample_rounds(worker_set, max_env_steps, max_agent_steps, concat)
    start = time.perf_counter()
    out = _sample_rounds(worker_set, max_env_steps, max_agent_steps, concat)
    timer.push(time.perf_counter() - start)
    timer.push_units_processed(sum(b.count for b in out) if isinstance(out, list) else out.count)
    return out


def _sample_rounds(
    worker_set: Any, max_env_steps: int | None, max_agent_steps: int | None, concat: bool
) -> Any:
    """`synchronous_parallel_sample`'s rounds of sampling (its arguments checked)."""
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


# --------------------------------------------------------------------------------------
# Execution-plan operators
# --------------------------------------------------------------------------------------


def _report_sampled(batch: Any) -> Any:
    count_sampled_in_plan(_get_shared_metrics().counters, batch)
    return batch


def ParallelRollouts(  # noqa: N802 (RLlib's name)
    workers: Any, *, mode: str = "bulk_sync", num_async: int = 1
) -> LocalIterator[Any] | ParallelIterator[Any]:
    """The batches the rollout workers sample, one per `next()`.

    Syncs the local worker's weights to the workers first. Counts the sampled steps in
    the plan's counters (`num_env_steps_sampled`, `num_agent_steps_sampled` and RLlib's
    `num_steps_sampled`). With no remote workers, the local worker samples, whatever
    the mode.

    Args:
        workers: the `WorkerSet`.
        mode: "bulk_sync": one `sample()` of every worker, concatenated; "async": each
            worker's batches as they come (`num_async` requests in flight per worker;
            `metrics.current_actor` is the batch's worker); "raw": the
            `ParallelIterator` over the workers itself (the caller gathers it and counts
            the steps).
        num_async: requests in flight per worker in "async" mode.

    Raises:
        ValueError: an unknown `mode`.
    """
    if mode not in _ROLLOUT_MODES:
        raise ValueError(f"mode must be one of {list(_ROLLOUT_MODES)}, got {mode!r}")
    workers.sync_weights()
    if not workers.remote_workers():

        def local_samples(_timeout: float | None) -> Iterator[Any]:
            while True:
                yield workers.local_worker().sample()

        return LocalIterator(local_samples, name="ParallelRollouts[local]").for_each(
            _report_sampled
        )
    if mode == "bulk_sync":

        def bulk_samples(_timeout: float | None) -> Iterator[Any]:
            while True:
                yield synchronous_parallel_sample(workers)

        return LocalIterator(bulk_samples, name="ParallelRollouts[bulk_sync]").for_each(
            _report_sampled
        )
    rollouts = from_actors(workers.remote_workers())
    if mode == "async":
        return rollouts.gather_async(num_async=num_async).for_each(_report_sampled)
    return rollouts


def _samples_to_grads(samples: Any) -> tuple[Any, StepCount]:
    """On a rollout worker: the gradients (and learner info) of its policies on
    `samples`, with the batch's steps."""
    from corral.evaluation.rollout_worker import get_global_worker

    worker = get_global_worker()
    if worker is None:
        raise RuntimeError("AsyncGradients: no rollout worker in this process.")
    return worker.compute_gradients(samples), StepCount(samples.env_steps(), samples.agent_steps())


class _RecordGradients:
    """Counts the sampled steps of each `(gradients, info), steps` item, records the
    learner info and the wait for it; passes on `(gradients, env steps)`."""

    def __init__(self) -> None:
        self.fetch_start_time = time.perf_counter()

    def _on_fetch_start(self) -> None:
        self.fetch_start_time = time.perf_counter()

    def __call__(self, item: tuple[tuple[Any, dict], StepCount]) -> tuple[Any, int]:
        (grads, info), steps = item
        metrics = _get_shared_metrics()
        count_sampled_in_plan(metrics.counters, steps)
        metrics.info[LEARNER_INFO] = learner_info_by_policy(info)
        metrics.timers[GRAD_WAIT_TIMER].push(time.perf_counter() - self.fetch_start_time)
        return grads, steps.env_steps()


def AsyncGradients(workers: Any) -> LocalIterator[tuple[Any, int]]:  # noqa: N802
    """`(gradients, env steps)` items: each remote worker samples and computes its
    policies' gradients on the batch (A3C), handed on as they come (`current_actor`: the
    worker; apply them with `ApplyGradients(workers, update_all=False)`). With no remote
    workers, the local worker does both.

    Gradients are a list (one array per parameter) for a `SampleBatch`, a dict by policy
    id for a `MultiAgentBatch` (`RolloutWorker.compute_gradients`). Counts the sampled
    steps, sets `info["learner"]` and times the wait (`grad_wait`).
    """
    workers.sync_weights()
    if not workers.remote_workers():
        local = workers.local_worker()

        def local_grads(_timeout: float | None) -> Iterator[Any]:
            while True:
                samples = local.sample()
                yield (
                    local.compute_gradients(samples),
                    StepCount(samples.env_steps(), samples.agent_steps()),
                )

        grads: LocalIterator[Any] = LocalIterator(local_grads, name="AsyncGradients[local]")
    else:
        grads = from_actors(workers.remote_workers()).for_each(_samples_to_grads).gather_async()
    return grads.for_each(_RecordGradients())


class ConcatBatches:
    """Collects batches until they hold `min_batch_size` steps, then returns them
    concatenated; use with `combine()` (it returns `[]` or `[batch]`).

    Args:
        min_batch_size: steps per output batch (at least).
        count_steps_by: "env_steps" or "agent_steps" (needs `MultiAgentBatch`es).
    """

    def __init__(self, min_batch_size: int, count_steps_by: str = "env_steps") -> None:
        if count_steps_by not in ("env_steps", "agent_steps"):
            raise ValueError(
                f"count_steps_by must be 'env_steps' or 'agent_steps', got {count_steps_by!r}"
            )
        self.min_batch_size = min_batch_size
        self.count_steps_by = count_steps_by
        self.buffer: list[Any] = []
        self.count = 0
        self.last_batch_time = time.perf_counter()

    def __call__(self, batch: Any) -> list[Any]:
        _check_sample_batch_type(batch)
        if self.count_steps_by == "env_steps":
            size = batch.env_steps()
        else:
            if not isinstance(batch, MultiAgentBatch):
                raise ValueError(
                    "ConcatBatches(count_steps_by='agent_steps') needs MultiAgentBatches, "
                    f"got {type(batch).__name__}."
                )
            size = batch.agent_steps()
        if size == 0:  # an empty dummy batch
            return []
        self.count += size
        self.buffer.append(batch)
        if self.count < self.min_batch_size:
            return []
        if self.count > 2 * self.min_batch_size:
            logger.info(
                "Collected more training samples than expected (actual=%d, expected=%d): "
                "rollout_fragment_length * num_envs_per_worker * num_workers may be large "
                "next to train_batch_size.",
                self.count,
                self.min_batch_size,
            )
        out = concat_samples(self.buffer)
        now = time.perf_counter()
        timer = _get_shared_metrics().timers[SAMPLE_TIMER]
        timer.push(now - self.last_batch_time)
        timer.push_units_processed(self.count)
        self.last_batch_time = now
        self.buffer = []
        self.count = 0
        return [out]


class SelectExperiences:
    """Keeps the batches of some policies: those in `policy_ids`, or those the
    `local_worker` trains (`is_policy_to_train`). A `SampleBatch` passes unchanged."""

    def __init__(self, policy_ids: Any = None, local_worker: Any = None) -> None:
        if policy_ids is not None and not isinstance(policy_ids, list | set | tuple | frozenset):
            raise ValueError(
                f"SelectExperiences: `policy_ids` must be a list/set/tuple, got {policy_ids!r}."
            )
        if policy_ids is None and local_worker is None:
            raise ValueError("Must provide either one of `policy_ids` or `local_worker` args!")
        self.policy_ids = policy_ids
        self.local_worker = local_worker

    def __call__(self, samples: Any) -> Any:
        _check_sample_batch_type(samples)
        if not isinstance(samples, MultiAgentBatch):
            return samples
        if self.local_worker is not None:
            keep = {
                pid: b
                for pid, b in samples.policy_batches.items()
                if self.local_worker.is_policy_to_train(pid, samples)
            }
        else:
            wanted = set(self.policy_ids or ())
            keep = {pid: b for pid, b in samples.policy_batches.items() if pid in wanted}
        return MultiAgentBatch(keep, samples.count)


class StandardizeFields:
    """Shifts and scales the columns `fields` of each policy's batch to mean 0, std 1
    (e.g. advantages), in place.

    Raises:
        KeyError: a policy's batch lacks one of the fields.
    """

    def __init__(self, fields: list[str]) -> None:
        self.fields = list(fields)

    def __call__(self, samples: Any) -> Any:
        _check_sample_batch_type(samples)
        batches = (
            samples.policy_batches
            if isinstance(samples, MultiAgentBatch)
            else {DEFAULT_POLICY_ID: samples}
        )
        for pid, batch in batches.items():
            for field in self.fields:
                if field not in batch:
                    raise KeyError(
                        f"`{field}` not found in the SampleBatch of policy `{pid}`: does the "
                        f"policy add `{field}` in its `postprocess_trajectory`, or should it "
                        "not be trained at all (`multiagent.policies_to_train`)?"
                    )
        return standardize_fields(samples, self.fields)


__all__ = [
    "AsyncGradients",
    "ConcatBatches",
    "ParallelRollouts",
    "SampleBatch",
    "SelectExperiences",
    "StandardizeFields",
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
