"""Segment-tree updates (scalar fast path, batched, both trees at once) against a rebuild."""

from __future__ import annotations

import numpy as np

from corral.utils.replay_buffers.segment_tree import MinSegmentTree, SumSegmentTree, set_leaves


def _rebuilt(tree, leaves: np.ndarray) -> np.ndarray:
    nodes = np.concatenate([np.full(tree.capacity, tree.neutral), leaves])
    for n in range(tree.capacity - 1, 0, -1):
        nodes[n] = tree.op(nodes[2 * n], nodes[2 * n + 1])
    return nodes[1:]


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
            np.testing.assert_allclose(tree.nodes[1:], _rebuilt(tree, ref))


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
