"""Episode metrics: gathered on workers, summarised on the driver."""

from __future__ import annotations

import collections
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np


class RolloutMetrics(NamedTuple):
    """What a worker reports about one finished episode."""

    episode_length: int
    episode_reward: float
    agent_rewards: dict
    custom_metrics: dict
    perf_stats: dict
    hist_data: dict
    media: dict
    # RLlib 2.x's flag: the episode was cut short by a sub-env that raised and
    # was restarted (`restart_failed_sub_environments`); it is counted, not
    # summarised (its steps are not in any batch).
    episode_faulty: bool = False

    @classmethod
    def from_episode(cls, episode: Any, perf_stats: dict, faulty: bool = False) -> RolloutMetrics:
        """The metrics of a finished `Episode` (copies: the episode object lives on)."""
        return cls(
            episode.length,
            episode.total_reward,
            dict(episode.agent_rewards),
            dict(episode.custom_metrics),
            perf_stats,
            dict(episode.hist_data),
            dict(episode.media),
            faulty,
        )

    def to_json(self) -> dict:
        """A JSON-able dict (agent reward keys become [agent, policy, reward] rows)."""
        d = self._asdict()
        d["agent_rewards"] = [[a, p, r] for (a, p), r in self.agent_rewards.items()]
        d["media"] = {}
        return d

    @classmethod
    def from_json(cls, d: dict) -> RolloutMetrics:
        d = dict(d)
        d["agent_rewards"] = {(a, p): r for a, p, r in d["agent_rewards"]}
        return cls(**d)


def get_metrics_from(workers: Sequence[Any], local_worker: Any = None) -> list[RolloutMetrics]:
    """Finished-episode metrics (and sampler stats) from a worker set's members: corral's
    worker handles, or bare Ray actors of `RolloutWorker.as_remote()` (RLlib 1.13's
    hand-built workers)."""
    from corral.evaluation.backend import wait_all
    from corral.evaluation.ray_backend import BareActorFuture, is_bare_actor

    metrics: list[RolloutMetrics] = []
    if local_worker is not None:
        metrics.extend(local_worker.get_metrics())
    futures = [
        BareActorFuture(w, "get_metrics") if is_bare_actor(w) else w.call("get_metrics")
        for w in workers
    ]
    for result in wait_all(futures):
        metrics.extend(result)
    return metrics


def collect_metrics(
    local_worker: Any = None,
    remote_workers: Sequence[Any] = (),
    to_be_collected: Any = None,
    timeout_seconds: float = 180,
    keep_custom_metrics: bool = False,
    *,
    min_history: int = 100,
    selected_workers: Sequence[Any] | None = None,
    history: list[RolloutMetrics] | None = None,
) -> dict[str, Any]:
    """Gathers episode metrics from workers and summarises them.

    When fewer than `min_history` episodes finished, the most recent ones of
    `history` (which this updates in place) fill up the window, so returns are
    smoothed over `metrics_smoothing_episodes` episodes as in RLlib.
    `keep_custom_metrics`: see `summarize_episodes`.
    """
    workers = remote_workers if selected_workers is None else selected_workers
    episodes = get_metrics_from(workers, local_worker)
    return summarize_episodes(
        episodes,
        keep_custom_metrics=keep_custom_metrics,
        history=history,
        min_history=min_history,
    )


