"""Learning building blocks (RLlib 1.13's `execution.train_ops`).

`train_one_step` / `multi_gpu_train_one_step` serve `training_iteration()`: they train the
local worker's policies through the trainer's `learner_group` (corral's learners), with
RLlib 1.13's arguments and return value, the learner info dict
`{policy_id: {"learner_stats": {...}, "custom_metrics": {...}, ...}}`. Like RLlib's,
they do not sync weights to the workers; the caller does (`trainer.workers.sync_weights()`).

`TrainOneStep`, `MultiGPUTrainOneStep`, `ComputeGradients`, `ApplyGradients`,
`AverageGradients` and `UpdateTargetNetwork` are the operators of execution plans
(`corral.execution.local_iterator`). In a plan a trainer runs, they train through that
trainer's learners too (so that its checkpoints hold the optimiser state); over a
`WorkerSet` no trainer runs, through the local worker's `learn_on_batch` /
`apply_gradients`, as RLlib's do. Unlike the functions above, they sync the new weights
to the workers.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from corral.execution.common import (
    APPLY_GRADS_TIMER,
    COMPUTE_GRADS_TIMER,
    LAST_TARGET_UPDATE_TS,
    LEARN_ON_BATCH_TIMER,
    NUM_ENV_STEPS_SAMPLED,
    NUM_ENV_STEPS_SAMPLED_LIFETIME,
    NUM_TARGET_UPDATES,
    STEPS_SAMPLED_COUNTER,
    STEPS_TRAINED_COUNTER,
    WORKER_UPDATE_TIMER,
    StepCount,
    _check_sample_batch_type,
    _get_global_vars,
    _get_shared_metrics,
    count_trained,
    count_trained_in_plan,
    learner_info_by_policy,
    plan_trainer,
)
from corral.policy.policy import learns_by_itself
from corral.policy.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch
from corral.utils.metrics.learner_info import LEARNER_INFO
from corral.utils.sgd import do_minibatch_sgd

logger = logging.getLogger(__name__)

StepFn = TypeVar("StepFn", bound=Callable[..., Any])

# The attribute `learner_results_per_iteration` sets on a `training_step`.
_PER_ITERATION = "_learner_results_per_iteration"


def learner_results_per_iteration(training_step: StepFn) -> StepFn:
    """Marks a `training_step` that reads no learner results itself: `train()` then has
    the learners keep their metrics over the iteration's calls and reduces them once,
    at its end (`Trainer._train_iteration`), instead of once per `update_learners`.

    The iteration's learner stats are then the means over all its gradient steps (sums
    over all its rows), not the last update's. For steps that update on every env step
    (DQN, SAC, TD3) or every few (A2C), the per-update reduce was a few percent of the
    step. A `training_step` written without the mark (a user's override, or one that
    calls this one and reads what it returns) gets each update's results as before.
    """
    setattr(training_step, _PER_ITERATION, True)
    return training_step


def reduces_per_iteration(step: Callable[..., Any]) -> bool:
    """Whether `step` (a `training_step`, bound or not) has the mark."""
    return bool(getattr(step, _PER_ITERATION, False))


def update_learners(
    trainer: Any,
    batch: MultiAgentBatch,
    *,
    num_epochs: int = 1,
    minibatch_size: int | None = None,
    shuffle_batch_per_epoch: bool = False,
) -> dict | None:
    """One `trainer.learner_group.update` on `batch`, counted as trained and timed (the
    "learn" timer).

    The learners' schedules (lr, entropy) read the env steps sampled so far. The step
    every built-in algorithm's `training_step` ends with, before syncing the weights.

    Args:
        trainer: the trainer (its `learner_group`, `_counters` and `_timers`).
        batch: the train batch.
        num_epochs: passes over the batch.
        minibatch_size: rows per gradient step (None: the whole batch at once).
        shuffle_batch_per_epoch: shuffle the rows (sequences stay whole) before each pass.

    Returns:
        The learner results (`Stats` leaves; `trainer.learner_info_from` reads them);
        None inside an iteration of a step marked `learner_results_per_iteration`,
        whose results `train()` reduces at the iteration's end.
    """
    start = time.perf_counter()
    results = trainer.learner_group.update(
        batch=batch,
        num_epochs=num_epochs,
        minibatch_size=minibatch_size,
        shuffle_batch_per_epoch=shuffle_batch_per_epoch,
        timesteps={NUM_ENV_STEPS_SAMPLED_LIFETIME: trainer._counters[NUM_ENV_STEPS_SAMPLED]},
        _no_metrics_reduce=getattr(trainer, "_defer_learner_results", False),
    )
    # RLlib 1.13's "learn" timer: `learn_time_ms`, `learn_throughput` (rows per second),
    # unless a `with` block of it (a training step of one's own) times this call.
    timer = trainer._timers[LEARN_ON_BATCH_TIMER]
    if not timer.running:
        timer.push(time.perf_counter() - start)
        timer.push_units_processed(batch.count)
    count_trained(trainer._counters, batch)
    return results


def _train(trainer: Any, train_batch: Any, policies: Any, num_epochs: int, minibatch: Any):
    local = trainer.workers.local_worker()
    batch = train_batch.as_multi_agent()
    if policies is None:
        policies = [pid for pid in batch.policy_batches if local.is_policy_to_train(pid, batch)]
    wanted = set(policies)
    unknown = wanted - set(local.policy_map.keys())
    if unknown:
        raise ValueError(
            f"Cannot train policies {sorted(unknown)}: the local worker has only "
            f"{sorted(local.policy_map.keys())}."
        )
    # Policies of one's own with their own `learn_on_batch` learn by themselves.
    by_themselves = {pid for pid in wanted if learns_by_itself(local.get_policy(pid))}
    info = {
        pid: _learn_by_itself(local.get_policy(pid), batch.policy_batches[pid])
        for pid in sorted(by_themselves)
        if pid in batch.policy_batches
    }
    wanted -= by_themselves
    selected = MultiAgentBatch(
        {pid: b for pid, b in batch.policy_batches.items() if pid in wanted}, batch.count
    )
    if wanted:
        learner_group = trainer.learner_group
        # RLlib trains exactly the policies asked for, `policies_to_train` or not.
        missing = wanted - set(learner_group.policy_ids)
        if missing:
            learner_group.set_policies_to_train(set(learner_group.policy_ids) | missing)
        results = learner_group.update(
            batch=selected,
            num_epochs=max(1, int(num_epochs)),
            minibatch_size=minibatch,
            shuffle_batch_per_epoch=True,
        )
        learned = trainer.learner_info_from(results)
        info.update({pid: v for pid, v in learned.items() if pid in wanted})
    count_trained(trainer._counters, train_batch)
    _add_td_errors(local, selected, info)
    return info


def _learn_by_itself(policy: Any, batch: Any) -> dict:
    """RLlib 1.13's `learn_on_batch` of a `Policy` of one's own (`learns_by_itself`): its
    result is the policy's learner info (None: no stats)."""
    result = policy.learn_on_batch(batch)
    if result is None:
        return {"learner_stats": {}}
    return result if "learner_stats" in result else {"learner_stats": dict(result)}


