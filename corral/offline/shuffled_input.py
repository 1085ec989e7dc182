"""`ShuffledInput`: decorrelates an input's batches through a sliding buffer."""

from __future__ import annotations

import logging

import numpy as np

from corral.offline.input_reader import InputReader, SampleBatchType

logger = logging.getLogger(__name__)


class ShuffledInput(InputReader):
    """Batches of `child` in a random order, through a buffer of `n` batches (RLlib 1.13).

    The buffer is filled first (``shuffle_buffer_size`` batches are read before the
    first is returned); then each `next()` replaces a random slot with a new batch
    from the child and returns a random slot. ``n <= 1`` passes batches through.

    Args:
        child: the input to shuffle.
        n: the buffer's size in batches.
        seed: seeds the shuffling (None: not reproducible).
    """

    def __init__(self, child: InputReader, n: int = 0, seed: int | None = None) -> None:
        if not isinstance(n, int) or n < 0:
            raise ValueError(f"shuffle_buffer_size must be an int >= 0, got {n!r}.")
        self.n = n
        self.child = child
        self.buffer: list[SampleBatchType] = []
        self._rng = np.random.default_rng(seed)

    def next(self) -> SampleBatchType:
        if self.n <= 1:
            return self.child.next()
        if len(self.buffer) < self.n:
            logger.info("Filling the shuffle buffer to %d batches", self.n)
            while len(self.buffer) < self.n:
                self.buffer.append(self.child.next())
        self.buffer[int(self._rng.integers(self.n))] = self.child.next()
        return self.buffer[int(self._rng.integers(self.n))]
