"""Surviving worker failures: `Trainer.step`'s retries and `try_recover_from_step_attempt`.

With `ignore_worker_failures` or `recreate_failed_workers`, an iteration whose
attempt failed on a worker (`WorkerFailure`) is tried again after the failed
workers are dropped or recreated; `MAX_WORKER_FAILURE_RETRIES` failures in a
row end training with the last failure as the cause. A failed data-parallel
learner (`LearnerFailure`) restarts the learner group instead.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from corral.core.learner.learner_group import LearnerFailure
from corral.evaluation.backend import WorkerFailure

if TYPE_CHECKING:
    from corral.agents.trainer import Trainer
    from corral.evaluation.worker_set import WorkerSet

logger = logging.getLogger(__name__)

# How many times `step()` retries `step_attempt()` after worker failures in a
# row; more than a few in a row means something is persistently broken.
MAX_WORKER_FAILURE_RETRIES = 3


def step_with_retries(trainer: Trainer) -> dict:
    """`Trainer.step`: `trainer.step_attempt()`, retried after worker failures when
    the config allows; then the filters are synced and the machine's load added."""
    config = trainer.config
    recover = config["ignore_worker_failures"] or config.get("recreate_failed_workers")
    last_error: WorkerFailure | None = None
    for _ in range(1 + MAX_WORKER_FAILURE_RETRIES):
        try:
            result = trainer.step_attempt()
            trainer._sync_filters_if_needed(trainer.workers)
            if trainer._sys_usage is not None:
                result["perf"] = trainer._sys_usage.read()
            return result
        except WorkerFailure as e:
            if not recover:
                logger.info(
                    "A worker failed during train(). To continue without it, set "
                    "`ignore_worker_failures: True` (or `recreate_failed_workers: True`)."
                )
                raise
            last_error = e
            logger.exception("Worker failure in train(); attempting to recover.")
            trainer.try_recover_from_step_attempt(error=e)
    # The cause (the env's own exception, a crash, a timeout) is part of the message.
    raise RuntimeError(
        f"Failed to recover from worker crash: {MAX_WORKER_FAILURE_RETRIES + 1} attempts "
        f"in a row failed; the last failure was: {last_error}"
    ) from last_error


def recover(trainer: Trainer, error: BaseException | None) -> None:
    """`Trainer.try_recover_from_step_attempt` (its docstring says what it does)."""
    learner_group = trainer._learner_group
    if isinstance(error, LearnerFailure) and learner_group is not None:
        learner_group.recover(
            error, keep_failed=bool(trainer.config.get("recreate_failed_workers"))
        )
        return
    failed = getattr(error, "handle", None)
    recover_worker_set(trainer, trainer.workers, failed, error, "rollout")
    if trainer.evaluation_workers is not None:
        recover_worker_set(trainer, trainer.evaluation_workers, failed, error, "evaluation")


def recover_worker_set(
    trainer: Trainer,
    workers: WorkerSet,
    failed: Any,
    error: BaseException | None,
    kind: str,
) -> None:
    """Probes `workers`' remote workers; keeps the healthy ones and drops (or, with
    `recreate_failed_workers`, recreates) the others, `failed` (the one `error`
    came from) among them.

    Raises:
        RuntimeError: no healthy worker remains (`error` as its cause).
    """
    workers.replace_failed_workers(
        recreate=bool(trainer.config.get("recreate_failed_workers")),
        failed=failed,
        prepare=trainer._replay_policy_changes,
        error=error,
        kind=kind,
    )
    # (A new evaluation worker gets the current weights when the next evaluation syncs.)
