"""Prioritized replay's search, each of its paths against the one it replaced.

A prioritized buffer draws a train batch with one `SumSegmentTree` search of 64 masses
(`PrioritizedReplayBuffer.sample`). The tree searches one of three ways
(`corral.utils.replay_buffers.segment_tree`):

- `flat`: while few leaves are used, one cumulative sum over them and a binary search;
- `two_step_triangle`: the blocks' cumulative sum, then each mass's block summed by a
  product with a triangle of ones (blocks of up to 64 leaves);
- `two_step_cumsum`: the same with `np.cumsum` inside the blocks (larger blocks).

For each (capacity, used leaves) case the script times the path corral takes now
(`corral`) against the path it took before this choice existed (`before`: always two
steps, always the triangle product), on the same tree in one process, alternating slices
of `--calls` searches, medians over `--repeats`. Both paths find the same leaves (checked).

Usage:
    python benchmarks/replay_search.py
    python benchmarks/replay_search.py --quick
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np
from _common import emit, log, machine_info, median, ratio

# (capacity, used leaves): a DQN buffer early in training and full, and the 2^20 and 2^21
# slots of Atari DQN and Ape-X buffers (blocks of 128 and 256 leaves).
CASES = [
    (1 << 16, 2000),
    (1 << 16, 4000),
    (1 << 16, 1 << 16),
    (1 << 20, 1 << 20),
    (1 << 21, 1 << 21),
]
QUERIES = 64


def _tree(segment_tree: Any, capacity: int, used: int, flat: int, matmul: int) -> Any:
    """A sum tree of `used` random leaves whose searches take the paths the two limits
    allow (`_FLAT_SEARCH_LEAVES`, `_MATMUL_BLOCK_LEAVES` are read at search and build)."""
    segment_tree._FLAT_SEARCH_LEAVES, segment_tree._MATMUL_BLOCK_LEAVES = flat, matmul
    tree = segment_tree.SumSegmentTree(capacity)
    rng = np.random.default_rng(used)
    segment_tree.set_leaves([tree], np.arange(used), rng.random(used) + 0.1)
    return tree


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200, help="searches per slice")
    parser.add_argument("--repeats", type=int, default=9)
    parser.add_argument("--quick", action="store_true", help="smoke test: small cases")
    args = parser.parse_args()
    from corral.utils.replay_buffers import segment_tree

    cases = CASES[:2] if args.quick else CASES
    if args.quick:
        args.calls, args.repeats = 5, 1
    now = (segment_tree._FLAT_SEARCH_LEAVES, segment_tree._MATMUL_BLOCK_LEAVES)
    before = (0, 1 << 30)  # never flat, always the triangle product
    emit({"bench": "replay_search", "machine": machine_info()})
    rng = np.random.default_rng(0)
    summary = []
    for capacity, used in cases:
        sides = {
            "corral": (_tree(segment_tree, capacity, used, *now), now),
            "before": (_tree(segment_tree, capacity, used, *before), before),
        }
        masses = rng.random(QUERIES) * sides["corral"][0].sum()
        found = {}
        for name, (tree, limits) in sides.items():
            segment_tree._FLAT_SEARCH_LEAVES, segment_tree._MATMUL_BLOCK_LEAVES = limits
            found[name] = tree.find_prefixsum_idx(masses)
        agree = float(np.mean(found["corral"] == found["before"]))
        runs: dict[str, list[float]] = {name: [] for name in sides}
        for _ in range(args.repeats):
            for name, (tree, limits) in sides.items():
                segment_tree._FLAT_SEARCH_LEAVES, segment_tree._MATMUL_BLOCK_LEAVES = limits
                t0 = time.perf_counter()
                for _ in range(args.calls):
                    tree.sample_idx(rng.random(QUERIES))
                runs[name].append((time.perf_counter() - t0) / args.calls * 1e6)
        segment_tree._FLAT_SEARCH_LEAVES, segment_tree._MATMUL_BLOCK_LEAVES = now
        us = {name: median(values) for name, values in runs.items()}
        record = {
            "capacity": capacity,
            "used": used,
            "block_size": sides["corral"][0].block_size,
            "median_us": us,
            "corral_over_before": ratio(us["corral"], us["before"]),
            "same_leaves": agree,
        }
        log(f"  {capacity} slots, {used} used: {us['corral']:.1f} us against {us['before']:.1f} us")
        emit({"bench": "replay_search", **record})
        summary.append(record)
    emit({"bench": "replay_search", "summary": True, "queries": QUERIES, "cases": summary})


if __name__ == "__main__":
    main()
