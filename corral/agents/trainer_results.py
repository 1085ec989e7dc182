"""The result dict of one training iteration, as `Trainer.train()` reports it.

Episode metrics of the rollout workers (`collect_metrics`), the learner info in
RLlib 1.x's `info/learner` layout, and the trainer's step counters, both at the
top level and under `info` (RLlib 1.13 reports them in both places).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from corral.execution.common import STEPS_SAMPLED_COUNTER, STEPS_TRAINED_COUNTER
from corral.execution.metric_ops import add_training_results, timer_results
from corral.utils.metrics import (
    NUM_AGENT_STEPS_SAMPLED,
    NUM_AGENT_STEPS_TRAINED,
    NUM_ENV_STEPS_SAMPLED,
    NUM_ENV_STEPS_TRAINED,
)

# The step counters every result reports, 0 until the first step counted (RLlib 1.13's
# `Trainer` reports them from its first iteration on, before any training step: e.g.
# while an off-policy algorithm fills its buffer up to `learning_starts`).
STEP_COUNTERS = (
    NUM_AGENT_STEPS_SAMPLED,
    NUM_AGENT_STEPS_TRAINED,
    NUM_ENV_STEPS_SAMPLED,
    NUM_ENV_STEPS_TRAINED,
)

# The episode metrics of a result (`summarize_episodes`' keys), which RLlib 1.13 also
# reported together under "sampler_results".
SAMPLER_RESULT_KEYS = (
    "episode_reward_max",
    "episode_reward_min",
    "episode_reward_mean",
    "episode_len_mean",
    "episodes_this_iter",
    "num_faulty_episodes",
    "policy_reward_min",
    "policy_reward_max",
    "policy_reward_mean",
    "custom_metrics",
    "hist_stats",
    "sampler_perf",
    "off_policy_estimator",
    "episode_media",
)

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
        reported_counters(trainer),
        count_steps_by=trainer.config["multiagent"]["count_steps_by"],
        steps_this_iter=steps_this_iter,
        workers=trainer.workers,
    )
    result["episodes_total"] = trainer._episodes_total
    add_plan_counter_names(result["info"])
    result["timers"] = timer_results(trainer._timers)
    add_rllib_1_13_sections(result, trainer, steps_this_iter, trainer._trained_this_iter)
    return result


def add_plan_counter_names(info: dict) -> None:
    """Adds RLlib 1.x's older env-step counters to a result's `info`: `num_steps_sampled`
    and `num_steps_trained`, which RLlib 1.13's execution plans reported there (the
    default for IMPALA, APPO, DDPG, Ape-X DDPG and others, and any algorithm run with
    `_disable_execution_plan_api: False`). They equal `num_env_steps_sampled` /
    `num_env_steps_trained`; a counter of those names the trainer keeps itself wins."""
    info.setdefault(STEPS_SAMPLED_COUNTER, info.get(NUM_ENV_STEPS_SAMPLED, 0))
    info.setdefault(STEPS_TRAINED_COUNTER, info.get(NUM_ENV_STEPS_TRAINED, 0))


def reported_counters(trainer: Trainer) -> dict[str, int]:
    """The trainer's counters as a result reports them: `STEP_COUNTERS` 0 until counted."""
    return {**dict.fromkeys(STEP_COUNTERS, 0), **trainer._counters}


def add_rllib_1_13_sections(
    result: dict, trainer: Trainer, sampled_this_iter: int, trained_this_iter: int
) -> None:
    """What RLlib 1.13's `Trainer` added to each result besides its `timers`:
    `counters` (the step counters), `sampler_results` (the episode metrics, which are at
    the top level too), `episode_media`, and the steps sampled and trained in this
    iteration (`num_env_steps_sampled_this_iter` / `..._trained_this_iter`, agent steps
    when `count_steps_by` says so)."""
    result["counters"] = reported_counters(trainer)
    result.setdefault("episode_media", {})
    result["sampler_results"] = {k: result[k] for k in SAMPLER_RESULT_KEYS if k in result}
    unit = "agent" if trainer.config["multiagent"]["count_steps_by"] == "agent_steps" else "env"
    result[f"num_{unit}_steps_sampled_this_iter"] = sampled_this_iter
    result[f"num_{unit}_steps_trained_this_iter"] = trained_this_iter
