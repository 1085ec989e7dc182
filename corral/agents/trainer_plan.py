"""RLlib 1.x's execution plans in a `Trainer`.

A trainer class whose `execution_plan(workers, config, **kwargs)` is its own (a subclass
that overrides it, or `build_trainer(execution_plan=fn)`) runs it, unless its config
sets `_disable_execution_plan_api`: the plan is built once the trainer is set up (again
after a worker failure was recovered from), and each `train()` iteration is its next
item. corral's own algorithms run `training_step()` instead.

The plan's operators count into the trainer's own counters (its `_counters` are the
plan's `MetricsContext.counters`, also after a restore), and its training operators
update the trainer's learners, so that checkpoints hold the plan's progress and
optimiser state like any trainer's.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from corral.agents import trainer_results
from corral.execution.common import STEPS_TRAINED_THIS_ITER_COUNTER, attach_plan_trainer
from corral.execution.local_iterator import LocalIterator, next_ready

if TYPE_CHECKING:
    from corral.agents.trainer import Trainer

logger = logging.getLogger(__name__)


def uses_execution_plan(trainer: Trainer) -> bool:
    """Whether `trainer` runs an execution plan (see the module doc)."""
    from corral.agents.trainer import Trainer

    own = type(trainer).execution_plan is not Trainer.execution_plan
    return own and not trainer.config.get("_disable_execution_plan_api")


def build(trainer: Trainer) -> Any:
    """The trainer's plan, built over its workers (an iterator of result dicts)."""
    attach_plan_trainer(trainer.workers, trainer)
    plan = trainer.execution_plan(
        trainer.workers, trainer.config, **trainer._kwargs_for_execution_plan()
    )
    if isinstance(plan, LocalIterator):
        plan.shared_metrics.get().counters = trainer._counters
        return plan
    return iter(plan)


def relink(trainer: Trainer) -> None:
    """Points the plan's counters at the trainer's (after they were replaced: restore)."""
    plan = getattr(trainer, "train_exec_impl", None)
    if isinstance(plan, LocalIterator):
        plan.shared_metrics.get().counters = trainer._counters


def next_result(trainer: Trainer) -> dict:
    """The plan's next result (items not ready yet are waited for).

    Raises:
        RuntimeError: the plan ended, or gave something other than a dict.
    """
    try:
        result = next_ready(trainer.train_exec_impl)
    except StopIteration:
        raise RuntimeError(
            f"{trainer._name}'s execution plan ended: its iterator has no more results "
            "(a plan yields one result dict per train() call, forever; one that raised an "
            "error in an earlier call has ended too)."
        ) from None
    if not isinstance(result, dict):
        raise RuntimeError(
            f"{trainer._name}'s execution plan gave {type(result).__name__} "
            f"{result!r:.200}, expected a result dict (end the plan with "
            "StandardMetricsReporting(train_op, workers, config))."
        )
    result = dict(result)
    trainer_results.add_rllib_1_13_sections(
        result,
        trainer,
        result.get("timesteps_this_iter", 0),
        trainer._counters.get(STEPS_TRAINED_THIS_ITER_COUNTER, 0),
    )
    return result


def plan_kwargs(trainer: Trainer) -> dict:
    """RLlib 1.13's keyword arguments of `execution_plan`: `local_replay_buffer` when
    the config describes one (`replay_buffer_config` with a `capacity`, and no
    `no_local_replay_buffer`), or the trainer has one already."""
    owner: Any = trainer  # (`local_replay_buffer` is RLlib's attribute of some trainers)
    buffer = getattr(owner, "local_replay_buffer", None)
    config = trainer.config
    buffer_config = config.get("replay_buffer_config") or {}
    wanted = buffer_config.get("capacity") and not (
        buffer_config.get("no_local_replay_buffer") or config.get("no_local_replay_buffer")
    )
    if buffer is None and wanted:
        from corral.agents.off_policy import make_replay_buffer

        buffer = make_replay_buffer(
            config,
            learning_starts=int(
                config.get("learning_starts") or buffer_config.get("learning_starts") or 0
            ),
            replay_batch_size=int(config.get("train_batch_size") or 1),
        )
        owner.local_replay_buffer = buffer
        owner._plan_replay_buffer = True
    return {"local_replay_buffer": buffer} if buffer is not None else {}


def replay_buffer_state(trainer: Trainer) -> dict:
    """The buffer `plan_kwargs` made, for a checkpoint with `store_buffer_in_checkpoints`."""
    owner: Any = trainer
    if getattr(owner, "_plan_replay_buffer", False) and trainer.config.get(
        "store_buffer_in_checkpoints"
    ):
        return {"plan_replay_buffer": owner.local_replay_buffer.get_state()}
    return {}


def set_replay_buffer_state(trainer: Trainer, state: dict) -> None:
    """Restores what `replay_buffer_state` saved."""
    owner: Any = trainer
    if "plan_replay_buffer" in state and getattr(owner, "_plan_replay_buffer", False):
        owner.local_replay_buffer.set_state(state["plan_replay_buffer"])


def default_execution_plan(workers: Any, config: dict) -> LocalIterator[dict]:
    """RLlib 1.13's default plan (`Trainer.execution_plan`): sample from all workers,
    concatenate to `train_batch_size`, train (`num_sgd_iter` epochs of
    `sgd_minibatch_size` minibatches, or one step with `simple_optimizer`), report."""
    from corral.execution.metric_ops import StandardMetricsReporting
    from corral.execution.rollout_ops import ConcatBatches, ParallelRollouts
    from corral.execution.train_ops import MultiGPUTrainOneStep, TrainOneStep

    rollouts = ParallelRollouts(workers, mode="bulk_sync")
    assert isinstance(rollouts, LocalIterator)
    train_op = rollouts.combine(
        ConcatBatches(
            min_batch_size=config["train_batch_size"],
            count_steps_by=config["multiagent"]["count_steps_by"],
        )
    )
    if config.get("simple_optimizer") is True:
        train_op = train_op.for_each(TrainOneStep(workers))
    else:
        train_op = train_op.for_each(
            MultiGPUTrainOneStep(
                workers=workers,
                sgd_minibatch_size=config.get("sgd_minibatch_size", config["train_batch_size"]),
                num_sgd_iter=config.get("num_sgd_iter", 1),
                num_gpus=config["num_gpus"],
                _fake_gpus=config["_fake_gpus"],
            )
        )
    return StandardMetricsReporting(train_op, workers, config)


__all__ = [
    "build",
    "default_execution_plan",
    "next_result",
    "plan_kwargs",
    "relink",
    "replay_buffer_state",
    "set_replay_buffer_state",
    "uses_execution_plan",
]
