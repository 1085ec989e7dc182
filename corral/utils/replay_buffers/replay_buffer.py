"""`ReplayBuffer`: a fixed-capacity ring buffer of transitions (uniform replay).

Storage is one preallocated numpy array per column, created on the first
`add` from that batch's columns (dtype and per-row shape); later batches
must have the same columns. When full, the oldest rows are overwritten.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from corral.policy.sample_batch import SampleBatch
from corral.utils.compression import is_compressed, pack_column, unpack_column

# Columns never stored: infos are arbitrary Python objects, seq_lens is not per-row.
_SKIPPED_COLUMNS = (SampleBatch.INFOS, SampleBatch.SEQ_LENS)


class ReplayBuffer:
    """Uniform experience replay over the last `capacity` rows added.

    Args:
        capacity: maximum number of rows (transitions) held.
        seed: seed of the buffer's own random generator (sampling).
    """

    def __init__(self, capacity: int, seed: int | None = None) -> None:
        if int(capacity) < 1:
            raise ValueError(f"ReplayBuffer capacity must be >= 1, got {capacity}.")
        self.capacity = int(capacity)
        self._storage: dict[str, np.ndarray] = {}
        self._next = 0  # row written by the next add
        self._size = 0
        self._num_added = 0
        self._num_sampled = 0
        self._rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return self._size

    # -- adding -------------------------------------------------------------

    def add(self, batch: SampleBatch) -> np.ndarray:
        """Appends the rows of `batch` (infos dropped); returns their buffer indices.

        A batch larger than the capacity keeps only its last `capacity` rows.
        """
        columns = {k: np.asarray(v) for k, v in batch.items() if k not in _SKIPPED_COLUMNS}
        n = batch.count
        if n == 0:
            return np.zeros(0, np.int64)
        if not self._storage:
            self._allocate(columns)
        elif columns.keys() != self._storage.keys():
            raise ValueError(
                f"ReplayBuffer.add got columns {sorted(columns)}, but the buffer stores "
                f"{sorted(self._storage)}."
            )
        if n > self.capacity:
            columns = {k: v[n - self.capacity :] for k, v in columns.items()}
            self._num_added += n - self.capacity
            n = self.capacity
        start = self._next
        idx = np.arange(start, start + n)
        # Rows that fit before the end are one slice (cheaper to write than an index).
        rows: slice | np.ndarray = slice(start, start + n)
        if start + n > self.capacity:
            idx %= self.capacity
            rows = idx
        for k, v in columns.items():
            self._storage[k][rows] = v
        self._next = (start + n) % self.capacity
        self._size = min(self._size + n, self.capacity)
        self._num_added += n
        return idx

    def _allocate(self, columns: dict[str, np.ndarray]) -> None:
        self._storage = {
            k: np.zeros((self.capacity, *v.shape[1:]), dtype=v.dtype) for k, v in columns.items()
        }

    # -- sampling -----------------------------------------------------------

    def sample(self, num_items: int) -> SampleBatch:
        """`num_items` rows drawn uniformly with replacement."""
        self._check_not_empty()
        idx = self._rng.integers(0, self._size, size=num_items)
        return self._take(idx)

    def _take(self, idx: np.ndarray) -> SampleBatch:
        self._num_sampled += len(idx)
        # Columns stored LZ4-packed (`compress_observations`) are unpacked for the learner.
        return SampleBatch({k: unpack_column(v[idx]) for k, v in self._storage.items()})

    def _check_not_empty(self) -> None:
        if self._size == 0:
            raise ValueError("Cannot sample from an empty replay buffer; add() rows first.")

    # -- state --------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        return {
            "capacity": self.capacity,
            "size": self._size,
            "num_added": self._num_added,
            "num_sampled": self._num_sampled,
            "est_size_bytes": int(sum(v.nbytes for v in self._storage.values())),
        }

    def get_state(self) -> dict[str, Any]:
        """numpy arrays (the filled rows, oldest first) and plain numbers, for checkpoints."""
        order = self._chronological_indices()
        return {
            "capacity": self.capacity,
            "num_added": self._num_added,
            "num_sampled": self._num_sampled,
            # Packed columns are saved unpacked: checkpoints hold plain numeric arrays only.
            "columns": {
                k: np.ascontiguousarray(unpack_column(v[order])) for k, v in self._storage.items()
            },
            "compressed_columns": [k for k, v in self._storage.items() if is_compressed(v)],
            "rng": self._rng.bit_generator.state,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        columns = state["columns"]
        self._storage, self._next, self._size = {}, 0, 0
        if columns:
            n = len(next(iter(columns.values())))
            if n:
                packed = set(state.get("compressed_columns", ()))
                self.add(
                    SampleBatch(
                        {
                            k: pack_column(v) if k in packed else np.asarray(v)
                            for k, v in columns.items()
                        }
                    )
                )
        self._num_added = int(state.get("num_added", self._size))
        self._num_sampled = int(state.get("num_sampled", 0))
        if state.get("rng"):
            self._rng.bit_generator.state = state["rng"]

    def _chronological_indices(self) -> np.ndarray:
        if self._size < self.capacity:
            return np.arange(self._size)
        return (self._next + np.arange(self.capacity)) % self.capacity