def _add_td_errors(local: Any, batch: MultiAgentBatch, info: dict) -> None:
    """RLlib 1.13's `td_error` fetch: for each replayed policy batch (one with
    `batch_indexes`) of a policy that computes TD errors, `info[pid]["td_error"]`, one per
    row after the update, which `update_priorities_in_replay_buffer` turns into new
    priorities. (corral's own off-policy trainers take the losses' TD errors instead.)"""
    for pid, policy_batch in batch.policy_batches.items():
        compute = getattr(local.get_policy(pid), "compute_td_error", None)
        if compute is None or "batch_indexes" not in policy_batch or pid not in info:
            continue
        info[pid]["td_error"] = np.asarray(compute(policy_batch))


def train_one_step(trainer: Any, train_batch: Any, policies_to_train: list | None = None) -> dict:
    """Improves the policies in `train_batch` (those to train, or `policies_to_train`).

    With `num_sgd_iter > 1` or `sgd_minibatch_size > 0` in the trainer's config, that
    many epochs of minibatches of that size; else one update on the whole batch.
    Counts `num_env_steps_trained` / `num_agent_steps_trained` in `trainer._counters`.

    Returns:
        The learner info: policy id -> {"learner_stats": ..., "custom_metrics": ...}.
    """
    config = trainer.config
    num_sgd_iter = config.get("num_sgd_iter", 1) or 1
    minibatch = config.get("sgd_minibatch_size", 0) or 0
    if num_sgd_iter > 1 or minibatch > 0:
        return _train(trainer, train_batch, policies_to_train, num_sgd_iter, minibatch or None)
    return _train(trainer, train_batch, policies_to_train, 1, None)


def multi_gpu_train_one_step(trainer: Any, train_batch: Any) -> dict:
    """RLlib 1.13's multi-device variant: `num_sgd_iter` epochs of `sgd_minibatch_size`
    (default `train_batch_size`) minibatches. corral trains on one device, so this is
    `train_one_step` with those settings."""
    config = trainer.config
    minibatch = config.get("sgd_minibatch_size") or config["train_batch_size"]
    return _train(trainer, train_batch, None, config.get("num_sgd_iter", 1) or 1, minibatch)


# --------------------------------------------------------------------------------------
# Execution-plan operators
# --------------------------------------------------------------------------------------


def _to_train(local: Any, policies: Any, batch: Any = None) -> list[str]:
    """`policies`, or the local worker's policies to train."""
    return list(policies) if policies else sorted(local.get_policies_to_train(batch))


