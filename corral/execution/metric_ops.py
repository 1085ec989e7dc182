"""Result reporting of execution plans (RLlib 1.13's `execution.metric_ops`).

`StandardMetricsReporting(train_op, workers, config)` turns a plan's training operator
into an iterator of result dicts laid out as `Trainer.train()`'s (episode metrics,
`info/learner/<policy_id>/learner_stats`, the step counters, `timesteps_total`), so
that Tune, the command line and checkpoints see a plan's trainer like any other.
`add_training_results` is the one place that lays those keys out; `train()` uses it too.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

from corral.evaluation.metrics import collect_metrics
from corral.execution.common import (
    NUM_AGENT_STEPS_SAMPLED,
    STEPS_SAMPLED_COUNTER,
    STEPS_TRAINED_COUNTER,
    STEPS_TRAINED_THIS_ITER_COUNTER,
    _get_shared_metrics,
    steps_sampled,
    steps_trained,
)
from corral.execution.local_iterator import LocalIterator
from corral.offline.estimators.runner import collect_off_policy_estimates
from corral.utils.metrics.learner_info import LEARNER_INFO


def add_training_results(
    result: dict,
    learner_info: dict,
    counters: Mapping[str, int],
    *,
    count_steps_by: str,
    steps_this_iter: int,
    workers: Any,
    by_steps_trained: bool = False,
    extra_info: Mapping[str, Any] | None = None,
    timesteps_total: int | None = None,
) -> dict:
    """Adds to `result` (episode metrics, as `collect_metrics` returns them) what a
    training iteration reports besides them; returns `result`.

    `info` holds the learner info under "learner", `extra_info` and the counters (which
    are at the top level too); `timesteps_total` counts the steps sampled (trained with
    `by_steps_trained`) as `count_steps_by` says, unless `timesteps_total` is given;
    each policy's `on_learn_on_batch` metrics go to `custom_metrics/<policy_id>`;
    `off_policy_estimator` holds the workers' estimates from offline input.
    """
    for pid, info in (learner_info or {}).items():
        custom = info.get("custom_metrics") if isinstance(info, dict) else None
        if custom:
            result.setdefault("custom_metrics", {})[pid] = dict(custom)
    counters = dict(counters)
    total = timesteps_total
    if total is None:
        total = (steps_trained if by_steps_trained else steps_sampled)(counters, count_steps_by)
    result.update(
        {
            "info": {LEARNER_INFO: learner_info, **(extra_info or {}), **counters},
            "timesteps_this_iter": steps_this_iter,
            "timesteps_total": total,
            "agent_timesteps_total": counters.get(NUM_AGENT_STEPS_SAMPLED, 0),
            "num_healthy_workers": len(workers.healthy_remote_workers()),
            **counters,
        }
    )
    result["off_policy_estimator"] = collect_off_policy_estimates(workers)
    return result


def timer_results(timers: Mapping[str, Any]) -> dict[str, float]:
    """RLlib 1.13's `timers` of a result: each `TimerStat`'s mean as `<name>_time_ms`
    and, where it counted units, `<name>_throughput` (units per second)."""
    out = {}
    for name, timer in timers.items():
        out[f"{name}_time_ms"] = round(timer.mean * 1000, 3)
        if timer.has_units_processed():
            out[f"{name}_throughput"] = round(timer.mean_throughput, 3)
    return out


def _config_value(config: Mapping[str, Any], key: str, old_key: str, default: Any) -> Any:
    """An RLlib 1.13 key, else its pre-1.13 name (a trainer's config has both in step)."""
    value = config.get(key)
    if value is None:
        value = config.get(old_key)
    return default if value is None else value


def StandardMetricsReporting(  # noqa: N802 (RLlib's name)
    train_op: LocalIterator[Any],
    workers: Any,
    config: Mapping[str, Any],
    selected_workers: list | None = None,
    by_steps_trained: bool = False,
) -> LocalIterator[dict]:
    """One result dict per reporting period of `train_op` (whose items are ignored).

    A period lasts until `min_sample_timesteps_per_reporting` steps were sampled
    (`min_train_timesteps_per_reporting` trained, with `by_steps_trained`) and
    `min_time_s_per_reporting` seconds passed; then `CollectMetrics` reports.

    Args:
        train_op: the plan's training operator.
        workers: the `WorkerSet` whose episode metrics are reported.
        config: the trainer's config (the keys above, the smoothing window,
            `multiagent/count_steps_by`).
        selected_workers: the remote workers to collect episodes from (default: all).
        by_steps_trained: count trained steps instead of sampled ones.
    """
    if by_steps_trained:
        min_steps = config.get("min_train_timesteps_per_reporting") or 0
    else:
        min_steps = _config_value(
            config, "min_sample_timesteps_per_reporting", "timesteps_per_iteration", 0
        )
    min_time = _config_value(config, "min_time_s_per_reporting", "min_iter_time_s", 0)
    return (
        train_op.filter(OncePerTimestepsElapsed(min_steps, by_steps_trained=by_steps_trained))
        .filter(OncePerTimeInterval(min_time))
        .for_each(
            CollectMetrics(
                workers,
                min_history=_config_value(
                    config, "metrics_num_episodes_for_smoothing", "metrics_smoothing_episodes", 100
                ),
                timeout_seconds=_config_value(
                    config, "metrics_episode_collection_timeout_s", "collect_metrics_timeout", 180
                ),
                keep_per_episode_custom_metrics=config.get(
                    "keep_per_episode_custom_metrics", False
                ),
                selected_workers=selected_workers,
                by_steps_trained=by_steps_trained,
                count_steps_by=(config.get("multiagent") or {}).get("count_steps_by", "env_steps"),
            )
        )
    )


class CollectMetrics:
    """Returns a result dict (its input is ignored): the episodes finished since the
    last call, smoothed over `min_history` episodes, with the plan's learner info,
    counters and timers.

    Args:
        workers: the `WorkerSet` to collect episodes from.
        min_history: the smoothing window, in episodes.
        timeout_seconds: kept for RLlib's signature (a worker that does not answer
            within `sample_timeout_s` has failed).
        keep_per_episode_custom_metrics: each custom metric as the list of its
            episodes' values.
        selected_workers: the remote workers to ask (default: all).
        by_steps_trained: `timesteps_total` counts trained steps.
        count_steps_by: "env_steps" or "agent_steps": what `timesteps_total` counts
            (a corral addition; `StandardMetricsReporting` passes the config's).

    `timesteps_this_iter` is RLlib's: the steps of the latest training step
    (`num_steps_trained_this_iter`). Counting env steps, `timesteps_total` is RLlib's
    too: the plan's `num_steps_sampled` (`num_steps_trained` with `by_steps_trained`),
    which every RLlib 1.x operator counts, a user's own included.
    """

    def __init__(
        self,
        workers: Any,
        min_history: int = 100,
        timeout_seconds: float = 180,
        keep_per_episode_custom_metrics: bool = False,
        selected_workers: list | None = None,
        by_steps_trained: bool = False,
        *,
        count_steps_by: str = "env_steps",
    ) -> None:
        self.workers = workers
        self.episode_history: list = []
        self.min_history = min_history
        self.timeout_seconds = timeout_seconds
        self.keep_custom_metrics = keep_per_episode_custom_metrics
        self.selected_workers = selected_workers
        self.by_steps_trained = by_steps_trained
        self.count_steps_by = count_steps_by

    def __call__(self, _: Any) -> dict:
        result = collect_metrics(
            self.workers.local_worker(),
            self.workers.healthy_remote_workers(),
            timeout_seconds=self.timeout_seconds,
            keep_custom_metrics=self.keep_custom_metrics,
            min_history=self.min_history,
            selected_workers=self.selected_workers,
            history=self.episode_history,
        )
        metrics = _get_shared_metrics()
        custom_from_info = metrics.info.pop("custom_metrics", {})
        info = dict(metrics.info)
        learner_info = info.pop(LEARNER_INFO, {})
        total = None
        if self.count_steps_by == "env_steps":
            # RLlib 1.x's plan counters: what its operators, and users' own, count.
            counter = STEPS_TRAINED_COUNTER if self.by_steps_trained else STEPS_SAMPLED_COUNTER
            total = metrics.counters.get(counter, 0)
        add_training_results(
            result,
            learner_info,
            metrics.counters,
            count_steps_by=self.count_steps_by,
            steps_this_iter=metrics.counters.get(STEPS_TRAINED_THIS_ITER_COUNTER, 0),
            workers=self.workers,
            by_steps_trained=self.by_steps_trained,
            extra_info=info,
            timesteps_total=total,
        )
        result["timers"] = timer_results(metrics.timers)
        result.setdefault("custom_metrics", {}).update(custom_from_info)
        result.setdefault("episode_media", {})
        return result


class OncePerTimeInterval:
    """A `filter` function that lets an item through once every `delay` seconds (None
    or 0: always)."""

    def __init__(self, delay: float | None = None) -> None:
        self.delay = delay or 0.0
        self.last_returned_true = 0.0

    def __call__(self, item: Any) -> bool:
        if self.delay <= 0.0:
            return True
        now = time.time()
        if now - self.last_returned_true > self.delay:
            self.last_returned_true = now
            return True
        return False


class OncePerTimestepsElapsed:
    """A `filter` function that lets an item through once every `delay_steps` steps
    (sampled, or trained with `by_steps_trained`; 0: always)."""

    def __init__(self, delay_steps: int, by_steps_trained: bool = False) -> None:
        self.delay_steps = delay_steps
        self.by_steps_trained = by_steps_trained
        self.last_called = 0

    def __call__(self, item: Any) -> bool:
        if self.delay_steps <= 0:
            return True
        counters = _get_shared_metrics().counters
        now = counters[STEPS_TRAINED_COUNTER if self.by_steps_trained else STEPS_SAMPLED_COUNTER]
        if now - self.last_called >= self.delay_steps:
            self.last_called = now
            return True
        return False


__all__ = [
    "CollectMetrics",
    "OncePerTimeInterval",
    "OncePerTimestepsElapsed",
    "StandardMetricsReporting",
    "add_training_results",
]
