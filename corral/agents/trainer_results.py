"""The result dict of one training iteration, as `Trainer.train()` reports it.

Episode metrics of the rollout workers (`collect_metrics`), the learner info in
RLlib 1.x's `info/learner` layout, and the trainer's step counters, both at the
top level and under `info` (RLlib 1.13 reports them in both places).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral.execution.metric_ops import add_training_results

if TYPE_CHECKING:
    from corral.agents.trainer import Trainer


def compile_results(trainer: Trainer, learner_info: dict, steps_this_iter: int) -> dict:
    """The result of an iteration that sampled `steps_this_iter` steps and whose last
    training step returned `learner_info` (counts the iteration's episodes)."""
    result = trainer.collect_metrics()
    trainer._episodes_total += result["episodes_this_iter"]
    add_training_results(
        result,
        learner_info,
        trainer._counters,
        count_steps_by=trainer.config["multiagent"]["count_steps_by"],
        steps_this_iter=steps_this_iter,
        workers=trainer.workers,
    )
    result["episodes_total"] = trainer._episodes_total
    return result