def _sync_workers(workers: Any, policies: list[str], metrics: Any) -> None:
    """The new weights to every remote worker, and the global vars everywhere."""
    global_vars = _get_global_vars()
    if workers.remote_workers():
        with metrics.timers[WORKER_UPDATE_TIMER]:
            workers.sync_weights(policies=policies, global_vars=global_vars)
    workers.local_worker().set_global_vars(global_vars)


class TrainOneStep:
    """Trains on each batch; returns `(batch, learner info)`, and syncs the new weights
    to the workers.

    Args:
        workers: the `WorkerSet` whose local worker's policies are trained.
        policies: the policies to train (default: the local worker's policies to train).
        num_sgd_iter: passes over each batch.
        sgd_minibatch_size: rows per gradient step (0: the whole batch at once).
    """

    def __init__(
        self,
        workers: Any,
        policies: Any = frozenset(),
        num_sgd_iter: int = 1,
        sgd_minibatch_size: int = 0,
    ) -> None:
        self.workers = workers
        self.local_worker = workers.local_worker()
        self.policies = list(policies)
        self.num_sgd_iter = num_sgd_iter
        self.sgd_minibatch_size = sgd_minibatch_size

    def __call__(self, batch: Any) -> tuple[Any, dict]:
        _check_sample_batch_type(batch)
        metrics = _get_shared_metrics()
        learn_timer = metrics.timers[LEARN_ON_BATCH_TIMER]
        trainer = plan_trainer(self.workers)
        with learn_timer:
            info = self._learn(trainer, batch)
            learn_timer.push_units_processed(batch.count)
        metrics.info[LEARNER_INFO] = info
        # The trainer's learners counted the new counter names already.
        count_trained_in_plan(metrics.counters, batch, new_names=trainer is None)
        _sync_workers(self.workers, _to_train(self.local_worker, self.policies, batch), metrics)
        return batch, info

    def _learn(self, trainer: Any, batch: Any) -> dict:
        minibatch = self.sgd_minibatch_size or 0
        if trainer is not None:
            return _train(
                trainer, batch, self.policies or None, self.num_sgd_iter, minibatch or None
            )
        local = self.local_worker
        if self.num_sgd_iter > 1 or minibatch > 0:
            policies = {
                pid: local.get_policy(pid) for pid in _to_train(local, self.policies, batch)
            }
            return do_minibatch_sgd(batch, policies, local, self.num_sgd_iter, minibatch, [])
        return local.learn_on_batch(batch)


class MultiGPUTrainOneStep(TrainOneStep):
    """RLlib's multi-device `TrainOneStep`: `num_sgd_iter` passes of `sgd_minibatch_size`
    minibatches over each batch. corral trains on the device the trainer's config
    chooses (`num_gpus`), so `num_gpus` and `_fake_gpus` here change nothing."""

    def __init__(
        self,
        *,
        workers: Any,
        sgd_minibatch_size: int,
        num_sgd_iter: int,
        num_gpus: float = 0,
        _fake_gpus: bool = False,
        shuffle_sequences: Any = None,
        framework: Any = None,
    ) -> None:
        super().__init__(workers, num_sgd_iter=num_sgd_iter, sgd_minibatch_size=sgd_minibatch_size)


class ComputeGradients:
    """`(gradients, batch.count)` of the local worker's policies on each batch
    (`RolloutWorker.compute_gradients`: a list of arrays for a `SampleBatch`, a dict by
    policy id for a `MultiAgentBatch`); sets `info["learner"]`."""

    def __init__(self, workers: Any) -> None:
        self.workers = workers

    def __call__(self, samples: Any) -> tuple[Any, int]:
        _check_sample_batch_type(samples)
        metrics = _get_shared_metrics()
        with metrics.timers[COMPUTE_GRADS_TIMER]:
            grads, info = self.workers.local_worker().compute_gradients(samples)
        metrics.info[LEARNER_INFO] = learner_info_by_policy(info)
        return grads, samples.count


