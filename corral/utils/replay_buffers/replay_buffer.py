"""`ReplayBuffer`: a fixed-capacity ring buffer of transitions (uniform replay).

As in RLlib 1.13, every `add(batch)` call stores one item: with the
"timesteps" storage unit the batch itself (`len()` counts items and
`sample(n)` returns `n` of them, concatenated), with "sequences" each
sequence of its `seq_lens`, with "episodes" each of its complete episodes
(first `t` 0, last row done). The capacity counts timesteps: once the items
added since the last wrap hold `capacity` timesteps, the next item overwrites
the first slot again (RLlib's rule).

Items of one row (the one-step fragments of DQN-like algorithms, and what
`add_timesteps` makes of every row of its batch) are kept in a ring of
preallocated numpy arrays, one per column, created on the first add from that
batch's columns (dtype and per-row shape); later rows must have the same
columns. Items of several rows, MultiAgentBatches, sequences and episodes are
kept in a list; a "timesteps" buffer moves its rows into that list (one item
each, in their slots) the first time it gets such an item.
"""

from __future__ import annotations

import logging
import platform
from collections.abc import Sequence
from enum import Enum
from typing import Any, cast, overload

import numpy as np
import psutil

from corral.policy.sample_batch import (
    MultiAgentBatch,
    SampleBatch,
    concat_samples,
    leaf_columns,
    nested_columns,
)
from corral.utils.compression import is_compressed, pack_column, unpack_column
from corral.utils.deprecation import Deprecated, log_once

logger = logging.getLogger(__name__)

# RLlib 1.13's key for "all policies together" (a lockstep multi-agent buffer's one
# underlying buffer); 1.x custom multi-agent buffers import it from this module.
_ALL_POLICIES = "__all__"

# Columns never stored: infos are arbitrary Python objects, seq_lens is not per-row.
_SKIPPED_COLUMNS = (SampleBatch.INFOS, SampleBatch.SEQ_LENS)


class StorageUnit(str, Enum):
    """What one stored item of a `ReplayBuffer` is (RLlib 1.13's storage units)."""

    TIMESTEPS = "timesteps"
    SEQUENCES = "sequences"
    EPISODES = "episodes"


def storage_unit_of(value: str | StorageUnit) -> StorageUnit:
    """`value` as a `StorageUnit`.

    Raises:
        ValueError: `value` names no storage unit.
    """
    try:
        return StorageUnit(value)
    except ValueError:
        raise ValueError(
            f"storage_unit must be one of {[u.value for u in StorageUnit]}, got {value!r}."
        ) from None


def warn_replay_buffer_capacity(*, item: SampleBatch | MultiAgentBatch, capacity: float) -> None:
    """Logs (once per process) the memory a buffer of `capacity` items like `item` needs.

    Args:
        item: an example item of the buffer (its `size_bytes()` is the estimate's unit).
        capacity: how many such items the buffer holds when full.

    Raises:
        ValueError: the estimate exceeds the machine's memory.
    """
    if not log_once("warn_replay_buffer_capacity"):
        return
    item_bytes = item.size_bytes()
    total_gb = psutil.virtual_memory().total / 1e9
    needed_gb = capacity * item_bytes / 1e9
    msg = (
        f"Estimated max memory usage for replay buffer is {needed_gb} GB ({capacity} batches "
        f"of size {item.count}, {item_bytes} bytes each), available system memory is "
        f"{total_gb} GB"
    )
    if needed_gb > total_gb:
        raise ValueError(msg)
    if needed_gb > 0.2 * total_gb:
        logger.warning(msg)
    else:
        logger.info(msg)


