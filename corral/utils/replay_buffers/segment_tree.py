"""Sum and min trees over a power-of-two number of leaves, vectorised with numpy.

Prioritized replay (Schaul et al. 2016, "Prioritized Experience Replay",
arXiv:1511.05952, appendix B.2.1) samples item i with probability
p_i^alpha / sum_k p_k^alpha. A sum tree answers "which item holds the
cumulative mass m"; a min tree gives min_k p_k^alpha for the largest
importance weight. (RLlib's names: `SegmentTree`, `SumSegmentTree`,
`MinSegmentTree`.)

Layout: a tree of height two. The leaves are cut into blocks of `block_size`
consecutive leaves, and `blocks[b]` holds `op` over block b; the root is `op` over the
blocks. Replay calls these once per env step on a few dozen rows (add, sample, new
priorities), where each numpy call's fixed cost is the time, not the arithmetic: a
binary tree walks log2(capacity) levels with a few calls each (16 levels for 65,536
leaves), while here an update is one gather and one reduction over the touched blocks,
and a search one cumulative sum over the blocks and one over each query's block. The
block size balances those two sums (2,048 blocks of 32 leaves for 65,536 leaves). Each
block's value is recomputed from its leaves, never adjusted by differences, so nothing
drifts however many updates run.
"""

from __future__ import annotations

import math

import numpy as np

# The rows of one replay sample that the block size is balanced for: a search gathers
# one block per query (queries x block_size leaves) and sums over all blocks
# (capacity / block_size), which cost alike at block_size = sqrt(capacity / queries).
_TYPICAL_QUERIES = 64


def _block_size(capacity: int) -> int:
    """A power of two near sqrt(capacity / _TYPICAL_QUERIES), at least 8, at most capacity."""
    target = max(8.0, (capacity / _TYPICAL_QUERIES) ** 0.5)
    return min(capacity, 1 << round(math.log2(target)))


class SegmentTree:
    """Leaves whose blocks and root hold `op` of what is below them.

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
        self.block_size = _block_size(capacity)
        self.leaves = np.full(capacity, neutral, dtype=np.float64)
        self.blocks = np.full(capacity // self.block_size, neutral, dtype=np.float64)

    def __setitem__(self, idx: np.ndarray | int, value: np.ndarray | float) -> None:
        set_leaves([self], idx, value)

    def __getitem__(self, idx: np.ndarray | int) -> np.ndarray:
        return self.leaves[np.asarray(idx)]

    def reduce(self) -> float:
        """`op` over all leaves (the root)."""
        return float(self.op.reduce(self.blocks))

    def _refresh_blocks(self, blocks: np.ndarray | int) -> None:
        """Recomputes the values of `blocks` (one index or an array of them) from their leaves."""
        k = self.block_size
        if isinstance(blocks, int):
            self.blocks[blocks] = self.op.reduce(self.leaves[blocks * k : (blocks + 1) * k])
        else:
            self.blocks[blocks] = self.op.reduce(self.leaves.reshape(-1, k)[blocks], axis=1)


def set_leaves(trees: list[SegmentTree], idx: np.ndarray | int, value: np.ndarray | float) -> None:
    """`tree[idx] = value` for trees of one capacity (prioritized replay's sum and
    min trees). With duplicate indexes the last value wins, as in a sequential loop."""
    capacity, k = trees[0].capacity, trees[0].block_size
    if any(tree.capacity != capacity for tree in trees):
        raise ValueError("set_leaves needs trees of one capacity.")
    if np.size(idx) == 1 and np.size(value) == 1:  # e.g. one transition added
        one = int(np.reshape(idx, -1)[0])
        if not -capacity <= one < capacity:
            raise IndexError(f"leaf index {one} is out of range for {capacity} leaves")
        one %= capacity
        v = float(np.reshape(value, -1)[0])
        for tree in trees:
            tree.leaves[one] = v
            tree._refresh_blocks(one // k)
        return
    leaves = np.atleast_1d(np.asarray(idx, dtype=np.int64))
    # (Negative indexes count from the end, as numpy's; a block listed twice gets the
    # same value twice, from leaves already final.)
    blocks = leaves // k
    for tree in trees:
        tree.leaves[leaves] = value
        tree._refresh_blocks(blocks)


class SumSegmentTree(SegmentTree):
    """Sums of leaves; `find_prefixsum_idx` inverts the cumulative sum."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity, np.add, 0.0)

    def sum(self) -> float:
        return self.reduce()

    def find_prefixsum_idx(self, prefixsum: np.ndarray) -> np.ndarray:
        """For each mass m, the leaf j with sum(leaves[:j]) <= m < sum(leaves[:j+1]).

        Two steps for all queries together: the block holding the mass (a cumulative
        sum over the blocks), then the leaf inside it (a cumulative sum over each
        query's block, with the mass before the block subtracted). A mass at or above
        the total (rounding) ends in the last non-empty leaf.
        """
        mass = np.asarray(prefixsum, dtype=np.float64).reshape(-1)
        k = self.block_size
        before = np.cumsum(self.blocks)  # the mass up to and including each block
        # Just below the total at most: a mass there falls in the last non-empty block.
        mass = np.minimum(mass, np.nextafter(before[-1], -np.inf))
        block = np.searchsorted(before, mass, side="right")
        mass -= np.where(block > 0, before[np.maximum(block - 1, 0)], 0.0)
        cum = np.cumsum(self.leaves.reshape(-1, k)[block], axis=1)
        # The first leaf whose cumulative sum exceeds the mass, which is again kept just
        # below the block's total: at most the block's last non-empty leaf.
        np.minimum(mass, np.nextafter(cum[:, -1], -np.inf), out=mass)
        leaf = (cum > mass[:, None]).argmax(axis=1)
        return block * k + leaf


class MinSegmentTree(SegmentTree):
    """Minimum of the leaves."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity, np.minimum, np.inf)

    def min(self) -> float:
        return self.reduce()
