"""The algorithm-specific operators of RLlib 1.13's execution plans, for users' plans
that copy an algorithm's: PPO's `UpdateKL` and `warn_about_bad_reward_scales`, Ape-X's
`UpdateWorkerWeights`, IMPALA's `BroadcastUpdateLearnerWeights` and
`gather_experiences_directly`. `corral._surface` serves them at their RLlib paths
(`corral.agents.ppo.ppo.UpdateKL`, ...); they live here, in the shared execution
package, because no algorithm folder imports from another.
"""

from __future__ import annotations

import logging
from collections import defaultdict
from typing import Any

from corral.execution.common import _get_global_vars, _get_shared_metrics
from corral.execution.local_iterator import LocalIterator
from corral.execution.replay_ops import MixInReplay
from corral.execution.rollout_ops import ConcatBatches, ParallelRollouts
from corral.policy.sample_batch import DEFAULT_POLICY_ID
from corral.utils.metrics.learner_info import LEARNER_INFO, LEARNER_STATS_KEY

logger = logging.getLogger(__name__)


class UpdateKL:
    """PPO's `for_each` function after a training step: each trained policy's
    `update_kl(kl)` with the `kl` of the learner info it gets (`{policy_id: info}`).

    corral's PPO and APPO policies adapt their KL coefficient after every update
    themselves (`after_update`), so this leaves policies without an `update_kl` method
    alone; a policy of your own that has one is updated as in RLlib.
    """

    def __init__(self, workers: Any) -> None:
        self.workers = workers

    def __call__(self, fetches: dict) -> None:
        if LEARNER_STATS_KEY in fetches:
            raise ValueError(
                f"{LEARNER_STATS_KEY} should be nested under policy id key: {fetches!r:.200}"
            )

        def update(policy: Any, pid: str) -> None:
            update_kl = getattr(policy, "update_kl", None)
            if update_kl is None:
                return
            if pid not in fetches:
                logger.warning("No data for %s, not updating kl", pid)
                return
            kl = fetches[pid][LEARNER_STATS_KEY].get("kl")
            if kl is None:
                raise ValueError(
                    f"No `kl` in the learner stats of policy {pid!r}: {fetches!r:.200}"
                )
            update_kl(kl)

        self.workers.local_worker().foreach_trainable_policy(update)


def warn_about_bad_reward_scales(config: dict, result: dict) -> dict:
    """PPO's check of a result: warns when the value loss dwarfs the policy loss (with
    `vf_share_layers`) or the rewards are far larger than `vf_clip_param`; returns
    `result`."""
    if result.get("policy_reward_mean"):
        return result  # multi-agent: not checked (as in RLlib)
    learner_info = result.get("info", {}).get(LEARNER_INFO, {})
    stats = learner_info.get(DEFAULT_POLICY_ID, {}).get(LEARNER_STATS_KEY, {})
    if "vf_loss" in stats and "policy_loss" in stats:
        scaled_vf_loss = config["vf_loss_coeff"] * stats["vf_loss"]
        if config.get("model", {}).get("vf_share_layers") and scaled_vf_loss > 100:
            logger.warning(
                "The magnitude of your value function loss is extremely large (%s) compared "
                "to the policy loss (%s). This can prevent the policy from learning. Consider "
                "scaling down the VF loss by reducing vf_loss_coeff, or disabling "
                "vf_share_layers.",
                scaled_vf_loss,
                stats["policy_loss"],
            )
    clip = config.get("vf_clip_param") or 0
    reward = result.get("episode_reward_mean")
    if reward is None or reward != reward:  # no episode yet (NaN)
        return result
    scale = float("inf") if clip <= 0 else round(abs(reward) / clip, 0)
    if scale > 200:
        logger.warning(
            "The magnitude of your environment rewards are more than %sx the scale of "
            "`vf_clip_param`. This means that it will take more than %s iterations for your "
            "value function to converge. If this is not intended, consider increasing "
            "`vf_clip_param`.",
            scale,
            scale,
        )
    return result


def _latest_weights(learner_thread: Any, workers: Any) -> Any:
    """The weights to send: the learner thread's published copy where it keeps one (never
    half an update), else the local worker's."""
    published = getattr(learner_thread, "published_weights", None)
    copy = published() if published is not None else None
    return copy[0] if copy is not None else workers.local_worker().get_weights()


