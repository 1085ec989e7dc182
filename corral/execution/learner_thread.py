"""The learner thread of asynchronous training (RLlib 1.13's `execution.learner_thread`).

The driver's main thread samples (collects ready batches from the workers, sends weights)
while this thread trains: it takes train batches from a bounded queue (`inqueue`,
`learner_queue_size`), replays each `num_sgd_iter` times through a `MinibatchBuffer` of
`minibatch_buffer_size` slots, updates the local worker's policies in place, and reports
on `outqueue`. torch releases the GIL inside its kernels, so both threads make progress.

Hand-over points, so that the main thread never reads half-updated weights:

- after each update the thread publishes a copy of the new weights with their versions
  (`published_weights()`), which the main thread broadcasts to the workers;
- `update_lock` is held during each update: a checkpoint, an evaluation sync or a
  restore takes it to see (or set) weights and optimiser state between updates.
"""

from __future__ import annotations

import copy
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from corral.execution.buffers.minibatch_buffer import MinibatchBuffer
from corral.policy.sample_batch import MultiAgentBatch
from corral.utils.metrics.window_stat import WindowStat
from corral.utils.timer import TimerStat

logger = logging.getLogger(__name__)

# How long one wait for a batch lasts before the thread checks whether it was stopped.
_STOP_CHECK_S = 0.1


class LearnerThread(threading.Thread):
    """Background thread that trains the local worker's policies on queued batches.

    Args:
        local_worker: the driver's `RolloutWorker`, whose policies are trained.
        minibatch_buffer_size: batches kept for the `num_sgd_iter` replays.
        num_sgd_iter: how many updates each train batch is used for.
        learner_queue_size: capacity of `inqueue`.
        learner_queue_timeout: seconds without a new batch after which the thread logs
            a warning (sampling produced nothing that long); it keeps waiting.
        update_fn: `fn(batch) -> learner info` doing one update (the trainer passes
            its learner group's update); default: a `Learner` over the local worker's
            policies to train.

    Items put into `inqueue` are train batches, or `(batch, sampled_seqs)` pairs where
    `sampled_seqs` maps policy ids to the weights versions (`weights_seq`) the batch's
    fragments were sampled with; the thread then records the policy lag of each.
    """

    def __init__(
        self,
        local_worker: Any,
        minibatch_buffer_size: int,
        num_sgd_iter: int,
        learner_queue_size: int,
        learner_queue_timeout: float,
        *,
        update_fn: Callable[[MultiAgentBatch], dict] | None = None,
    ) -> None:
        super().__init__(name="corral-learner", daemon=True)
        self.local_worker = local_worker
        self.inqueue: queue.Queue = queue.Queue(maxsize=learner_queue_size)
        self.outqueue: queue.Queue = queue.Queue()
        self.learner_queue_timeout = learner_queue_timeout
        self.minibatch_buffer = MinibatchBuffer(
            self.inqueue,
            size=minibatch_buffer_size,
            timeout=_STOP_CHECK_S,
            num_passes=num_sgd_iter,
            init_num_passes=num_sgd_iter,
        )
        self.update_fn = update_fn or self._default_update_fn()
        self.update_lock = threading.RLock()
        self.learner_queue_size = WindowStat("size", 50)
        self.policy_lag = WindowStat("lag", 100)
        self.queue_timer = TimerStat()
        self.grad_timer = TimerStat()
        self.weights_updated = False
        self.learner_info: dict = {}
        self.stopped = False
        self.num_steps = 0
        self.num_steps_trained = 0
        self.error: BaseException | None = None
        # Busy (updating) and idle (waiting for a batch) seconds since the last report.
        self._busy_s = 0.0
        self._wait_s = 0.0
        # The same since the thread started (never reset).
        self.busy_s_total = 0.0
        self.wait_s_total = 0.0
        self._stats_lock = threading.Lock()
        self._published: tuple[dict, dict] | None = None

    def _default_update_fn(self) -> Callable[[MultiAgentBatch], dict]:
        return LearnerUpdate(self.local_worker)

    # -- the thread ---------------------------------------------------------

    def run(self) -> None:
        try:
            while not self.stopped:
                self.step()
        except BaseException as e:  # noqa: BLE001 - handed to the main thread
            logger.exception("The learner thread failed.")
            self.error = e

    def step(self) -> bool:
        """Takes one batch (waiting at most a moment) and trains on it; False if none came."""
        start = time.perf_counter()
        waited = 0.0
        while True:
            try:
                item, released = self.minibatch_buffer.get()
                break
            except queue.Empty:
                waited = time.perf_counter() - start
                if self.stopped:
                    self._add_time(wait=waited)
                    return False
                if waited >= self.learner_queue_timeout:
                    logger.warning(
                        "The learner got no train batch for %.0f s (learner_queue_timeout); "
                        "are the rollout workers sampling?",
                        waited,
                    )
                    start = time.perf_counter()
                    self._add_time(wait=waited)
        got = time.perf_counter()
        self._take_timer().push(got - start)
        self._add_time(wait=got - start)
        batch, sampled_seqs = self._unpack(item)
        with self.update_lock:
            info = self.update_fn(batch)
            self._record_lag(sampled_seqs)
            self._publish()
        self._release(item, released)
        done = time.perf_counter()
        self.grad_timer.push(done - got)
        self._add_time(busy=done - got)
        self.learner_info = info
        self.weights_updated = True
        self.num_steps += 1
        self.num_steps_trained += batch.count
        self.outqueue.put((batch.count, info))
        self.learner_queue_size.push(self.inqueue.qsize())
        return True

    # Hooks of the multi-GPU learner thread (`multi_gpu_learner_thread`), whose ring
    # hands out loaded slots instead of queued batches.

    def _take_timer(self) -> TimerStat:
        """The timer of the thread's waits for its next item (`minibatch_buffer.get`)."""
        return self.queue_timer

    def _unpack(self, item: Any) -> tuple[MultiAgentBatch, dict | None]:
        """(train batch, weights versions it was sampled with) of a ring item."""
        return item if isinstance(item, tuple) else (item, None)

    def _release(self, item: Any, released: bool) -> None:
        """Called after each update on `item`; `released`: that was its last pass."""

    def stop(self, timeout: float = 5.0) -> None:
        """Ends the thread after its current update."""
        self.stopped = True
        if self.is_alive() and threading.current_thread() is not self:
            self.join(timeout)

    # -- hand-over ----------------------------------------------------------

    def _publish(self) -> None:
        worker = self.local_worker
        seqs = worker.get_weights_seqs()
        self._published = (worker.get_weights(), seqs)

    def published_weights(self) -> tuple[dict, dict] | None:
        """(weights, versions) after the latest update; None before the first."""
        return self._published

    def _record_lag(self, sampled_seqs: dict | None) -> None:
        if not sampled_seqs:
            return
        now = self.local_worker.get_weights_seqs()
        for pid, seqs in sampled_seqs.items():
            for seq in seqs:
                if pid in now and seq is not None:
                    self.policy_lag.push(now[pid] - seq)

    def _add_time(self, busy: float = 0.0, wait: float = 0.0) -> None:
        with self._stats_lock:
            self._busy_s += busy
            self._wait_s += wait
            self.busy_s_total += busy
            self.wait_s_total += wait

    def take_busy_fraction(self) -> float | None:
        """Share of the time since the last call spent updating (not waiting for
        batches); None when no time passed."""
        with self._stats_lock:
            busy, wait = self._busy_s, self._wait_s
            self._busy_s = self._wait_s = 0.0
        total = busy + wait
        return busy / total if total > 0 else None

    def add_learner_metrics(self, result: dict) -> dict:
        """Adds the learner's queue, timing and policy-lag figures to `result["info"]`."""

        def ms(timer: TimerStat) -> float:
            return round(1000 * timer.mean, 3)

        lag = self.policy_lag.stats()
        busy = self.take_busy_fraction()
        info = result.setdefault("info", {})
        info.update(
            {
                "learner_queue": self.learner_queue_size.stats(),
                "policy_lag": {
                    "mean": lag["lag_mean"],
                    "max": float(np.max(self.policy_lag.items[: self.policy_lag.count]))
                    if self.policy_lag.count
                    else float("nan"),
                },
                "learner_busy_fraction": float("nan") if busy is None else busy,
                "timing_breakdown": {
                    "learner_grad_time_ms": ms(self.grad_timer),
                    "learner_dequeue_time_ms": ms(self.queue_timer),
                },
            }
        )
        if not info.get("learner"):  # (an execution plan's result has an empty one)
            info["learner"] = copy.deepcopy(self.learner_info)
        return result


