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
and a search one cumulative sum over the blocks and one over each query's block (below). The
block size balances those two sums (2,048 blocks of 32 leaves for 65,536 leaves). Each
block's value is recomputed from its leaves, never adjusted by differences, so nothing
drifts however many updates run.

Two more things keep a search cheap (numpy's cumulative sum takes about 4 ns per
element, sequentially):

- The blocks after the last one ever written hold the neutral value, so the roots and
  the search cover only the blocks up to it (`used_blocks`): a replay buffer fills its
  leaves from the first, and until it is full most blocks are empty.
- The queries' blocks are summed cumulatively in one small matrix product with an
  upper-triangular matrix of ones (about 3 us for 64 blocks of 32 leaves, against 9 us
  for `np.cumsum(..., axis=1)`). Its sums may round differently from a sequential
  cumulative sum, by an ulp: a mass that close to a boundary may land on either side.
  The product grows with the square of the block size and falls off the BLAS kernels'
  fast path beyond 64 leaves (0.6 ms for 64 blocks of 128 leaves, a capacity of 2^20,
  against 0.08 ms for the cumulative sum): larger blocks use `np.cumsum`.
- While few leaves are used (`_FLAT_SEARCH_LEAVES`), one cumulative sum over them all
  and a binary search (a prioritized buffer's first thousands of rows) costs less than
  the two steps.
"""

from __future__ import annotations

import math
import operator
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

# The rows of one replay sample that the block size is balanced for: a search gathers
# one block per query (queries x block_size leaves) and sums over all blocks
# (capacity / block_size), which cost alike at block_size = sqrt(capacity / queries).
_TYPICAL_QUERIES = 64
# Blocks of at most this many leaves are summed cumulatively by the triangle product.
_MATMUL_BLOCK_LEAVES = 64
# Up to this many used leaves, a search is one cumulative sum over them (about 1 ns a
# leaf) instead of the two steps (a fixed 20-30 us for 64 queries).
_FLAT_SEARCH_LEAVES = 4096


def _block_size(capacity: int) -> int:
    """A power of two near sqrt(capacity / _TYPICAL_QUERIES), at least 8, at most capacity."""
    target = max(8.0, (capacity / _TYPICAL_QUERIES) ** 0.5)
    return min(capacity, 1 << round(math.log2(target)))


# RLlib 1.13's Python combining functions and the ufuncs that compute them on arrays.
_UFUNCS: dict[Any, np.ufunc] = {operator.add: np.add, min: np.minimum, max: np.maximum}


def _as_ufunc(fn: Callable[[Any, Any], Any]) -> np.ufunc:
    """`fn` as a numpy ufunc (see `SegmentTree`'s `operation`)."""
    if isinstance(fn, np.ufunc):
        return fn
    known = _UFUNCS.get(fn)
    if known is not None:
        return known
    if not callable(fn):
        raise TypeError(f"SegmentTree's operation must be callable, got {fn!r}.")
    return np.frompyfunc(fn, 2, 1)


class SegmentTree:
    """Leaves whose blocks and root hold `op` of what is below them.

    Args:
        capacity: number of leaves (a power of two).
        operation: how two values combine: a numpy ufunc that is associative (np.add,
            np.minimum, np.maximum), or RLlib 1.13's Python callable (`operator.add`,
            `min`, `max`: their ufuncs; any other two-argument callable runs through
            `np.frompyfunc`, slowly). corral's older name: `op`.
        neutral_element: the value of an empty leaf for `operation` (None: 0.0 for a
            sum, -inf for a max, +inf otherwise, as RLlib 1.13). Older name: `neutral`.

    Raises:
        ValueError: `capacity` is not a power of two, or no `operation` is given.
        TypeError: both names of one argument are given.
    """

    def __init__(
        self,
        capacity: int,
        operation: Callable[[Any, Any], Any] | None = None,
        neutral_element: float | None = None,
        *,
        op: Callable[[Any, Any], Any] | None = None,
        neutral: float | None = None,
    ) -> None:
        if capacity < 1 or capacity & (capacity - 1):
            raise ValueError(f"Segment tree capacity must be a power of two, got {capacity}.")
        if operation is not None and op is not None:
            raise TypeError("SegmentTree: pass `operation` (or its older name `op`), not both.")
        if neutral_element is not None and neutral is not None:
            raise TypeError(
                "SegmentTree: pass `neutral_element` (or its older name `neutral`), not both."
            )
        fn = operation if operation is not None else op
        if fn is None:
            raise ValueError("SegmentTree needs an `operation` (e.g. np.add or operator.add).")
        self.capacity = capacity
        self.op = _as_ufunc(fn)
        # RLlib 1.13's name of the combining function (as it was given).
        self.operation = fn
        if neutral_element is None:
            neutral_element = neutral
        if neutral_element is None:
            neutral_element = (
                0.0 if self.op is np.add else -np.inf if self.op is np.maximum else np.inf
            )
        self.neutral = float(neutral_element)
        self.block_size = _block_size(capacity)
        self.leaves = np.full(capacity, self.neutral, dtype=np.float64)
        self.blocks = np.full(capacity // self.block_size, self.neutral, dtype=np.float64)
        # Blocks [used_blocks:] have never been written: they hold `neutral`.
        self.used_blocks = 0

    @property
    def neutral_element(self) -> float:
        """RLlib 1.13's name of `neutral`."""
        return self.neutral

    def __setitem__(self, idx: np.ndarray | int, value: np.ndarray | float) -> None:
        set_leaves([self], idx, value)

    def __getitem__(self, idx: np.ndarray | int) -> np.ndarray:
        return self.leaves[np.asarray(idx)]

    def reduce(self, start: int = 0, end: int | None = None) -> float:
        """`op` over the leaves `start` to `end` (excluded; None: to the last, negative:
        counted from the end, as RLlib 1.13): by default all of them (the root). An
        empty range gives the neutral element."""
        if start == 0 and end is None:
            if self.used_blocks == 0:
                return float(self.neutral)
            return float(self.op.reduce(self.blocks[: self.used_blocks]))
        if end is None:
            end = self.capacity
        elif end < 0:
            end += self.capacity
        if not 0 <= start <= self.capacity or not 0 <= end <= self.capacity:
            raise IndexError(f"reduce({start}, {end}) is out of range for {self.capacity} leaves.")
        if start >= end:
            return float(self.neutral)
        k = self.block_size
        # Whole blocks from their values, the partial blocks at the ends from leaves.
        first, last = -(-start // k), end // k
        if first >= last:
            return float(self.op.reduce(self.leaves[start:end]))
        parts = [
            self.leaves[start : first * k],
            self.blocks[first:last],
            self.leaves[last * k : end],
        ]
        return float(self.op.reduce(np.concatenate(parts)))

    def get_state(self) -> list[float]:
        """RLlib 1.13's state: `2 * capacity` values, the leaves at `[capacity:]` and at
        each `i` in `[1, capacity)` `op` of the values at `2i` and `2i + 1` (a binary
        tree over them; index 0 is unused and holds the neutral element)."""
        value = np.full(2 * self.capacity, self.neutral, dtype=np.float64)
        level = self.leaves
        value[self.capacity :] = level
        while len(level) > 1:
            level = self.op(level[0::2], level[1::2])
            value[len(level) : 2 * len(level)] = level
        return value.tolist()

    def set_state(self, state: Sequence[float] | np.ndarray) -> None:
        """Restores the leaves from `get_state()`'s values (`2 * capacity` of them, as
        RLlib 1.13's; only the leaves at `[capacity:]` are read) or from the leaves alone
        (`capacity` values).

        Raises:
            ValueError: `state` has another length.
        """
        values = np.asarray(state, dtype=np.float64).reshape(-1)
        if len(values) == 2 * self.capacity:
            values = values[self.capacity :]
        elif len(values) != self.capacity:
            raise ValueError(
                f"A segment tree state of {len(values)} values does not fit capacity "
                f"{self.capacity} (2 * capacity values, or the capacity's leaves)."
            )
        self.leaves[:] = values
        self.blocks[:] = self.neutral
        written = np.flatnonzero(values != self.neutral)
        self.used_blocks = int(written[-1]) // self.block_size + 1 if len(written) else 0
        if self.used_blocks:
            self._refresh_blocks(np.arange(self.used_blocks))

    def _refresh_block(self, block: int) -> None:
        """Recomputes block `block`'s value from its leaves."""
        k = self.block_size
        self.blocks[block] = self.op.reduce(self.leaves[block * k : (block + 1) * k])

    def _refresh_blocks(self, blocks: np.ndarray) -> None:
        """Recomputes the values of `blocks` (an array of block indexes) from their leaves."""
        # (`ndarray.take` gathers rows about 4x faster than `leaves2d[blocks]` does.)
        leaves = self.leaves.reshape(-1, self.block_size).take(blocks, axis=0)
        self.blocks[blocks] = self.op.reduce(leaves, axis=1)


def set_leaves(trees: list[SegmentTree], idx: np.ndarray | int, value: np.ndarray | float) -> None:
    """`tree[idx] = value` for trees of one capacity (prioritized replay's sum and
    min trees). With duplicate indexes the last value wins, as in a sequential loop."""
    capacity = trees[0].capacity
    if any(tree.capacity != capacity for tree in trees):
        raise ValueError("set_leaves needs trees of one capacity.")
    if np.size(idx) == 1 and np.size(value) == 1:  # e.g. one transition added
        set_leaf(trees, int(np.reshape(idx, -1)[0]), float(np.reshape(value, -1)[0]))
        return
    leaves = np.atleast_1d(np.asarray(idx, dtype=np.int64))
    if len(leaves) == 0:
        return
    lowest, highest = int(leaves.min()), int(leaves.max())
    if lowest < -capacity or highest >= capacity:
        bad = lowest if lowest < -capacity else highest
        raise IndexError(f"leaf index {bad} is out of range for {capacity} leaves")
    if lowest < 0:  # counted from the end, as numpy's indexes
        leaves = leaves % capacity
        highest = int(leaves.max())
    write_leaves(trees, leaves, value, highest)


def write_leaves(
    trees: list[SegmentTree], leaves: np.ndarray, value: np.ndarray | float, highest: int
) -> None:
    """`set_leaves` for indexes already checked: `leaves` an int64 array of indexes in
    [0, capacity), `highest` their maximum. (Prioritized replay checks its indexes
    against its size anyway, and calls this once per gradient step.)"""
    # (A block listed twice gets the same value twice, from leaves already final.)
    blocks = leaves // trees[0].block_size
    used = highest // trees[0].block_size + 1
    for tree in trees:
        tree.leaves[leaves] = value
        tree._refresh_blocks(blocks)
        if used > tree.used_blocks:
            tree.used_blocks = used


def set_leaf(trees: list[SegmentTree], idx: int, value: float) -> None:
    """`tree[idx] = value` for one leaf of trees of one capacity."""
    capacity = trees[0].capacity
    if not -capacity <= idx < capacity:
        raise IndexError(f"leaf index {idx} is out of range for {capacity} leaves")
    idx %= capacity
    block = idx // trees[0].block_size
    for tree in trees:
        tree.leaves[idx] = value
        tree._refresh_block(block)
        if block >= tree.used_blocks:
            tree.used_blocks = block + 1


class SumSegmentTree(SegmentTree):
    """Sums of leaves; `find_prefixsum_idx` inverts the cumulative sum."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity, np.add, 0.0)
        k = self.block_size
        self._ones = np.ones(k)  # block_leaves @ _ones: each row's sum
        # block_leaves @ _triangle: each row's cumulative sums (None: `np.cumsum`).
        self._triangle = np.triu(np.ones((k, k))) if k <= _MATMUL_BLOCK_LEAVES else None

    def sum(self, start: int = 0, end: int | None = None) -> float:
        """The sum of the leaves `start` to `end` (excluded; see `reduce`), all by default."""
        return self.reduce(start, end)

    def _refresh_blocks(self, blocks: np.ndarray) -> None:
        # The rows' sums as one matrix-vector product (1 us for 64 blocks of 32 leaves,
        # against 2.4 us for `np.add.reduce(..., axis=1)`).
        leaves = self.leaves.reshape(-1, self.block_size).take(blocks, axis=0)
        self.blocks[blocks] = leaves @ self._ones

    def find_prefixsum_idx(self, prefixsum: np.ndarray) -> np.ndarray:
        """For each mass m, the leaf j with sum(leaves[:j]) <= m < sum(leaves[:j+1]).

        Two steps for all queries together: the block holding the mass (a cumulative
        sum over the used blocks), then the leaf inside it (cumulative sums over each
        query's block, with the mass before the block subtracted); or, while few leaves
        are used, one cumulative sum over them. A mass at or above the total (rounding)
        ends in the last non-empty leaf.
        """
        mass = np.array(prefixsum, dtype=np.float64).reshape(-1)  # (a copy: changed below)
        return self._search(mass)

    def sample_idx(self, fractions: np.ndarray) -> np.ndarray:
        """`find_prefixsum_idx(fractions * sum())`, the total taken from the search's own
        cumulative sum (prioritized replay's draw: `fractions` uniform in [0, 1)).
        `fractions` (float64) is overwritten."""
        return self._search(fractions, scale=True)

    def _search(self, mass: np.ndarray, scale: bool = False) -> np.ndarray:
        """`find_prefixsum_idx` of `mass` (float64, overwritten), or of `mass * total`."""
        used = max(self.used_blocks, 1)
        k = self.block_size
        if used * k <= _FLAT_SEARCH_LEAVES:
            cum = np.cumsum(self.leaves[: used * k])
            if scale:
                mass *= cum[-1]
            # Just below the total at most: the first leaf whose cumulative sum exceeds
            # the mass is then at most the last non-empty leaf.
            np.minimum(mass, math.nextafter(float(cum[-1]), -math.inf), out=mass)
            return np.searchsorted(cum, mass, side="right")
        prefix = np.zeros(used + 1)  # prefix[b]: the mass before block b
        np.cumsum(self.blocks[:used], out=prefix[1:])
        if scale:
            mass *= prefix[-1]
        # Just below the total at most: a mass there falls in the last non-empty block.
        np.minimum(mass, math.nextafter(float(prefix[-1]), -math.inf), out=mass)
        block = np.searchsorted(prefix[1:], mass, side="right")
        mass -= prefix[block]
        leaves = self.leaves.reshape(-1, k).take(block, axis=0)
        cum = leaves @ self._triangle if self._triangle is not None else leaves.cumsum(axis=1)
        # The first leaf whose cumulative sum exceeds the mass, which is again kept just
        # below the block's total: at most the block's last non-empty leaf.
        np.minimum(mass, np.nextafter(cum[:, -1], -np.inf), out=mass)
        leaf = (cum > mass[:, None]).argmax(axis=1)
        return block * k + leaf


class MinSegmentTree(SegmentTree):
    """Minimum of the leaves."""

    def __init__(self, capacity: int) -> None:
        super().__init__(capacity, np.minimum, np.inf)

    def min(self, start: int = 0, end: int | None = None) -> float:
        """The minimum of the leaves `start` to `end` (excluded; see `reduce`), all by
        default."""
        return self.reduce(start, end)