class UpdateWorkerWeights:
    """Ape-X's `for_each` function on `(worker handle, batch)` items: a worker gets the
    newest weights once it sampled `max_weight_sync_delay` steps since its last ones.

    Counts `num_weight_syncs` in the plan's counters.

    Args:
        learner_thread: the thread that trains (its `weights_updated` flag says when the
            weights changed).
        workers: the `WorkerSet`.
        max_weight_sync_delay: env steps between two syncs of one worker.
    """

    def __init__(self, learner_thread: Any, workers: Any, max_weight_sync_delay: int) -> None:
        self.learner_thread = learner_thread
        self.workers = workers
        self.steps_since_update: defaultdict[Any, int] = defaultdict(int)
        self.max_weight_sync_delay = max_weight_sync_delay
        self.weights: Any = None

    def __call__(self, item: tuple[Any, Any]) -> None:
        actor, batch = item
        self.steps_since_update[actor] += batch.count
        if self.steps_since_update[actor] < self.max_weight_sync_delay:
            return
        # New weights once the learner changed them (not for every worker's sync).
        if self.weights is None or self.learner_thread.weights_updated:
            self.learner_thread.weights_updated = False
            self.weights = _latest_weights(self.learner_thread, self.workers)
        global_vars = _get_global_vars()
        # Not waited for: the worker runs it before its next request.
        actor.call("set_weights", self.weights, global_vars)
        self.workers.local_worker().set_global_vars(global_vars)
        self.steps_since_update[actor] = 0
        _get_shared_metrics().counters["num_weight_syncs"] += 1


class BroadcastUpdateLearnerWeights:
    """IMPALA's `for_each` function on `(worker handle, batch)` items: the worker gets
    the learner's weights, refreshed every `broadcast_interval` items once the learner
    thread updated them.

    Counts `num_weight_broadcasts` in the plan's counters.
    """

    def __init__(self, learner_thread: Any, workers: Any, broadcast_interval: int) -> None:
        self.learner_thread = learner_thread
        self.steps_since_broadcast = 0
        self.broadcast_interval = broadcast_interval
        self.workers = workers
        self.weights = workers.local_worker().get_weights()

    def __call__(self, item: tuple[Any, Any]) -> None:
        actor, _batch = item
        self.steps_since_broadcast += 1
        if (
            self.steps_since_broadcast >= self.broadcast_interval
            and self.learner_thread.weights_updated
        ):
            self.weights = _latest_weights(self.learner_thread, self.workers)
            self.steps_since_broadcast = 0
            self.learner_thread.weights_updated = False
            _get_shared_metrics().counters["num_weight_broadcasts"] += 1
        global_vars = _get_global_vars()
        actor.call("set_weights", self.weights, global_vars)
        self.workers.local_worker().set_global_vars(global_vars)


def gather_experiences_directly(workers: Any, config: dict) -> LocalIterator[Any]:
    """IMPALA's train batches: the workers' fragments as they come
    (`max_sample_requests_in_flight_per_worker` in flight each), mixed with replayed
    ones (`replay_proportion` of `replay_buffer_num_slots`), concatenated into batches of
    `train_batch_size` steps."""
    rollouts = ParallelRollouts(
        workers, mode="async", num_async=config["max_sample_requests_in_flight_per_worker"]
    )
    assert isinstance(rollouts, LocalIterator)
    return (
        rollouts.for_each(lambda batch: batch.decompress_if_needed())
        .for_each(
            MixInReplay(
                num_slots=config["replay_buffer_num_slots"],
                replay_proportion=config["replay_proportion"],
                seed=config.get("seed"),
            )
        )
        .flatten()
        .combine(
            ConcatBatches(
                min_batch_size=config["train_batch_size"],
                count_steps_by=config["multiagent"]["count_steps_by"],
            )
        )
    )


__all__ = [
    "BroadcastUpdateLearnerWeights",
    "UpdateKL",
    "UpdateWorkerWeights",
    "gather_experiences_directly",
    "warn_about_bad_reward_scales",
]
