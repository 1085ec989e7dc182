"""Ape-X's learner thread (RLlib 1.13's `agents.dqn.learner_thread`).

The driver's main thread moves replayed batches from the replay actors to the learner
and new priorities back; this thread trains on the batches meanwhile. Each item of
`inqueue` is ``(replay_actor, multi_agent_batch)`` (a batch sampled from a prioritized
buffer, with `batch_indexes`); after one update of the local worker's policies on it
(`learn_on_batch`), the thread puts ``(replay_actor, prio_dict, env_steps, agent_steps)``
on `outqueue`, where `prio_dict` maps each trained policy id to
``(batch_indexes, td_error)``, one TD error per row, ready for the actor's
`update_priorities`. A ``(replay_actor, None)`` item is skipped.

The TD errors are those of the update's own loss, as RLlib's `td_error` learner fetch:
a policy's `td_error` in its `learn_on_batch` result, else the TD errors its loss logged
(`start_td_error_log` / `pop_td_errors`, as corral's DQN policies do), else, where
neither gives one finite value per row, `compute_td_error` after the update.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from typing import Any

import numpy as np

from corral.agents.off_policy import td_errors_of_update
from corral.execution.learner_thread import _STOP_CHECK_S
from corral.policy.sample_batch import MultiAgentBatch
from corral.utils.metrics.learner_info import LearnerInfoBuilder
from corral.utils.metrics.window_stat import WindowStat
from corral.utils.replay_buffers.prioritized_replay_buffer import BATCH_INDEXES
from corral.utils.timer import TimerStat

logger = logging.getLogger(__name__)

__all__ = ["LEARNER_QUEUE_MAX_SIZE", "LearnerThread"]

# Capacity of the learner's `inqueue` (replayed batches waiting to be trained on).
LEARNER_QUEUE_MAX_SIZE = 16


class LearnerThread(threading.Thread):
    """Daemon thread that trains the local worker's policies on replayed batches.

    Args:
        local_worker: the driver's `RolloutWorker`, whose trainable policies are updated
            in place (`learn_on_batch`).

    Attributes:
        inqueue: ``(replay_actor, batch)`` items to train on (at most
            `LEARNER_QUEUE_MAX_SIZE` waiting).
        outqueue: ``(replay_actor, prio_dict, env_steps, agent_steps)`` per trained batch.
        learner_info: the latest update's learner info, ``{policy_id: {"learner_stats":
            ..., "td_error": ..., ...}}``.
        weights_updated: set after each update; the driver clears it when it has sent
            the new weights to the workers.
        update_lock: held during each update (take it to read or set the weights, or to
            checkpoint, between updates).
        stopped: set by :meth:`stop`; the thread then ends.
        error: the exception that ended the thread, if one did (also logged).
    """

    def __init__(self, local_worker: Any) -> None:
        super().__init__(name="corral-apex-learner", daemon=True)
        self.local_worker = local_worker
        self.inqueue: queue.Queue = queue.Queue(maxsize=LEARNER_QUEUE_MAX_SIZE)
        self.outqueue: queue.Queue = queue.Queue()
        self.learner_queue_size = WindowStat("size", 50)
        self.queue_timer = TimerStat()
        self.grad_timer = TimerStat()
        self.overall_timer = TimerStat()
        self.update_lock = threading.RLock()
        self.weights_updated = False
        self.stopped = False
        self.learner_info: dict = {}
        # Updates done (batches trained on).
        self.num_steps = 0
        self.error: BaseException | None = None

    # -- the thread ---------------------------------------------------------

    def run(self) -> None:
        try:
            while not self.stopped:
                self.step()
        except BaseException as e:  # noqa: BLE001 - handed to the main thread
            logger.exception("The Ape-X learner thread failed.")
            self.error = e
            self.stopped = True

    def step(self) -> bool:
        """Takes one item from `inqueue` and trains on it; False if the thread was
        stopped while it waited."""
        start = time.perf_counter()
        while True:
            try:
                replay_actor, batch = self.inqueue.get(timeout=_STOP_CHECK_S)
                break
            except queue.Empty:
                if self.stopped:
                    return False
        self.queue_timer.push(time.perf_counter() - start)
        env_steps = 0
        if batch is not None:
            ma_batch = batch.as_multi_agent()
            env_steps = ma_batch.count
            with self.grad_timer:
                prio_dict = self._learn(ma_batch)
            self.grad_timer.push_units_processed(env_steps)
            self.num_steps += 1
            self.weights_updated = True
            self.outqueue.put((replay_actor, prio_dict, env_steps, ma_batch.agent_steps()))
        self.learner_queue_size.push(self.inqueue.qsize())
        self.overall_timer.push(time.perf_counter() - start)
        self.overall_timer.push_units_processed(env_steps)
        return True

    def stop(self, timeout: float = 5.0) -> None:
        """Ends the thread after its current update (waits up to `timeout` seconds)."""
        self.stopped = True
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout)

    # -- one update ---------------------------------------------------------

    def _learn(self, ma_batch: MultiAgentBatch) -> dict[str, tuple[Any, np.ndarray]]:
        """One update of the trainable policies on `ma_batch`; their new priorities."""
        worker = self.local_worker
        trained = [
            pid for pid in ma_batch.policy_batches if worker.is_policy_to_train(pid, ma_batch)
        ]
        with self.update_lock:
            logging_pids = []
            for pid in trained:
                start_log = getattr(worker.policy_map[pid], "start_td_error_log", None)
                if start_log is not None:
                    start_log()
                    logging_pids.append(pid)
            try:
                results = worker.learn_on_batch(ma_batch)
            finally:
                logged = {pid: worker.policy_map[pid].pop_td_errors() for pid in logging_pids}
            builder = LearnerInfoBuilder(num_devices=1)
            prio_dict = {}
            for pid, result in results.items():
                policy_batch = ma_batch.policy_batches[pid]
                td_error = td_errors_of_update(
                    worker.policy_map[pid], policy_batch, result.get("td_error"), logged.get(pid)
                )
                if td_error is not None:
                    result = {**result, "td_error": td_error}
                    # Indexes as stored (no conversion to tensors on the way out).
                    policy_batch.set_get_interceptor(None)
                    if BATCH_INDEXES in policy_batch:
                        prio_dict[pid] = (policy_batch[BATCH_INDEXES], td_error)
                builder.add_learn_on_batch_results(result, pid)
            self.learner_info = builder.finalize()
        return prio_dict

    # -- metrics ------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """The learner's queue and timing figures (Ape-X's `info` entries)."""

        def ms(timer: TimerStat) -> float:
            return round(1000 * timer.mean, 3)

        return {
            "learner_queue": self.learner_queue_size.stats(),
            "num_updates": self.num_steps,
            "timing_breakdown": {
                "learner_grad_time_ms": ms(self.grad_timer),
                "learner_dequeue_time_ms": ms(self.queue_timer),
                "learner_overall_time_ms": ms(self.overall_timer),
            },
            "learner_grad_throughput": round(self.grad_timer.mean_throughput, 3),
        }
