"""Segment-tree updates (scalar fast path, batched, both trees at once) against a rebuild."""

from __future__ import annotations

import numpy as np
import pytest

from corral.utils.replay_buffers import segment_tree
from corral.utils.replay_buffers.segment_tree import MinSegmentTree, SumSegmentTree, set_leaves


def _assert_rebuilt(tree, leaves: np.ndarray) -> None:
    """The tree holds `leaves`, each block `op` over its leaves, the root `op` over all."""
    np.testing.assert_array_equal(tree.leaves, leaves)
    blocks = tree.op.reduce(leaves.reshape(-1, tree.block_size), axis=1)
    np.testing.assert_allclose(tree.blocks, blocks)
    np.testing.assert_allclose(tree.reduce(), tree.op.reduce(leaves))


def test_random_updates_match_a_rebuilt_tree() -> None:
    rng = np.random.default_rng(0)
    trees = [SumSegmentTree(64), MinSegmentTree(64)]
    refs = [np.full(64, t.neutral) for t in trees]
    for step in range(300):
        if step % 3 == 0:
            idx, value = int(rng.integers(64)), float(rng.random())
        else:  # with duplicates: the last value wins, as in a sequential loop
            idx, value = rng.integers(0, 64, 10), rng.random(10)
        if step % 2:
            set_leaves(trees, idx, value)
        else:
            for tree in trees:
                tree[idx] = value
        for ref in refs:
            for i, v in zip(np.atleast_1d(idx), np.atleast_1d(value)):
                ref[i] = v
        for tree, ref in zip(trees, refs):
            _assert_rebuilt(tree, ref)


def test_prefix_search_matches_the_cumulative_sum() -> None:
    rng = np.random.default_rng(1)
    tree = SumSegmentTree(256)
    leaves = rng.random(256) * (rng.random(256) < 0.8)  # some empty leaves
    tree[np.arange(256)] = leaves
    mass = rng.random(1000) * tree.sum()
    # The leaf j with sum(leaves[:j]) <= m < sum(leaves[:j + 1]).
    expected = np.searchsorted(np.cumsum(leaves), mass, side="right")
    found = tree.find_prefixsum_idx(mass)
    # Ties between equal cumulative sums (empty leaves) go to the first non-empty leaf.
    np.testing.assert_array_equal(found, expected)


@pytest.mark.parametrize("capacity", [1, 8, 4096, 1 << 16])
def test_blocks_cover_every_capacity(capacity: int) -> None:
    """Every power of two gets whole blocks; the prefix search and both roots agree with
    numpy over random leaves, the last leaf and negative indexes included."""
    rng = np.random.default_rng(capacity)
    total, low = SumSegmentTree(capacity), MinSegmentTree(capacity)
    assert capacity % total.block_size == 0
    leaves = rng.random(capacity) + 0.01
    set_leaves([total, low], np.arange(capacity), leaves)
    set_leaves([total, low], -1, 2.0)  # the scalar path, counted from the end
    leaves[-1] = 2.0
    _assert_rebuilt(total, leaves)
    _assert_rebuilt(low, leaves)
    mass = rng.random(500) * total.sum()
    expected = np.searchsorted(np.cumsum(leaves), mass, side="right")
    np.testing.assert_array_equal(total.find_prefixsum_idx(mass), expected)
    with pytest.raises(IndexError):
        set_leaves([total, low], capacity, 1.0)


def test_mass_at_the_total_ends_in_the_last_non_empty_leaf() -> None:
    tree = SumSegmentTree(64)
    tree[np.arange(20)] = np.ones(20)  # leaves 20..63 empty, as in a part-filled buffer
    np.testing.assert_array_equal(tree.find_prefixsum_idx(np.array([20.0, 25.0])), [19, 19])