def summarize_episodes(
    episodes: list[RolloutMetrics],
    new_episodes: list[RolloutMetrics] | None = None,
    keep_custom_metrics: bool = False,
    *,
    history: list[RolloutMetrics] | None = None,
    min_history: int = 100,
) -> dict[str, Any]:
    """Turns per-episode metrics into the result keys of `train()`.

    Faulty episodes (a sub-env raised and was restarted) are only counted:
    `num_env_restarts` (one per restart) and `num_faulty_episodes` (those
    restarts that cut an episode short after at least one step).

    Args:
        episodes: the episodes to summarise.
        new_episodes: RLlib 1.13's argument: those of `episodes` finished this
            iteration (`episodes_this_iter`); None: all of them.
        keep_custom_metrics: each custom metric as the list of its episodes' values
            (NaNs left out; RLlib 1.13's `keep_per_episode_custom_metrics`) instead of
            `<name>_mean`, `_min` and `_max`.
        history: the episodes of earlier iterations; when fewer than `min_history`
            episodes are given, the most recent of these fill the window (updated in
            place).
        min_history: the smoothing window, in episodes.
    """
    faulty = [e for e in episodes if e.episode_faulty]
    if faulty:
        episodes = [e for e in episodes if not e.episode_faulty]
    new_count = len(episodes) if new_episodes is None else len(new_episodes)
    if history is not None:
        missing = min_history - new_count
        if missing > 0:
            episodes = history[-missing:] + episodes
        history[:] = episodes[-min_history:]

    rewards = [e.episode_reward for e in episodes]
    lengths = [e.episode_length for e in episodes]
    policy_rewards: dict[str, list[float]] = collections.defaultdict(list)
    custom: dict[str, list[float]] = collections.defaultdict(list)
    hist: dict[str, list] = {"episode_reward": rewards, "episode_lengths": lengths}
    perf: dict[str, list[float]] = collections.defaultdict(list)
    for e in episodes:
        for (_, policy_id), r in e.agent_rewards.items():
            policy_rewards[policy_id].append(r)
        for k, v in e.custom_metrics.items():
            custom[k].append(v)
        for k, v in e.hist_data.items():
            hist.setdefault(k, []).extend(v)
        for k, v in e.perf_stats.items():
            perf[k].append(v)

    # Per-policy returns of every agent-episode, as RLlib's `policy_<pid>_reward`.
    for policy_id, policy_returns in policy_rewards.items():
        hist[f"policy_{policy_id}_reward"] = policy_returns
    custom_metrics: dict[str, Any] = {}
    for k, values in custom.items():
        if keep_custom_metrics:
            custom_metrics[k] = [v for v in values if not np.any(np.isnan(v))]
            continue
        finite = [v for v in values if np.isfinite(v)]
        custom_metrics[f"{k}_mean"] = float(np.mean(finite)) if finite else float("nan")
        custom_metrics[f"{k}_min"] = float(np.min(finite)) if finite else float("nan")
        custom_metrics[f"{k}_max"] = float(np.max(finite)) if finite else float("nan")
    nan = float("nan")
    return {
        "episode_reward_max": float(np.max(rewards)) if rewards else nan,
        "episode_reward_min": float(np.min(rewards)) if rewards else nan,
        "episode_reward_mean": float(np.mean(rewards)) if rewards else nan,
        "episode_len_mean": float(np.mean(lengths)) if lengths else nan,
        "episodes_this_iter": new_count,
        "num_faulty_episodes": sum(1 for e in faulty if e.episode_length > 0),
        "num_env_restarts": len(faulty),
        "policy_reward_min": {p: float(np.min(r)) for p, r in policy_rewards.items()},
        "policy_reward_max": {p: float(np.max(r)) for p, r in policy_rewards.items()},
        "policy_reward_mean": {p: float(np.mean(r)) for p, r in policy_rewards.items()},
        "custom_metrics": custom_metrics,
        "hist_stats": hist,
        "sampler_perf": {k: float(np.mean(v)) for k, v in perf.items()},
        "off_policy_estimator": {},
    }


def collect_episodes(
    local_worker: Any = None,
    remote_workers: Sequence[Any] | None = None,
    to_be_collected: Any = None,
    timeout_seconds: float = 180,
) -> tuple[list[RolloutMetrics], list[Any]]:
    """RLlib 1.13's ``collect_episodes``: the finished-episode metrics of the workers.

    Use with :func:`summarize_episodes`, as custom evaluation functions do::

        episodes, _ = collect_episodes(remote_workers=workers.remote_workers())
        metrics = summarize_episodes(episodes)

    Returns:
        ``(episodes, to_be_collected)``; corral waits for every worker, so the second
        (RLlib's still-pending object refs) is always empty.
    """
    return get_metrics_from(remote_workers or [], local_worker), []


def extract_stats(stats: dict, key: str) -> dict[str, Any]:
    """``stats[key]``, or ``{policy_id: stats[policy_id][key]}`` for multi-agent stats."""
    if key in stats:
        return stats[key]
    return {k: v[key] for k, v in stats.items() if isinstance(v, dict) and key in v}


def get_learner_stats(grad_info: dict) -> dict[str, Any]:
    """The ``learner_stats`` of a ``learn_on_batch`` result (per policy when multi-agent)."""
    return extract_stats(grad_info, "learner_stats")
