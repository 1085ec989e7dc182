"""Learning building blocks of `training_iteration()` (RLlib 1.13's `execution.train_ops`).

They train the local worker's policies through the trainer's `learner_group` (corral's
learners), with RLlib 1.13's arguments and return value: the learner info dict
`{policy_id: {"learner_stats": {...}, "custom_metrics": {...}, ...}}`. Like RLlib's,
they do not sync weights to the workers; the caller does (`trainer.workers.sync_weights()`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

import numpy as np

from corral.execution.common import (
    NUM_ENV_STEPS_SAMPLED,
    NUM_ENV_STEPS_SAMPLED_LIFETIME,
    count_trained,
)
from corral.policy.sample_batch import MultiAgentBatch

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
    """One `trainer.learner_group.update` on `batch`, counted as trained.

    The learners' schedules (lr, entropy) read the env steps sampled so far. The step
    every built-in algorithm's `training_step` ends with, before syncing the weights.

    Args:
        trainer: the trainer (its `learner_group` and `_counters`).
        batch: the train batch.
        num_epochs: passes over the batch.
        minibatch_size: rows per gradient step (None: the whole batch at once).
        shuffle_batch_per_epoch: shuffle the rows (sequences stay whole) before each pass.

    Returns:
        The learner results (`Stats` leaves; `trainer.learner_info_from` reads them);
        None inside an iteration of a step marked `learner_results_per_iteration`,
        whose results `train()` reduces at the iteration's end.
    """
    results = trainer.learner_group.update(
        batch=batch,
        num_epochs=num_epochs,
        minibatch_size=minibatch_size,
        shuffle_batch_per_epoch=shuffle_batch_per_epoch,
        timesteps={NUM_ENV_STEPS_SAMPLED_LIFETIME: trainer._counters[NUM_ENV_STEPS_SAMPLED]},
        _no_metrics_reduce=getattr(trainer, "_defer_learner_results", False),
    )
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
    learner_group = trainer.learner_group
    # RLlib trains exactly the policies asked for, `policies_to_train` or not.
    missing = wanted - set(learner_group.policy_ids)
    if missing:
        learner_group.set_policies_to_train(set(learner_group.policy_ids) | missing)
    selected = MultiAgentBatch(
        {pid: b for pid, b in batch.policy_batches.items() if pid in wanted}, batch.count
    )
    results = learner_group.update(
        batch=selected,
        num_epochs=max(1, int(num_epochs)),
        minibatch_size=minibatch,
        shuffle_batch_per_epoch=True,
    )
    count_trained(trainer._counters, train_batch)
    info = trainer.learner_info_from(results)
    info = {pid: v for pid, v in info.items() if pid in wanted}
    _add_td_errors(local, selected, info)
    return info


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


__all__ = [
    "learner_results_per_iteration",
    "multi_gpu_train_one_step",
    "reduces_per_iteration",
    "train_one_step",
    "update_learners",
]