class ApplyGradients:
    """Applies each `(gradients, count)` item to the local worker's policies, then sends
    the new weights to every worker (`update_all`) or only to the worker the item came
    from (`metrics.current_actor`, after `AsyncGradients`: A3C).

    In a plan a trainer runs, the trainer's learner applies them (it must be the
    driver's own: `num_learners=0`, `num_gpus=0`).

    Args:
        workers: the `WorkerSet`.
        policies: the policies whose weights are sent (default: those to train).
        update_all: send the weights to all remote workers, not just the item's.
    """

    def __init__(self, workers: Any, policies: Any = frozenset(), update_all: bool = True) -> None:
        self.workers = workers
        self.local_worker = workers.local_worker()
        self.policies = list(policies)
        self.update_all = update_all

    def __call__(self, item: Any) -> None:
        if not isinstance(item, tuple) or len(item) != 2:
            raise ValueError(f"Input must be a tuple of (grad_dict, count), got {item!r:.200}")
        gradients, count = item
        metrics = _get_shared_metrics()
        trainer = plan_trainer(self.workers)
        count_trained_in_plan(metrics.counters, StepCount(count, count), new_names=True)
        apply_timer = metrics.timers[APPLY_GRADS_TIMER]
        with apply_timer:
            self._apply(trainer, gradients)
            apply_timer.push_units_processed(count)
        global_vars = _get_global_vars()
        self.local_worker.set_global_vars(global_vars)
        policies = _to_train(self.local_worker, self.policies)
        if self.update_all:
            _sync_workers(self.workers, policies, metrics)
            return
        actor = metrics.current_actor
        if actor is None:
            raise ValueError(
                "Could not find actor to update. When update_all=False, `current_actor` "
                "must be set in the iterator context (items of `gather_async`)."
            )
        with metrics.timers[WORKER_UPDATE_TIMER]:
            # Not waited for: the worker runs it before its next request.
            actor.call("set_weights", self.local_worker.get_weights(policies), global_vars)

    def _apply(self, trainer: Any, gradients: Any) -> None:
        if trainer is None:
            self.local_worker.apply_gradients(gradients)
            return
        learner = trainer.learner_group.local_learner
        if learner is None or learner.device.type != "cpu":
            raise NotImplementedError(
                "ApplyGradients applies gradients in the driver's learner, on the CPU: "
                f"num_learners={trainer.config.get('num_learners')} and "
                f"num_gpus={trainer.config.get('num_gpus')} are not built for it (leave both 0)."
            )
        by_policy = gradients if isinstance(gradients, dict) else {DEFAULT_POLICY_ID: gradients}
        for pid, grads in by_policy.items():
            learner.apply_gradients(pid, grads)


class AverageGradients:
    """Joins a list of `(gradients, count)` items (after `.batch(n)`) into one:
    `(summed gradients, summed count)`. As RLlib 1.13's, it sums the gradients despite
    its name. Gradients are lists of arrays, or dicts of them by policy id."""

    def __call__(self, gradients: list[tuple[Any, int]]) -> tuple[Any, int]:
        acc: Any = None
        total = 0
        for grads, count in gradients:
            acc = grads if acc is None else _add_gradients(acc, grads)
            total += count
        logger.info(
            "Computing average of %d microbatch gradients (%d samples total)",
            len(gradients),
            total,
        )
        return acc, total


def _add_gradients(a: Any, b: Any) -> Any:
    if isinstance(a, dict):
        return {pid: _add_gradients(a[pid], b[pid]) if pid in b else a[pid] for pid in a} | {
            pid: g for pid, g in b.items() if pid not in a
        }
    return [y if x is None else x if y is None else x + y for x, y in zip(a, b)]


class UpdateTargetNetwork:
    """Calls `update_target()` on the policies to train once more than
    `target_update_freq` steps (sampled, or trained with `by_steps_trained`) went by
    since the last update (RLlib 1.13's strict `>`); returns None.

    Counts `num_target_updates` and `last_target_update_ts` in the plan's counters.

    Args:
        workers: the `WorkerSet`.
        target_update_freq: steps between two updates.
        by_steps_trained: count trained steps instead of sampled ones.
        policies: the policies to update (default: those to train).
    """

    def __init__(
        self,
        workers: Any,
        target_update_freq: int = 1,
        by_steps_trained: bool = False,
        policies: Any = frozenset(),
    ) -> None:
        self.workers = workers
        self.local_worker = workers.local_worker()
        self.target_update_freq = target_update_freq
        self.policies = list(policies)
        self.metric = STEPS_TRAINED_COUNTER if by_steps_trained else STEPS_SAMPLED_COUNTER

    def __call__(self, _: Any) -> None:
        metrics = _get_shared_metrics()
        now = metrics.counters[self.metric]
        if now - metrics.counters[LAST_TARGET_UPDATE_TS] <= self.target_update_freq:
            return
        to_update = set(_to_train(self.local_worker, self.policies))
        self.local_worker.foreach_trainable_policy(
            lambda p, pid: pid in to_update and p.update_target()
        )
        metrics.counters[NUM_TARGET_UPDATES] += 1
        metrics.counters[LAST_TARGET_UPDATE_TS] = now


__all__ = [
    "ApplyGradients",
    "AverageGradients",
    "ComputeGradients",
    "MultiGPUTrainOneStep",
    "TrainOneStep",
    "UpdateTargetNetwork",
    "learner_results_per_iteration",
    "multi_gpu_train_one_step",
    "reduces_per_iteration",
    "train_one_step",
    "update_learners",
]
