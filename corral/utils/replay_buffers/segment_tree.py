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
        if np.ndim(idx) == 0 and np.ndim(value) == 0:
            self._set_one(int(idx), float(value))
            return
        leaves = np.atleast_1d(np.asarray(idx, dtype=np.int64)) + self.capacity
        self.nodes[leaves] = value
        _update_ancestors([self], leaves)

    def _set_one(self, idx: int, value: float) -> None:
        """One leaf: a plain loop over its log2(capacity) ancestors (a replay `add` of
        one transition per env step), cheaper than numpy calls on 1-element arrays."""
        nodes = self.nodes
        node = idx + self.capacity
        nodes[node] = value
        node >>= 1
        if self.op is np.add:
            while node:
                nodes[node] = nodes[2 * node] + nodes[2 * node + 1]
                node >>= 1
        else:
            op = self.op
            while node:
                nodes[node] = op(nodes[2 * node], nodes[2 * node + 1])
                node >>= 1

    def __getitem__(self, idx: np.ndarray | int) -> np.ndarray:
        return self.nodes[np.asarray(idx) + self.capacity]

    def reduce(self) -> float:
        """`op` over all leaves (the root)."""
        return float(self.nodes[1])


def set_leaves(trees: list[SegmentTree], idx: np.ndarray | int, value: np.ndarray | float) -> None:
    """`tree[idx] = value` for trees of one capacity (prioritized replay's sum and
    min trees), walking the ancestors' indexes once for all of them."""
    if np.size(idx) == 1 and np.size(value) == 1:  # e.g. one transition added
        one, v = int(np.reshape(idx, -1)[0]), float(np.reshape(value, -1)[0])
        for tree in trees:
            tree._set_one(one, v)
        return
    capacity = trees[0].capacity
    if any(tree.capacity != capacity for tree in trees):
        raise ValueError("set_leaves needs trees of one capacity.")
    leaves = np.atleast_1d(np.asarray(idx, dtype=np.int64)) + capacity
    for tree in trees:
        tree.nodes[leaves] = value
    _update_ancestors(trees, leaves)


def _update_ancestors(trees: list[SegmentTree], leaves: np.ndarray) -> None:
    """Recomputes the ancestors of the (node indexes) `leaves` in each tree, level by
    level, the children's indexes worked out once per level for all trees.

    A parent listed twice (two updated leaves below it) gets the same value twice, from
    children already final, so no de-duplication (np.unique, a sort per level) is needed.
    """
    parents = leaves >> 1
    while parents[0] >= 1:
        left = parents << 1
        right = left + 1
        for tree in trees:
            nodes = tree.nodes
            nodes[parents] = tree.op(nodes[left], nodes[right])
        parents >>= 1


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
            mass -= left_sum * go_right  # exactly `mass - left_sum` where it goes right
            node = left + go_right
        return node - self.capacity


class MinSegmentTree(SegmentTree):
    """Minimum of the leaves."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity, np.minimum, np.inf)

    def min(self) -> float:
        return self.reduce()