class LearnerUpdate:
    """`fn(batch) -> learner info`: one pass over `batch` by a `LearnerGroup` (corral's
    learner) training `local_worker`'s policies to train; a learner thread's default
    `update_fn`.

    Args:
        local_worker: the `RolloutWorker` whose policies are trained (and whose
            `policy_config` the learner reads: `grad_clip`, `seed`, ...).
        num_gpus: 0 trains the policies in place on the CPU; > 0 trains copies on
            the GPU (weights loaded back after each update), as a trainer's learner
            does for `num_gpus`.
        fake_gpus: with `num_gpus > 0`, the same code path on the CPU (`_fake_gpus`).
        minibatch_size: rows per gradient step (None: the whole batch in one step).
    """

    def __init__(
        self,
        local_worker: Any,
        *,
        num_gpus: float = 0,
        fake_gpus: bool = False,
        minibatch_size: int | None = None,
    ) -> None:
        from corral.core.learner.learner_group import LearnerGroup

        worker = local_worker
        config = dict(worker.policy_config, num_learners=0, num_gpus=num_gpus, _fake_gpus=fake_gpus)
        self.minibatch_size = minibatch_size
        self.learner_group = LearnerGroup(
            config,
            worker.policy_map,
            policy_ids=[p for p in worker.policy_map if worker.is_policy_to_train(p)],
        )

    def __call__(self, batch: MultiAgentBatch) -> dict:
        from corral.utils.metrics import stats_to_values

        results = self.learner_group.update(
            batch=batch, num_epochs=1, minibatch_size=self.minibatch_size
        )
        values = stats_to_values(results or {})
        return {pid: {"learner_stats": v} for pid, v in values.items() if pid[:2] != "__"}
