"""RLlib 1.13's `execution.multi_gpu_learner_thread`: a learner thread with loader threads.

Loader threads take train batches from the thread's `inqueue` and load each into one of
`num_multi_gpu_tower_stacks` slots (RLlib's tower stacks): the batch decompressed and
cut down to the policies to train, ready for the learner. The learner thread takes
loaded slots round-robin from a ring of that many slots (`MinibatchBuffer`) and trains
`num_sgd_iter` passes on each, every pass in minibatches of the policy config's
`sgd_minibatch_size` (the whole batch when unset or larger); a slot goes back to the
loaders after its last pass. So loading the next batches overlaps training on the
current one, and several loaded batches alternate in the `num_sgd_iter` passes.

Training is corral's learner (`LearnerUpdate`, a `LearnerGroup`): on the CPU without
GPUs; with `num_gpus > 0` on the GPU (one: RLlib's data-parallel towers over several
GPUs are `num_learners` learners in corral), or on the CPU through the same code path
with `_fake_gpus`. Everything else (the stop protocol, the published weights, the
policy-lag and timing stats, `update_lock`) is the base `LearnerThread`'s.

Differences from RLlib 1.13, on purpose: each pass covers the whole loaded batch in
minibatches (RLlib's torch policies train only the first `sgd_minibatch_size` rows of
each pass, `offset=0`); loaders take an idle slot before a batch, so at most
`num_multi_gpu_tower_stacks` batches leave `inqueue` ahead of training (the queue keeps
its back-pressure) and loader threads beyond that number would only wait: at most
that many are started.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from corral.execution.buffers.minibatch_buffer import MinibatchBuffer
from corral.execution.learner_thread import _STOP_CHECK_S, LearnerThread, LearnerUpdate
from corral.policy.sample_batch import MultiAgentBatch
from corral.utils.deprecation import deprecation_warning
from corral.utils.timer import TimerStat

logger = logging.getLogger(__name__)


@dataclass
class _Slot:
    """One tower stack: the loaded batch (and its weights versions) it holds."""

    index: int
    batch: MultiAgentBatch | None = None
    sampled_seqs: dict | None = None


class MultiGPULearnerThread(LearnerThread):
    """Learner thread whose loader threads prepare batches while it trains.

    Args:
        local_worker: the driver's `RolloutWorker`, whose policies to train are trained.
        num_gpus: GPUs of the learner (0: the CPU); corral's learner uses one.
        lr: ignored (as in RLlib 1.13: the policies' optimisers have their own).
        train_batch_size: rows of the train batches (kept as `train_batch_size`).
        num_multi_gpu_tower_stacks: slots batches are loaded into; also the size of the
            ring the `num_sgd_iter` passes go round.
        num_sgd_iter: passes over each loaded batch.
        learner_queue_size: capacity of `inqueue`.
        learner_queue_timeout: seconds without a loaded batch after which the thread
            logs a warning (it keeps waiting).
        num_data_load_threads: loader threads (at most `num_multi_gpu_tower_stacks` run).
        _fake_gpus: with `num_gpus > 0`, the GPU code path on the CPU.
        minibatch_buffer_size: deprecated, not used (the ring has one slot per stack).
        update_fn: `fn(batch) -> learner info` doing one pass (default: a
            `LearnerUpdate` on the device above, in minibatches of the policy config's
            `sgd_minibatch_size`).

    Raises:
        ValueError: `num_multi_gpu_tower_stacks`, `num_sgd_iter` or
            `num_data_load_threads` below 1; `num_gpus > 0` without `_fake_gpus` where
            torch sees no GPU.
    """

    def __init__(
        self,
        local_worker: Any,
        num_gpus: float = 1,
        lr: float | None = None,
        train_batch_size: int = 500,
        num_multi_gpu_tower_stacks: int = 1,
        num_sgd_iter: int = 1,
        learner_queue_size: int = 16,
        learner_queue_timeout: float = 300,
        num_data_load_threads: int = 16,
        _fake_gpus: bool = False,
        minibatch_buffer_size: int | None = None,
        *,
        update_fn: Callable[[MultiAgentBatch], dict] | None = None,
    ) -> None:
        for name, value in (
            ("num_multi_gpu_tower_stacks", num_multi_gpu_tower_stacks),
            ("num_sgd_iter", num_sgd_iter),
            ("num_data_load_threads", num_data_load_threads),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(
                    f"MultiGPULearnerThread: {name} must be an int >= 1, got {value!r}."
                )
        if minibatch_buffer_size:
            deprecation_warning(old="MultiGPULearnerThread.minibatch_buffer_size", error=False)
        self.num_gpus = num_gpus
        self._fake_gpus = _fake_gpus
        super().__init__(
            local_worker,
            minibatch_buffer_size=1,
            num_sgd_iter=num_sgd_iter,
            learner_queue_size=learner_queue_size,
            learner_queue_timeout=learner_queue_timeout,
            update_fn=update_fn,
        )
        self.train_batch_size = train_batch_size
        group = getattr(self.update_fn, "learner_group", None)
        device = group.device if group is not None else None
        # Where the policies train (RLlib lists one entry per tower).
        self.devices = [str(device) if device is not None else "cpu"]
        logger.info("MultiGPULearnerThread devices %s", self.devices)
        self.num_multi_gpu_tower_stacks = num_multi_gpu_tower_stacks
        self.tower_stack_indices = list(range(num_multi_gpu_tower_stacks))
        self._slots = [_Slot(i) for i in self.tower_stack_indices]
        # Slots waiting for a batch, and loaded slots waiting for the learner.
        self.idle_tower_stacks: queue.Queue[_Slot] = queue.Queue()
        self.ready_tower_stacks: queue.Queue[_Slot] = queue.Queue()
        for slot in self._slots:
            self.idle_tower_stacks.put(slot)
        # The ring of loaded slots; RLlib's warm-up: the first slot gets one pass, each
        # next one more, up to `num_sgd_iter`.
        self.minibatch_buffer = MinibatchBuffer(
            self.ready_tower_stacks,
            size=num_multi_gpu_tower_stacks,
            timeout=_STOP_CHECK_S,
            num_passes=num_sgd_iter,
        )
        self.ready_tower_stacks_buffer = self.minibatch_buffer
        # Loading time, and the learner's waits for a loaded slot (the loaders' waits
        # for a batch are `queue_timer`).
        self.load_timer = TimerStat()
        self.load_wait_timer = TimerStat()
        self.num_batches_loaded = 0
        self._count_lock = threading.Lock()
        self.loader_threads = [
            _LoaderThread(self, share_stats=(i == 0))
            for i in range(min(num_data_load_threads, num_multi_gpu_tower_stacks))
        ]
        # RLlib's name for (the last of) them.
        self.loader_thread = self.loader_threads[-1]

    def _default_update_fn(self) -> Callable[[MultiAgentBatch], dict]:
        minibatch = self.local_worker.policy_config.get("sgd_minibatch_size") or None
        return LearnerUpdate(
            self.local_worker,
            num_gpus=self.num_gpus,
            fake_gpus=self._fake_gpus,
            minibatch_size=minibatch,
        )

    # -- the threads --------------------------------------------------------

    def start(self) -> None:
        """Starts the loader threads, then the learner thread."""
        for loader in self.loader_threads:
            loader.start()
        super().start()

    def stop(self, timeout: float = 5.0) -> None:
        """Ends the loader threads and the learner thread after their current step."""
        super().stop(timeout)
        for loader in self.loader_threads:
            if loader.is_alive():
                loader.join(timeout)

    def _take_timer(self) -> TimerStat:
        return self.load_wait_timer

    def _unpack(self, item: Any) -> tuple[MultiAgentBatch, dict | None]:
        slot: _Slot = item
        assert slot.batch is not None
        return slot.batch, slot.sampled_seqs

    def _release(self, item: Any, released: bool) -> None:
        if released:
            slot: _Slot = item
            slot.batch = slot.sampled_seqs = None
            self.idle_tower_stacks.put(slot)

    def load(self, item: Any, slot: _Slot) -> None:
        """Loads a queued item (a batch, or a `(batch, sampled_seqs)` pair) into `slot`:
        decompressed, as a `MultiAgentBatch` of the policies to train."""
        batch, sampled_seqs = LearnerThread._unpack(self, item)
        batch = batch.decompress_if_needed().as_multi_agent()
        worker = self.local_worker
        kept = {
            pid: b
            for pid, b in batch.policy_batches.items()
            if worker.is_policy_to_train(pid, batch)
        }
        slot.batch = MultiAgentBatch(kept, batch.count)
        slot.sampled_seqs = sampled_seqs

    def add_learner_metrics(self, result: dict) -> dict:
        """The base thread's figures, plus the loaders' timing."""
        super().add_learner_metrics(result)
        timing = result["info"]["timing_breakdown"]
        timing["learner_load_time_ms"] = round(1000 * self.load_timer.mean, 3)
        timing["learner_load_wait_time_ms"] = round(1000 * self.load_wait_timer.mean, 3)
        return result


class _LoaderThread(threading.Thread):
    """Moves batches from the learner's `inqueue` into its idle slots."""

    def __init__(self, learner: MultiGPULearnerThread, share_stats: bool) -> None:
        super().__init__(name="corral-learner-loader", daemon=True)
        self.learner = learner
        # The first loader's timings are the learner's (RLlib's `share_stats`).
        self.queue_timer = learner.queue_timer if share_stats else TimerStat()
        self.load_timer = learner.load_timer if share_stats else TimerStat()

    def run(self) -> None:
        learner = self.learner
        try:
            while not learner.stopped:
                self.step()
        except BaseException as e:  # noqa: BLE001 - handed to the main thread
            logger.exception("A loader thread of the learner failed.")
            learner.error = learner.error or e
            learner.stopped = True

    def step(self) -> bool:
        """Loads one batch into an idle slot (waiting a moment for each); False if none."""
        learner = self.learner
        try:
            slot = learner.idle_tower_stacks.get(timeout=_STOP_CHECK_S)
        except queue.Empty:
            return False
        start = time.perf_counter()
        while True:
            try:
                item = learner.inqueue.get(timeout=_STOP_CHECK_S)
                break
            except queue.Empty:
                if learner.stopped:
                    learner.idle_tower_stacks.put(slot)
                    return False
        got = time.perf_counter()
        self.queue_timer.push(got - start)
        learner.load(item, slot)
        self.load_timer.push(time.perf_counter() - got)
        with learner._count_lock:
            learner.num_batches_loaded += 1
        learner.ready_tower_stacks.put(slot)
        return True


__all__ = ["MultiGPULearnerThread"]
