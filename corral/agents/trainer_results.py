"""The result dict of one training iteration, as `Trainer.train()` reports it.

Episode metrics of the rollout workers (`collect_metrics`), the learner info in
RLlib 1.x's `info/learner` layout, and the trainer's step counters, both at the
top level and under `info` (RLlib 1.13 reports them in both places).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral.execution.common import NUM_AGENT_STEPS_SAMPLED, steps_sampled
from corral.offline.estimators.runner import collect_off_policy_estimates

if TYPE_CHECKING:
    from corral.agents.trainer import Trainer


def compile_results(trainer: Trainer, learner_info: dict, steps_this_iter: int) -> dict:
    """The result of an iteration that sampled `steps_this_iter` steps and whose last
    training step returned `learner_info` (counts the iteration's episodes)."""
    result = trainer.collect_metrics()
    # `on_learn_on_batch` metrics, per policy, next to the episodes' custom metrics
    # (RLlib 1.13's `custom_metrics/<policy_id>/...`).
    for pid, info in (learner_info or {}).items():
        custom = info.get("custom_metrics") if isinstance(info, dict) else None
        if custom:
            result.setdefault("custom_metrics", {})[pid] = dict(custom)
    trainer._episodes_total += result["episodes_this_iter"]
    counters = dict(trainer._counters)
    result.update(
        {
            "info": {"learner": learner_info, **counters},
            "timesteps_this_iter": steps_this_iter,
            "timesteps_total": steps_sampled(
                counters, trainer.config["multiagent"]["count_steps_by"]
            ),
            "agent_timesteps_total": counters.get(NUM_AGENT_STEPS_SAMPLED, 0),
            "episodes_total": trainer._episodes_total,
            "num_healthy_workers": len(trainer.workers.healthy_remote_workers()),
            **counters,
        }
    )
    # `off_policy_estimator/<name>/<metric>`: the workers' estimates from offline input.
    result["off_policy_estimator"] = collect_off_policy_estimates(trainer.workers)
    return result
