"""`sample_async: True`: a worker's sampler run ahead in a background thread.

RLlib 1.13's `AsyncSampler`: a daemon thread keeps sampling the worker's envs and puts
each postprocessed fragment in a queue of at most `QUEUE_SIZE` (5, as RLlib's), where
`RolloutWorker.sample()` takes it from (waiting for one when the queue is empty). The
thread samples on while the driver trains and loads new weights, so a fragment may
come from weights a few updates old (slightly off-policy: what PPO's clipping and
IMPALA's V-trace correct for).

`AsyncSampler` wraps the worker's synchronous sampler (single-agent or multi-agent) and
calls its `sample()` in the thread, so a queued fragment is exactly what a synchronous
`sample()` returns (`rollout_fragment_length` steps per sub-env, or complete episodes).

Threads and what they share:

- each fragment travels with the metrics of the episodes that finished while it was
  sampled; `sample()` moves them into `_finished` (read by `get_metrics()` and the
  worker's `discard_metrics_of_last_samples`), so these lists are only touched by the
  worker's thread and every episode is reported once, with the fragment it ended in;
- the episode callbacks and `on_postprocess_trajectory` run in the sampling thread (as
  in RLlib), `on_sample_end` and the output writer in the worker's thread;
- `TorchPolicy.set_weights` loads under the policy's lock, which every model call that
  goes through the module (a custom model, whose `value_function()` reads what its
  `forward()` cached) also holds. The built-in models' fast paths read the parameters
  without a lock: a step acting while weights load may mix old and new weights. The
  loads copy in place (no tensor is replaced or resized), and a step's action, its
  log-probability and distribution inputs come from one forward pass, so the batch
  stays self-consistent; only its behaviour policy is a blend of two neighbouring
  weight versions (RLlib's torch policy loads weights without a lock too);
- observation filters are updated by the thread while the driver collects and syncs
  them: they must be thread-safe (`NoFilter`, `ConcurrentMeanStdFilter`, or a filter
  with `is_concurrent = True`), as RLlib 1.13 requires (`check_filters`).

An error in the thread (an env raising in `step()`) is raised by the `sample()` that
reaches it (the fragments queued before it are handed out first), and by every later
one. `stop()` ends the thread after its current fragment.
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Any

from corral.evaluation.metrics import RolloutMetrics
from corral.utils.filter import ConcurrentMeanStdFilter, Filter, NoFilter

logger = logging.getLogger(__name__)

# Fragments sampled ahead at most (RLlib 1.13's `queue.Queue(5)`).
QUEUE_SIZE = 5
# How often a waiting thread checks whether it should stop (seconds).
_POLL_S = 0.05
# How long `stop()` waits for the thread to finish its fragment (seconds).
STOP_TIMEOUT_S = 30.0


class _Failure:
    """What the thread queues when its sampler raised: the exception."""

    __slots__ = ("error",)

    def __init__(self, error: BaseException) -> None:
        self.error = error


def is_concurrent_filter(obs_filter: Filter) -> bool:
    """Whether a filter may be updated by the sampling thread while the worker's thread
    copies, clears and syncs it (RLlib's `is_concurrent`)."""
    return isinstance(obs_filter, (NoFilter, ConcurrentMeanStdFilter)) or bool(
        getattr(obs_filter, "is_concurrent", False)
    )


def check_filters(filters: dict[str, Filter]) -> None:
    """Refuses observation filters that are not thread-safe (RLlib 1.13 asserts the same).

    Raises:
        ValueError: a filter other than `NoFilter` / `ConcurrentMeanStdFilter` (or one
            with `is_concurrent = True`), e.g. `observation_filter: "MeanStdFilter"`.
    """
    for pid, obs_filter in filters.items():
        if not is_concurrent_filter(obs_filter):
            raise ValueError(
                f"sample_async=True updates the observation filters in a background thread, "
                f"but policy '{pid}' has a {type(obs_filter).__name__}, which is not "
                "thread-safe: set observation_filter='ConcurrentMeanStdFilter' (the "
                "thread-safe MeanStdFilter) or 'NoFilter', or give your filter class "
                "`is_concurrent = True` if it is thread-safe."
            )


class AsyncSampler:
    """Runs a synchronous sampler's `sample()` in a daemon thread, fragments queued.

    The thread starts when the sampler is built (as RLlib's does with its worker).

    Args:
        sampler: the worker's synchronous sampler (`SingleAgentSampler` or
            `MultiAgentSampler`); only the thread calls it from now on.
        worker_index: the worker's index (the thread's name and error messages).
        queue_size: fragments sampled ahead at most.
    """

    def __init__(self, sampler: Any, worker_index: int = 0, queue_size: int = QUEUE_SIZE) -> None:
        self.sampler = sampler
        self.worker_index = worker_index
        self.queue: queue.Queue[tuple[Any, list[RolloutMetrics]] | _Failure] = queue.Queue(
            queue_size
        )
        # Metrics of the episodes in the fragments handed out, not yet fetched
        # (`get_metrics`); the worker's thread alone touches it.
        self._finished: list[RolloutMetrics] = []
        self._stopping = threading.Event()
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = None
        self.start()

    # -- the thread -------------------------------------------------------------

    def start(self) -> None:
        """Starts the sampling thread (done by the constructor)."""
        if self._thread is not None and self._thread.is_alive():
            return
        self._stopping.clear()
        self._thread = threading.Thread(
            target=self._run, name=f"corral-sampler-worker{self.worker_index}", daemon=True
        )
        self._thread.start()

    @property
    def thread(self) -> threading.Thread | None:
        """The sampling thread (None before `start`)."""
        return self._thread

    def is_alive(self) -> bool:
        """Whether the sampling thread runs."""
        return self._thread is not None and self._thread.is_alive()

    def _run(self) -> None:
        sampler = self.sampler
        try:
            while not self._stopping.is_set():
                batch = sampler.sample()
                if not self._put((batch, sampler.get_metrics())):
                    return
        except BaseException as e:  # noqa: BLE001 - handed to the worker's thread
            if self._stopping.is_set():  # e.g. an env closed under it while stopping
                logger.debug("Sampling thread of worker %d ended with %r", self.worker_index, e)
                return
            self._put(_Failure(e))

    def _put(self, item: tuple[Any, list[RolloutMetrics]] | _Failure) -> bool:
        """Queues `item`, waiting while the queue is full; False when told to stop."""
        while not self._stopping.is_set():
            try:
                self.queue.put(item, timeout=_POLL_S)
                return True
            except queue.Full:
                continue
        return False

    def stop(self, timeout: float = STOP_TIMEOUT_S) -> None:
        """Stops the thread after its current fragment and waits for it (at most
        `timeout` seconds); queued fragments are dropped, with their episodes."""
        self._stopping.set()
        thread = self._thread
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout)
            if thread.is_alive():
                logger.warning(
                    "The sampling thread of worker %d did not stop within %.0f s (an env "
                    "step that does not return?); leaving it (a daemon thread).",
                    self.worker_index,
                    timeout,
                )
        self._drain()

    def _drain(self) -> None:
        while True:
            try:
                self.queue.get_nowait()
            except queue.Empty:
                return

    # -- the worker's side --------------------------------------------------------

    def sample(self) -> Any:
        """The next queued fragment (waiting for one); its episodes' metrics go to
        `get_metrics()`.

        Raises:
            the exception that ended the sampling thread (an env's error, ...), each
            call from the one that reaches it on.
            RuntimeError: the sampler was stopped.
        """
        while True:
            if self._error is not None:
                raise self._error
            try:
                item = self.queue.get(timeout=_POLL_S)
            except queue.Empty:
                if not self.is_alive() and self.queue.empty():
                    raise RuntimeError(
                        f"The sampling thread of worker {self.worker_index} is stopped "
                        "(sample_async): the worker was stopped."
                    ) from None
                continue
            if isinstance(item, _Failure):
                self._error = _with_thread_note(item.error, self.worker_index)
                continue
            batch, metrics = item
            self._finished.extend(metrics)
            return batch

    def get_metrics(self) -> list[RolloutMetrics]:
        """The metrics of the episodes in the fragments handed out since the last call."""
        out, self._finished = self._finished, []
        return out

    def reset(self) -> None:
        """Starts new episodes in every sub-env (fresh evaluation): stops the thread,
        drops the queued fragments, resets the sampler and starts the thread again."""
        if self._error is not None:
            raise self._error
        self.stop()
        self.sampler.reset()
        self.start()

    # Resuming: the thread's sampler state moves on while it is read, so a checkpoint
    # holds none (None: "cannot be replayed", see `corral.evaluation.resume_state`).
    def get_resume_state(self) -> None:
        """None: a sampler running ahead has no state to replay exactly."""
        return None

    def set_resume_state(self, state: Any) -> None:
        """Ignored: fragments were sampled ahead from other states anyway."""
        logger.info(
            "Worker %d samples asynchronously (sample_async): its envs start new episodes "
            "instead of replaying the checkpoint's unfinished ones.",
            self.worker_index,
        )

    def __getattr__(self, name: str) -> Any:
        # The wrapped sampler's read-only information (`timers`, `envs`, `num_envs`, ...).
        if name == "sampler":  # (not set yet: during unpickling or construction)
            raise AttributeError(name)
        return getattr(self.sampler, name)


def _with_thread_note(error: BaseException, worker_index: int) -> BaseException:
    """`error`, noted as raised in the sampling thread (Python >= 3.11)."""
    note = f"(raised in the sampling thread of worker {worker_index}: sample_async=True)"
    add_note = getattr(error, "add_note", None)
    if callable(add_note) and note not in getattr(error, "__notes__", ()):
        add_note(note)
    return error