class ReplayBuffer:
    """Uniform experience replay over the last `capacity` rows added.

    Args:
        capacity: maximum number of rows (transitions) held.
        storage_unit: "timesteps" (rows), "sequences" or "episodes" (whole items; see
            the module doc).
        seed: seed of the buffer's own random generator (sampling).
        **kwargs: other arguments of RLlib's buffer configs (`type`, ...); ignored.
    """

    def __init__(
        self,
        capacity: int = 10000,
        storage_unit: str | StorageUnit = StorageUnit.TIMESTEPS,
        seed: int | None = None,
        **kwargs: Any,
    ) -> None:
        if int(capacity) < 1:
            raise ValueError(f"ReplayBuffer capacity must be >= 1, got {capacity}.")
        self.capacity = int(capacity)
        self._storage_unit = storage_unit_of(storage_unit)
        # The items when they are not rows of the ring (None: rows in `_columns`).
        self._items: list[SampleBatch | MultiAgentBatch] | None = (
            None if self._storage_unit is StorageUnit.TIMESTEPS else []
        )
        self._steps_since_wrap = 0
        # The ring of rows: one preallocated array per column (see the module doc).
        self._columns: dict[str, np.ndarray] = {}
        self._next = 0  # row written by the next add
        self._size = 0
        self._num_added = 0
        self._num_sampled = 0
        self._rng = np.random.default_rng(seed)

    def __len__(self) -> int:
        return self._size

    # -- adding -------------------------------------------------------------

    @property
    def storage_unit(self) -> StorageUnit:
        """What one stored item is."""
        return self._storage_unit

    def add(self, batch: SampleBatch | MultiAgentBatch, **kwargs: Any) -> np.ndarray:
        """Stores `batch` as one item (with "sequences" or "episodes": each of its
        sequences or complete episodes; infos are dropped); returns the slots written.

        Args:
            batch: the item; with the "timesteps" unit a MultiAgentBatch may be one too.
            **kwargs: arguments of a subclass's `add` (a prioritized buffer's `weight`).
        """
        if batch.count == 0:
            return np.zeros(0, np.int64)
        if self._items is None:
            if batch.count == 1 and not isinstance(batch, MultiAgentBatch):
                return self.add_timesteps(batch, **kwargs)
            self._use_items()
        return self._add_items(batch, **kwargs)

    def add_timesteps(self, batch: SampleBatch, **kwargs: Any) -> np.ndarray:
        """Stores each row of `batch` as an item of its own, as adding its
        `timeslices(1)` one by one does (RLlib 1.13's `MultiAgentReplayBuffer` adds
        timesteps so), in one write; returns their slots.

        A batch larger than the capacity keeps only its last `capacity` rows.

        Raises:
            ValueError: the buffer's storage unit is not "timesteps", or the rows have
                other columns than those stored.
        """
        if self._items is not None:
            if self._storage_unit is not StorageUnit.TIMESTEPS:
                raise ValueError(
                    f"add_timesteps stores rows, but this buffer's storage_unit is "
                    f"{self._storage_unit.value!r}; use add()."
                )
            slots = [self._add_items(row, **kwargs) for row in batch.timeslices(1)]
            return np.concatenate(slots) if slots else np.zeros(0, np.int64)
        # A nested column (`_disable_action_flattening`'s actions) is kept leaf by leaf.
        kept = leaf_columns({k: v for k, v in batch.items() if k not in _SKIPPED_COLUMNS})
        columns = {k: np.asarray(v) for k, v in kept.items()}
        n = batch.count
        if n == 0:
            return np.zeros(0, np.int64)
        if not self._columns:
            self._allocate(columns)
        elif columns.keys() != self._columns.keys():
            raise ValueError(
                f"ReplayBuffer.add got columns {sorted(columns)}, but the buffer stores "
                f"{sorted(self._columns)}."
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
            self._columns[k][rows] = v
        self._next = (start + n) % self.capacity
        self._size = min(self._size + n, self.capacity)
        self._num_added += n
        return idx

    def _use_items(self) -> None:
        """Moves the rows of a "timesteps" buffer into the item list (its first item of
        several rows): each row becomes an item of its own, in its slot."""
        self._items = [self._read(np.asarray([slot])) for slot in range(self._size)]
        # (Rows are one-step items: the steps since the last wrap are the next slot.)
        self._steps_since_wrap = self._next
        self._columns = {}

    def _allocate(self, columns: dict[str, np.ndarray]) -> None:
        self._columns = {
            k: np.zeros((self.capacity, *v.shape[1:]), dtype=v.dtype) for k, v in columns.items()
        }

    # -- sampling -----------------------------------------------------------

    def sample(self, num_items: int, **kwargs: Any) -> SampleBatch | MultiAgentBatch:
        """`num_items` items drawn uniformly with replacement, concatenated."""
        self._check_not_empty()
        idx = self._rng.integers(0, self._size, size=num_items)
        return self._take(idx)

    def _take(self, idx: np.ndarray) -> SampleBatch | MultiAgentBatch:
        if self._items is not None:
            batch = self._read(idx)
            self._num_sampled += batch.count
            return batch
        self._num_sampled += len(idx)
        return self._read(idx)

    def _read(self, idx: np.ndarray) -> SampleBatch | MultiAgentBatch:
        """The rows (items, concatenated) at `idx`, as stored; counts no sample."""
        if self._items is not None:
            items = [self._items[i] for i in idx]
            batch = items[0].copy() if len(items) == 1 else concat_samples(items)
            return batch.decompress_if_needed()  # (packed observations unpacked)
        return SampleBatch(nested_columns({k: _rows_at(v, idx) for k, v in self._columns.items()}))

    # -- items (storage units other than timesteps) ----------------------------

    def _add_items(self, batch: SampleBatch | MultiAgentBatch, **kwargs: Any) -> np.ndarray:
        """Stores the items of `batch` in the item list; returns their slots."""
        if isinstance(batch, MultiAgentBatch):
            if self._storage_unit is StorageUnit.TIMESTEPS:
                warn_replay_buffer_capacity(item=batch, capacity=self.capacity / batch.count)
                return np.asarray([self._store_item(batch)], np.int64)
            raise ValueError(
                f"Cannot add a MultiAgentBatch to a ReplayBuffer with storage_unit "
                f"{self._storage_unit.value!r}; add its policy batches."
            )
        items = self._split(batch)
        if items:
            warn_replay_buffer_capacity(item=items[0], capacity=self.capacity / items[0].count)
        slots = [self._store_item(item) for item in items]
        return np.asarray([slot for slot in slots if slot >= 0], np.int64)

    def _split(self, batch: SampleBatch) -> list[SampleBatch]:
        """The batch's items (copies, infos dropped) for this buffer's storage unit."""
        kept = SampleBatch({k: v for k, v in batch.items() if k != SampleBatch.INFOS})
        if self._storage_unit is StorageUnit.TIMESTEPS:
            return [kept]
        if self._storage_unit is StorageUnit.SEQUENCES:
            return split_sequences(kept)
        episodes = []
        for episode in kept.split_by_episode():
            if is_complete_episode(episode):
                episodes.append(episode.copy())
            elif log_once("only_full_episodes"):
                logger.info(
                    "This buffer stores whole episodes: rows of an incomplete episode "
                    "(not starting at t=0 or not ending done) are dropped."
                )
        return episodes

    def _store_item(self, item: SampleBatch | MultiAgentBatch) -> int:
        """Writes one item at the next slot (RLlib's wrap rule); returns the slot (-1:
        not kept)."""
        assert self._items is not None
        slot = self._next
        if slot >= len(self._items):
            self._items.append(item)
        else:
            self._items[slot] = item
        self._size = len(self._items)
        self._num_added += item.count
        self._steps_since_wrap += item.count
        if self._steps_since_wrap >= self.capacity:
            self._steps_since_wrap, self._next = 0, 0
        else:
            self._next = slot + 1
        return slot

    def _check_not_empty(self) -> None:
        if self._size == 0:
            raise ValueError("Cannot sample from an empty replay buffer; add() rows first.")

    # -- state --------------------------------------------------------------

    def stats(self, debug: bool = False) -> dict[str, Any]:
        """RLlib 1.13's statistics (`added_count`: timesteps added, `added_count_wrapped`:
        since the last wrap, `eviction_started`, `sampled_count`, `est_size_bytes`,
        `num_entries`: items held) and corral's names of some (`size`, `num_added`,
        `num_sampled`) with the `capacity`."""
        return {
            "added_count": self._num_added,
            "added_count_wrapped": self._num_timesteps_added_wrap,
            "eviction_started": self._eviction_started,
            "sampled_count": self._num_sampled,
            "num_entries": self._size,
            "capacity": self.capacity,
            "size": self._size,
            "num_added": self._num_added,
            "num_sampled": self._num_sampled,
            "est_size_bytes": self._est_size_bytes,
        }

    # -- RLlib 1.x's protected state, for subclasses ---------------------------
    # RLlib 1.x users wrote custom buffers by subclassing `ReplayBuffer` and reading
    # its protected attributes. corral keeps its state differently (a ring of columns
    # for one-row items), so these are read-only properties computed from that state
    # when read: nothing is kept up to date for them on `add` or `sample`. (1.13's
    # `_hit_count` and `_evicted_hit_stats` would need work on every sample: not kept.)

    @property
    def _storage(self) -> Sequence[SampleBatch | MultiAgentBatch]:
        """RLlib 1.x's `_storage`: the stored items in slot order (1.x subclassing surface).

        Items of several rows (and every item once the buffer holds such items) are the
        buffer's own list; one-row items kept in the ring of columns are a read-only
        view whose `[i]` is the one-row `SampleBatch` in slot `i` (read when indexed).
        """
        if self._items is not None:
            return self._items
        return _RingItems(self)

    @property
    def _next_idx(self) -> int:
        """RLlib 1.x's `_next_idx`: the slot the next item is written to (1.x
        subclassing surface)."""
        return self._next

    @property
    def _num_timesteps_added(self) -> int:
        """RLlib 1.x's `_num_timesteps_added`: timesteps added over the buffer's
        lifetime (1.x subclassing surface)."""
        return self._num_added

    @property
    def _num_timesteps_added_wrap(self) -> int:
        """RLlib 1.x's `_num_timesteps_added_wrap`: timesteps added since the buffer
        last wrapped to slot 0 (1.x subclassing surface)."""
        if self._items is not None:
            return self._steps_since_wrap
        return self._next  # (one-row items: the next slot)

    @property
    def _num_timesteps_sampled(self) -> int:
        """RLlib 1.x's `_num_timesteps_sampled`: timesteps sampled over the buffer's
        lifetime (1.x subclassing surface)."""
        return self._num_sampled

    @property
    def _eviction_started(self) -> bool:
        """RLlib 1.x's `_eviction_started`: whether the buffer has wrapped once, so new
        items overwrite old ones (1.x subclassing surface)."""
        # (The first wrap comes once `capacity` timesteps were added.)
        return self._num_added >= self.capacity

    @property
    def _est_size_bytes(self) -> int:
        """RLlib 1.x's `_est_size_bytes`: the estimated bytes of the stored items (1.x
        subclassing surface); summed over the items (or the ring's arrays) when read."""
        if self._items is not None:
            return int(sum(item.size_bytes() for item in self._items))
        return int(sum(v.nbytes for v in self._columns.values()))

    def get_host(self) -> str:
        """The machine's network name (RLlib's, for colocating buffer shards)."""
        return platform.node()

    @Deprecated(old="ReplayBuffer.add_batch()", new="ReplayBuffer.add()", error=False)
    def add_batch(self, batch: SampleBatch, **kwargs: Any) -> Any:
        return self.add(batch, **kwargs)

    @Deprecated(old="ReplayBuffer.replay()", new="ReplayBuffer.sample()", error=False)
    def replay(self, num_items: int, **kwargs: Any) -> Any:
        return self.sample(num_items, **kwargs)

    def get_state(self) -> dict[str, Any]:
        """numpy arrays (the filled rows, oldest first) and plain numbers, for checkpoints."""
        if self._items is not None:
            return self._items_state()
        order = self._chronological_indices()
        return {
            "capacity": self.capacity,
            "num_added": self._num_added,
            "num_sampled": self._num_sampled,
            # Packed columns are saved unpacked: checkpoints hold plain numeric arrays only.
            "columns": {
                k: np.ascontiguousarray(unpack_column(v[order])) for k, v in self._columns.items()
            },
            "compressed_columns": [k for k, v in self._columns.items() if is_compressed(v)],
            "next": self._next,
            "rng": self._rng.bit_generator.state,
        }

    def _items_state(self) -> dict[str, Any]:
        """The items as concatenated columns plus each item's length per column (items
        that are MultiAgentBatches: so per policy, with each item's env steps)."""
        assert self._items is not None
        state: dict[str, Any] = {
            "capacity": self.capacity,
            "storage_unit": self._storage_unit.value,
            "num_added": self._num_added,
            "num_sampled": self._num_sampled,
            "next": self._next,
            "steps_since_wrap": self._steps_since_wrap,
            "rng": self._rng.bit_generator.state,
        }
        items = self._items
        if items and isinstance(items[0], MultiAgentBatch):
            multi_agent = [item.as_multi_agent() for item in items]
            policy_ids = list(dict.fromkeys(p for item in multi_agent for p in item.policy_batches))
            state["env_steps"] = np.asarray([item.count for item in multi_agent], np.int64)
            state["policies"] = {
                pid: _columns_state(
                    [item.policy_batches.get(pid, SampleBatch()) for item in multi_agent]
                )
                for pid in policy_ids
            }
        else:
            state.update(_columns_state(items))
        return state

    def _set_items_state(self, state: dict[str, Any]) -> None:
        if "policies" in state:
            per_policy = {pid: _items_of(s) for pid, s in state["policies"].items()}
            env_steps = np.asarray(state["env_steps"]).tolist()
            self._items = [
                MultiAgentBatch(
                    {pid: b[i] for pid, b in per_policy.items() if b[i].count}, int(steps)
                )
                for i, steps in enumerate(env_steps)
            ]
        else:
            self._items = list(_items_of(state))
        self._columns = {}
        self._size = len(self._items)
        self._next = int(state["next"])
        self._steps_since_wrap = int(state["steps_since_wrap"])
        self._num_added = int(state.get("num_added", 0))
        self._num_sampled = int(state.get("num_sampled", 0))
        if state.get("rng"):
            self._rng.bit_generator.state = state["rng"]

    def set_state(self, state: dict[str, Any]) -> None:
        if "lengths" in state or "policies" in state:  # a state of items
            self._set_items_state(state)
            return
        if self._items is not None and self._storage_unit is StorageUnit.TIMESTEPS:
            self._items = None  # (a "timesteps" buffer's state of rows)
        columns = state["columns"]
        self._columns, self._next, self._size = {}, 0, 0
        if columns:
            n = len(next(iter(columns.values())))
            if n:
                packed = set(state.get("compressed_columns", ()))
                self.add_timesteps(
                    SampleBatch(
                        {
                            k: pack_column(v) if k in packed else np.asarray(v)
                            for k, v in columns.items()
                        }
                    )
                )
                next_slot = int(state.get("next", 0))
                if next_slot and n == self._size == self.capacity:
                    # Back in the slots they were saved from (the oldest at the next slot),
                    # so the slot numbers (`_next_idx`, a sample's indexes) are kept.
                    self._columns = {
                        k: np.roll(v, next_slot, axis=0) for k, v in self._columns.items()
                    }
                    self._next = next_slot
        self._num_added = int(state.get("num_added", self._size))
        self._num_sampled = int(state.get("num_sampled", 0))
        if state.get("rng"):
            self._rng.bit_generator.state = state["rng"]

    def _chronological_indices(self) -> np.ndarray:
        # (Items are saved in slot order, which `set_state` restores.)
        if self._items is not None or self._size < self.capacity:
            return np.arange(self._size)
        return (self._next + np.arange(self.capacity)) % self.capacity


class _RingItems(Sequence[SampleBatch]):
    """The one-row items of a `ReplayBuffer`'s ring of columns as a read-only sequence
    (its `_storage` in RLlib 1.x's meaning); an item is read from the ring when indexed."""

    def __init__(self, buffer: ReplayBuffer) -> None:
        self._buffer = buffer

    def __len__(self) -> int:
        return self._buffer._size

    @overload
    def __getitem__(self, index: int) -> SampleBatch: ...

    @overload
    def __getitem__(self, index: slice) -> list[SampleBatch]: ...

    def __getitem__(self, index: int | slice) -> SampleBatch | list[SampleBatch]:
        size = self._buffer._size
        if isinstance(index, slice):
            return [self[i] for i in range(*index.indices(size))]
        if not -size <= index < size:
            raise IndexError(f"Replay buffer slot {index} out of range ({size} items).")
        batch = self._buffer._read(np.asarray([index % size]))
        return cast("SampleBatch", batch)


def _columns_state(items: Sequence[SampleBatch | MultiAgentBatch]) -> dict[str, Any]:
    """Items as their columns concatenated plus each item's length per column (0 where
    an item lacks the column; a nested column is kept leaf by leaf)."""
    leaves = [leaf_columns(cast("SampleBatch", item)) for item in items]
    keys = list(dict.fromkeys(k for item in leaves for k in item))
    return {
        "columns": {k: np.concatenate([item[k] for item in leaves if k in item]) for k in keys},
        "lengths": {
            k: np.asarray([len(item[k]) if k in item else 0 for item in leaves]) for k in keys
        },
    }


def _items_of(state: dict[str, Any]) -> list[SampleBatch]:
    """The items of a `_columns_state`."""
    columns, lengths = state["columns"], state["lengths"]
    num_items = len(next(iter(lengths.values()))) if lengths else 0
    parts = {
        k: np.split(np.asarray(v), np.cumsum(np.asarray(lengths[k]))[:-1])
        for k, v in columns.items()
    }
    return [
        SampleBatch(nested_columns({k: parts[k][i] for k in columns if lengths[k][i]}))
        for i in range(num_items)
    ]


def is_complete_episode(episode: SampleBatch) -> bool:
    """Whether the rows of one episode start it (`t` 0) and end it (done)."""
    if SampleBatch.T in episode and episode[SampleBatch.T][0] != 0:
        return False
    for done in (SampleBatch.DONES, SampleBatch.TERMINATEDS, SampleBatch.TRUNCATEDS):
        if done in episode and bool(episode[done][-1]):
            return True
    return False


def split_sequences(batch: SampleBatch) -> list[SampleBatch]:
    """One item per sequence of `batch` (by its `seq_lens`), each with its `seq_lens`
    and its own `state_in_*` row.

    Raises:
        ValueError: the batch has no `seq_lens`.
    """
    if SampleBatch.SEQ_LENS not in batch:
        raise ValueError("A buffer storing sequences needs batches with a `seq_lens` column.")
    items = []
    start = 0
    for i, length in enumerate(np.asarray(batch[SampleBatch.SEQ_LENS]).tolist()):
        item = {}
        for k, v in batch.items():
            if k == SampleBatch.SEQ_LENS:
                item[k] = np.asarray([length])
            elif k.startswith("state_in_"):
                item[k] = v[i : i + 1].copy()
            else:
                item[k] = v[start : start + length].copy()
        items.append(SampleBatch(item))
        start += length
    return items


def _rows_at(column: np.ndarray, idx: np.ndarray) -> np.ndarray:
    """The rows `idx` of a stored column; packed rows (`compress_observations`, an object
    column) unpacked for the learner. (`ndarray.take` gathers the rows of a column of
    arrays about 4x faster than `column[idx]`; a flat column gathers faster by index.)"""
    if column.dtype == object:
        return unpack_column(column[idx])
    return column.take(idx, axis=0) if column.ndim > 1 else column[idx]
