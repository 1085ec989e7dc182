"""RLlib 1.13's `MinibatchBuffer`: a ring of train batches, each handed out several times."""

from __future__ import annotations

import queue
from typing import Any


class MinibatchBuffer:
    """Ring buffer over an input queue: each item is returned `num_passes` times.

    IMPALA's `num_sgd_iter` replays: with `size` slots, up to `size` batches are in the
    ring at once and handed out round-robin, so successive updates see different
    batches before one is replayed.

    Args:
        inqueue: where new items come from.
        size: slots in the ring (`minibatch_buffer_size`).
        timeout: seconds `get()` waits for a new item before raising `queue.Empty`.
        num_passes: how many times each item is returned (`num_sgd_iter`).
        init_num_passes: passes of the first item; each new item gets one more, up to
            `num_passes` (a warm-up RLlib uses for its multi-GPU learner).
    """

    def __init__(
        self,
        inqueue: queue.Queue,
        size: int,
        timeout: float | None,
        num_passes: int,
        init_num_passes: int = 1,
    ) -> None:
        if size < 1 or num_passes < 1:
            raise ValueError(
                f"MinibatchBuffer needs size >= 1 and num_passes >= 1, got size={size}, "
                f"num_passes={num_passes}."
            )
        self.inqueue = inqueue
        self.size = size
        self.timeout = timeout
        self.max_initial_ttl = num_passes
        self.cur_initial_ttl = min(init_num_passes, num_passes)
        self.buffers: list[Any] = [None] * size
        self.ttl = [0] * size
        self.idx = 0

    def get(self, timeout: float | None = -1.0) -> tuple[Any, bool]:
        """The next item and whether it has now left the ring (its last pass).

        `timeout`: seconds to wait for a new item (default: the buffer's `timeout`).
        Raises `queue.Empty` when a new item is needed and none arrived in time.
        """
        if self.ttl[self.idx] <= 0:
            wait = self.timeout if timeout == -1.0 else timeout
            self.buffers[self.idx] = self.inqueue.get(timeout=wait)
            self.ttl[self.idx] = self.cur_initial_ttl
            self.cur_initial_ttl = min(self.cur_initial_ttl + 1, self.max_initial_ttl)
        item = self.buffers[self.idx]
        self.ttl[self.idx] -= 1
        released = self.ttl[self.idx] <= 0
        if released:
            self.buffers[self.idx] = None
        self.idx = (self.idx + 1) % self.size
        return item, released
