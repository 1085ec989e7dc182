"""Segment trees over a power-of-two number of leaves, vectorised with numpy.

Prioritized replay (Schaul et al. 2016, "Prioritized Experience Replay",
arXiv:1511.05952, appendix B.2.1) samples item i with probability
p_i^alpha / sum_k p_k^alpha. A sum tree answers "which item holds the
cumulative mass m" in O(log n); a min tree gives min_k p_k^alpha for the
largest importance weight. Both are complete binary trees stored in one
array: node 1 is the root, node i has children 2i and 2i+1, and leaf j
lives at node capacity + j.
"""

from __future__ import annotations

import numpy as np


class SegmentTree:
    """A complete binary tree whose inner nodes hold `op` of their children.

    Args:
        capacity: number of leaves (a power of two).
        op: a numpy ufunc that is associative (np.add, np.minimum).
        neutral: the value of an empty leaf for `op` (0 for a sum, inf for a min).
    """

    def __init__(self, capacity: int, op: np.ufunc, neutral: float) -> None:
        if capacity < 1 or capacity & (capacity - 1):
            raise ValueError(f"Segment tree capacity must be a power of two, got {capacity}.")
        self.capacity = capacity
        self.op = op
        self.neutral = neutral
        self.nodes = np.full(2 * capacity, neutral, dtype=np.float64)

    def __setitem__(self, idx: np.ndarray | int, value: np.ndarray | float) -> None:
        leaves = np.atleast_1d(np.asarray(idx, dtype=np.int64)) + self.capacity
        self.nodes[leaves] = value
        # Recompute the ancestors level by level; a node appears once per level.
        parents = np.unique(leaves // 2)
        while parents[0] >= 1:
            self.nodes[parents] = self.op(self.nodes[2 * parents], self.nodes[2 * parents + 1])
            if parents[0] == 1:
                break
            parents = np.unique(parents // 2)

    def __getitem__(self, idx: np.ndarray | int) -> np.ndarray:
        return self.nodes[np.asarray(idx) + self.capacity]

    def reduce(self) -> float:
        """`op` over all leaves (the root)."""
        return float(self.nodes[1])


class SumSegmentTree(SegmentTree):
    """Sums of leaves; `find_prefixsum_idx` inverts the cumulative sum."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity, np.add, 0.0)

    def sum(self) -> float:
        return self.reduce()

    def find_prefixsum_idx(self, prefixsum: np.ndarray) -> np.ndarray:
        """For each mass m, the leaf j with sum(leaves[:j]) <= m < sum(leaves[:j+1]).

        All queries descend the tree together: at each level a query goes to
        the left child if its mass fits there, else to the right one with the
        left child's sum subtracted.
        """
        mass = np.array(prefixsum, dtype=np.float64, copy=True)
        node = np.ones(len(mass), dtype=np.int64)
        while node[0] < self.capacity:
            left = 2 * node
            left_sum = self.nodes[left]
            go_right = mass >= left_sum
            mass = np.where(go_right, mass - left_sum, mass)
            node = np.where(go_right, left + 1, left)
        return node - self.capacity


class MinSegmentTree(SegmentTree):
    """Minimum of the leaves."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity, np.minimum, np.inf)

    def min(self) -> float:
        return self.reduce()
