"""`PrioritizedReplayBuffer`: proportional prioritized replay.

Schaul et al. 2016, "Prioritized Experience Replay" (arXiv:1511.05952):
item i is sampled with probability P(i) = p_i^alpha / sum_k p_k^alpha (eq. 1)
and its update is weighted by w_i = (N * P(i))^-beta / max_j w_j (sec. 3.4),
which corrects the bias of non-uniform sampling as beta -> 1.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from corral.policy.sample_batch import MultiAgentBatch, SampleBatch
from corral.utils.replay_buffers.replay_buffer import ReplayBuffer, StorageUnit
from corral.utils.replay_buffers.segment_tree import (
    MinSegmentTree,
    SumSegmentTree,
    set_leaf,
    write_leaves,
)

# Extra columns of a prioritized sample.
WEIGHTS = "weights"
BATCH_INDEXES = "batch_indexes"


class PrioritizedReplayBuffer(ReplayBuffer):
    """A `ReplayBuffer` that samples items in proportion to priority^alpha.

    An item of several rows (a batch added whole, a sequence, an episode) has one
    priority, and a sample repeats its weight and index on each of its rows.

    Args:
        capacity: maximum number of rows.
        alpha: how much prioritisation is used (0: uniform, 1: fully proportional).
        seed: seed of the buffer's random generator.
        storage_unit: what one item is ("timesteps", "sequences", "episodes").
        **kwargs: other arguments of RLlib's buffer configs (`type`, `beta`, ...); ignored.
    """

    def __init__(
        self,
        capacity: int = 10000,
        alpha: float = 0.6,
        seed: int | None = None,
        storage_unit: str | StorageUnit = StorageUnit.TIMESTEPS,
        **kwargs: Any,
    ) -> None:
        super().__init__(capacity, storage_unit=storage_unit, seed=seed)
        if alpha < 0:
            raise ValueError(f"Prioritized replay alpha must be >= 0, got {alpha}.")
        self.alpha = float(alpha)
        tree_capacity = 1
        while tree_capacity < self.capacity:
            tree_capacity *= 2
        self._sum_tree = SumSegmentTree(tree_capacity)
        self._min_tree = MinSegmentTree(tree_capacity)
        self._max_priority = 1.0

    def add(
        self,
        batch: SampleBatch | MultiAgentBatch,
        priorities: np.ndarray | None = None,
        weight: float | None = None,
        **kwargs: Any,
    ) -> np.ndarray:
        """Stores `batch` as one item (see `ReplayBuffer.add`) with priority `weight`
        (default: the largest priority seen so far, so that every new item is replayed
        at least once with high probability).

        Args:
            batch: the item.
            priorities: a one-row item's priority, as a sequence of one.
            weight: the priority of every item added (RLlib 1.13's argument).
            **kwargs: RLlib's other call arguments; ignored.

        Raises:
            ValueError: `priorities` for more than one row (`add_timesteps` takes them).
        """
        return super().add(batch, priorities=priorities, weight=weight)

    def add_timesteps(
        self,
        batch: SampleBatch,
        priorities: np.ndarray | None = None,
        weight: float | None = None,
        **kwargs: Any,
    ) -> np.ndarray:
        """Stores each row of `batch` as an item of its own (see
        `ReplayBuffer.add_timesteps`), with the given priorities (default: the largest
        priority seen so far).

        Args:
            batch: the rows.
            priorities: one per row.
            weight: one priority for every row.
            **kwargs: RLlib's other call arguments; ignored.

        Raises:
            ValueError: `priorities` of the wrong length.
        """
        n = batch.count
        if weight is not None:
            priorities = np.full(n, float(weight))
        if priorities is not None:
            priorities = np.asarray(priorities, dtype=np.float64).reshape(-1)
            if len(priorities) != n:
                raise ValueError(f"Got {len(priorities)} priorities for a batch of {n} rows.")
        if self._items is not None:  # (rows stored as items of the list)
            rows = batch.timeslices(1)
            weights = [None] * n if priorities is None else priorities.tolist()
            slots = [self._add_items(row, weight=w) for row, w in zip(rows, weights)]
            return np.concatenate(slots) if slots else np.zeros(0, np.int64)
        if priorities is not None:
            priorities = priorities[max(0, n - self.capacity) :]
        idx = super().add_timesteps(batch)
        if len(idx) == 0:
            return idx
        if priorities is None:
            if len(idx) == 1:  # one transition per env step: no arrays needed
                scaled = self._max_priority**self.alpha
                set_leaf([self._sum_tree, self._min_tree], int(idx[0]), scaled)
                return idx
            priorities = np.full(len(idx), self._max_priority)
        self._set_priorities(idx, priorities)
        return idx

    def _add_items(
        self,
        batch: SampleBatch | MultiAgentBatch,
        priorities: np.ndarray | None = None,
        weight: float | None = None,
        **kwargs: Any,
    ) -> np.ndarray:
        if priorities is not None and weight is None:
            priorities = np.asarray(priorities, dtype=np.float64).reshape(-1)
            if len(priorities) != 1:
                raise ValueError(
                    f"Got {len(priorities)} priorities for one item; give `weight` (one "
                    "priority for every item added), or add rows with add_timesteps()."
                )
            weight = float(priorities[0])
        idx = super()._add_items(batch)
        if len(idx):
            scale = self._max_priority if weight is None else float(weight)
            self._set_priorities(idx, np.full(len(idx), scale))
        return idx

    def sample(
        self, num_items: int, beta: float = 0.4, **kwargs: Any
    ) -> SampleBatch | MultiAgentBatch:
        """`num_items` rows (items) drawn with P(i) ∝ p_i^alpha, with columns `weights`
        (importance weights, max-normalised) and `batch_indexes` (for
        `update_priorities`)."""
        self._check_not_empty()
        if beta < 0:
            raise ValueError(f"Prioritized replay beta must be >= 0, got {beta}.")
        idx = self._sum_tree.sample_idx(self._rng.random(num_items))
        np.minimum(idx, self._size - 1, out=idx)
        # w_i = (N P(i))^-beta / max_j w_j, and the largest weight belongs to the smallest
        # P: w_i = (P(i) / P_min)^-beta = (p_i^alpha / min_k p_k^alpha)^-beta.
        weights = self._sum_tree.leaves[idx]
        weights /= self._min_tree.min()
        np.power(weights, -beta, out=weights)
        batch = self._take(idx)
        if isinstance(batch, MultiAgentBatch):  # (items of all policies: no weights, as in RLlib)
            return batch
        if self._items is not None:  # one weight and index per row of each item
            counts = [self._items[i].count for i in idx]
            weights, idx = np.repeat(weights, counts), np.repeat(idx, counts)
        batch[WEIGHTS] = weights.astype(np.float32)
        batch[BATCH_INDEXES] = idx.astype(np.int64, copy=False)
        return batch

    def update_priorities(self, idxes: np.ndarray, priorities: np.ndarray) -> None:
        """Sets new priorities (e.g. |TD error| + eps, all > 0) of sampled rows."""
        idxes = np.asarray(idxes, dtype=np.int64).reshape(-1)
        priorities = np.asarray(priorities, dtype=np.float64).reshape(-1)
        if len(idxes) != len(priorities):
            raise ValueError(f"Got {len(priorities)} priorities for {len(idxes)} indexes.")
        if len(idxes) == 0:
            return
        # (Two reductions check them all: a NaN makes the minimum NaN, which is not > 0.)
        lowest, highest = float(priorities.min()), float(priorities.max())
        if not (lowest > 0 and math.isfinite(highest)):
            raise ValueError(
                f"Priorities must be finite and > 0, got min {lowest}, max {highest} "
                "(add prioritized_replay_eps to |td_error|)."
            )
        first, last = int(idxes.min()), int(idxes.max())
        if first < 0 or last >= self._size:
            raise IndexError(f"Priority indexes must be in [0, {self._size}), got {first}..{last}.")
        self._set_priorities(idxes, priorities, highest, last)

    def _set_priorities(
        self,
        idx: np.ndarray,
        priorities: np.ndarray,
        highest: float | None = None,
        last: int | None = None,
    ) -> None:
        """Sets the rows' priorities (`highest`: their maximum, `last`: the largest index,
        when the caller has them)."""
        # With duplicate indexes the last priority wins, as in a sequential loop.
        idx = np.asarray(idx, dtype=np.int64)
        if last is None:
            last = int(idx.max())
        write_leaves([self._sum_tree, self._min_tree], idx, priorities**self.alpha, last)
        if highest is None:
            highest = float(priorities.max())
        self._max_priority = max(self._max_priority, highest)

    def stats(self, debug: bool = False) -> dict[str, Any]:
        return {**super().stats(debug), "max_priority": self._max_priority, "alpha": self.alpha}

    # -- RLlib 1.x's protected state, for subclasses (see `ReplayBuffer._storage`) --
    # (`_max_priority` is an attribute of both; 1.13's `_prio_change_stats` would need
    # work on every priority update: not kept.)

    @property
    def _it_sum(self) -> SumSegmentTree:
        """RLlib 1.x's `_it_sum`: the sum tree of the slots' priority^alpha (1.x
        subclassing surface; the buffer's own tree, so writes change sampling)."""
        return self._sum_tree

    @property
    def _it_min(self) -> MinSegmentTree:
        """RLlib 1.x's `_it_min`: the min tree of the slots' priority^alpha (1.x
        subclassing surface; the buffer's own tree)."""
        return self._min_tree

    @property
    def _alpha(self) -> float:
        """RLlib 1.x's `_alpha`: the prioritisation exponent, `alpha` (1.x subclassing
        surface)."""
        return self.alpha

    def get_state(self) -> dict[str, Any]:
        state = super().get_state()
        order = self._chronological_indices()
        state["priorities"] = np.ascontiguousarray(
            self._sum_tree[order] ** (1.0 / self.alpha) if self.alpha > 0 else np.ones(len(order))
        )
        state["max_priority"] = self._max_priority
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        tree_capacity = self._sum_tree.capacity
        self._sum_tree = SumSegmentTree(tree_capacity)
        self._min_tree = MinSegmentTree(tree_capacity)
        super().set_state(state)
        if self._size:
            priorities = np.asarray(state["priorities"], dtype=np.float64)[-self._size :]
            self._set_priorities(self._chronological_indices(), priorities)
        self._max_priority = float(state.get("max_priority", 1.0))