def test_searches_and_roots_cover_only_the_blocks_written() -> None:
    """Until a buffer fills, the blocks after the last one written stay neutral and are
    left out of the roots and the search; every way of writing moves that bound."""
    total, low = SumSegmentTree(1 << 12), MinSegmentTree(1 << 12)
    k = total.block_size
    assert (total.used_blocks, low.used_blocks) == (0, 0)
    assert (total.sum(), low.min()) == (0.0, np.inf)
    set_leaves([total, low], 3, 0.5)  # one leaf
    assert (total.used_blocks, low.used_blocks) == (1, 1)
    set_leaves([total, low], np.array([2 * k + 1, 1]), np.array([2.0, 0.25]))  # a batch
    assert total.used_blocks == low.used_blocks == 3
    total[-1] = 4.0  # counted from the end: the last block
    assert total.used_blocks == total.blocks.size
    fresh = MinSegmentTree(1 << 12)
    fresh[np.array([5, -k - 1])] = np.array([1.0, 2.0])  # a batch counted from the end
    assert fresh.used_blocks == fresh.blocks.size - 1
    assert fresh.min() == 1.0 and fresh.leaves[-k - 1] == 2.0
    leaves = np.zeros(total.capacity)
    leaves[[3, 2 * k + 1, 1, -1]] = [0.5, 2.0, 0.25, 4.0]
    _assert_rebuilt(total, leaves)
    assert low.min() == 0.25
    mass = np.linspace(0.0, total.sum(), 50)
    expected = np.minimum(
        np.searchsorted(np.cumsum(leaves), mass, side="right"), total.capacity - 1
    )
    np.testing.assert_array_equal(total.find_prefixsum_idx(mass), expected)


def test_mass_at_the_total_skips_emptied_blocks() -> None:
    """A leaf set back to 0 leaves its block counted as written but empty: a mass at the
    total still ends in the last non-empty leaf, in an earlier block."""
    tree = SumSegmentTree(256)
    k = tree.block_size
    tree[np.arange(3 * k)] = np.ones(3 * k)
    tree[np.arange(2 * k, 3 * k)] = np.zeros(k)
    assert tree.used_blocks == 3
    found = tree.find_prefixsum_idx(np.array([2.0 * k, 5.0 * k, 2.0 * k - 0.5]))
    np.testing.assert_array_equal(found, [2 * k - 1, 2 * k - 1, 2 * k - 1])


def test_out_of_range_indexes_raise_before_anything_is_written() -> None:
    total, low = SumSegmentTree(64), MinSegmentTree(64)
    for bad in (np.array([1, 64]), np.array([-65, 2]), 64, -65):
        with pytest.raises(IndexError, match="out of range"):
            set_leaves([total, low], bad, 1.0)
    assert total.sum() == 0.0 and low.min() == np.inf
    assert total.used_blocks == low.used_blocks == 0


@pytest.mark.parametrize("flat", [True, False])
@pytest.mark.parametrize("matmul", [True, False])
@pytest.mark.parametrize("used", [5, 300, 4096])
def test_every_search_path_matches_the_cumulative_sum(monkeypatch, flat, matmul, used) -> None:
    """The flat search (few used leaves) and the two-step one, its in-block sums by the
    triangle product (small blocks) or by `np.cumsum` (large ones), find the same leaves,
    also for masses at or over the total and with empty leaves."""
    monkeypatch.setattr(segment_tree, "_FLAT_SEARCH_LEAVES", 1 << 30 if flat else 0)
    monkeypatch.setattr(segment_tree, "_MATMUL_BLOCK_LEAVES", 1 << 30 if matmul else 0)
    rng = np.random.default_rng(used)
    tree = SumSegmentTree(1 << 13)
    assert (tree._triangle is not None) is matmul
    leaves = np.zeros(tree.capacity)
    leaves[:used] = rng.random(used) * (rng.random(used) < 0.8)
    leaves[used - 1] = 0.0  # the last written leaf empty
    tree[np.arange(used)] = leaves[:used]
    total = tree.sum()
    mass = np.concatenate([rng.random(500) * total, [0.0, total, 2 * total]])
    expected = np.searchsorted(np.cumsum(leaves), np.minimum(mass, total), side="right")
    last = int(np.flatnonzero(leaves)[-1])
    np.testing.assert_array_equal(tree.find_prefixsum_idx(mass), np.minimum(expected, last))
    fractions = rng.random(200)
    expected = np.searchsorted(np.cumsum(leaves), fractions * total, side="right")
    np.testing.assert_array_equal(tree.sample_idx(fractions.copy()), expected)


def test_large_blocks_search_by_cumulative_sums() -> None:
    """A buffer of 2^20 slots has blocks of 128 leaves: their sums are cumulative sums,
    not the triangle product (which grows with the block size squared)."""
    tree = SumSegmentTree(1 << 20)
    assert tree.block_size == 128 and tree._triangle is None
    tree[np.arange(5000)] = np.ones(5000)
    np.testing.assert_array_equal(
        tree.find_prefixsum_idx(np.array([0.5, 4321.5, 4999.9])), [0, 4321, 4999]
    )
