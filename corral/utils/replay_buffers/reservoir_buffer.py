"""`ReservoirBuffer`: a uniform random sample of everything ever added.

Reservoir sampling (Vitter 1985, "Random sampling with a reservoir", algorithm R):
until the buffer is full every row (item) is kept; after that the n-th row added
replaces a uniformly drawn slot with probability capacity / n, and is dropped
otherwise. At any time each row ever added is held with the same probability, so
the buffer is a uniform sample of the whole history, not of its recent end.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from corral.policy.sample_batch import MultiAgentBatch, SampleBatch, leaf_columns
from corral.utils.replay_buffers.replay_buffer import ReplayBuffer, StorageUnit

__all__ = ["ReservoirBuffer"]


class ReservoirBuffer(ReplayBuffer):
    """A `ReplayBuffer` that keeps a uniform sample of all items added.

    One-row items (`add_timesteps`' rows) fill `capacity` slots; items of several rows
    (a batch added whole, sequences, episodes) fill the buffer while it holds fewer
    than `capacity` timesteps, and each later item replaces one of them by the same rule.

    Args:
        capacity: rows (timesteps) held.
        storage_unit: "timesteps", "sequences" or "episodes".
        seed: seed of the buffer's random generator (reservoir draws and sampling).
        **kwargs: other arguments of RLlib's buffer configs; ignored.
    """

    def __init__(
        self,
        capacity: int = 10000,
        storage_unit: str | StorageUnit = StorageUnit.TIMESTEPS,
        seed: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(capacity, storage_unit=storage_unit, seed=seed)
        self._num_add_calls = 0  # items (rows) offered to the reservoir so far
        self._num_evicted = 0

    def add_timesteps(self, batch: SampleBatch, **kwargs: Any) -> np.ndarray:
        """Offers each row of `batch` to the reservoir as an item of its own (see
        `ReplayBuffer.add_timesteps`); returns the slots of those kept."""
        if self._items is not None:
            return super().add_timesteps(batch)
        n = batch.count
        # Rows that fill the buffer are all kept (it never wrapped: `_next == _size`).
        head = min(n, self.capacity - self._size)
        kept = super().add_timesteps(batch[:head]) if head else np.zeros(0, np.int64)
        self._num_add_calls += head
        if head == n:
            return kept
        # Row i of the rest is the (seen + i)-th row offered: it lands on a slot drawn
        # from [0, seen + i) and is kept when that slot exists.
        seen = self._num_add_calls + np.arange(1, n - head + 1)
        slots = self._rng.integers(0, seen)
        self._num_add_calls += n - head
        self._num_added += n - head
        rows = np.flatnonzero(slots < self.capacity)
        # Of rows drawing the same slot the later one wins, as when adding one by one.
        last = len(rows) - 1 - np.unique(slots[rows][::-1], return_index=True)[1]
        rows = rows[last]
        if len(rows) == 0:
            return kept
        rest = leaf_columns(batch[head:])  # (a nested column is stored leaf by leaf)
        missing = set(self._columns) - set(rest)
        if missing:
            raise ValueError(f"ReservoirBuffer.add got a batch without columns {sorted(missing)}.")
        for k, column in self._columns.items():
            column[slots[rows]] = np.asarray(rest[k])[rows]
        self._num_evicted += len(rows)
        return np.concatenate([kept, slots[rows]])

    def _store_item(self, item: SampleBatch | MultiAgentBatch) -> int:
        assert self._items is not None
        self._num_add_calls += 1
        if self._num_added + item.count < self.capacity or not self._items:
            self._items.append(item)
            self._size = len(self._items)
            self._num_added += item.count
            return self._size - 1
        self._num_added += item.count
        slot = int(self._rng.integers(0, self._num_add_calls))
        if slot < len(self._items):
            self._items[slot] = item
            self._num_evicted += 1
        return slot if slot < len(self._items) else -1

    def stats(self, debug: bool = False) -> dict[str, Any]:
        return {
            **super().stats(debug),
            "num_evicted": self._num_evicted,
            "num_add_calls": self._num_add_calls,
        }

    def get_state(self) -> dict[str, Any]:
        return {
            **super().get_state(),
            "num_evicted": self._num_evicted,
            "num_add_calls": self._num_add_calls,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        super().set_state(state)
        self._num_evicted = int(state.get("num_evicted", 0))
        self._num_add_calls = int(state.get("num_add_calls", self._size))
