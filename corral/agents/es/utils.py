"""Return processing and the batched noise sum of evolution strategies (ES and ARS).

After the ES starter code of Salimans et al. (2017, arXiv:1703.03864), as RLlib 1.13.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

import numpy as np


def compute_ranks(x: np.ndarray) -> np.ndarray:
    """Ranks of a 1-D array's entries, 0 for the smallest up to `len(x) - 1`.

    Unlike `scipy.stats.rankdata` the ranks start at 0 and ties get distinct ranks.

    Args:
        x: a 1-D array.

    Returns:
        An int array of the same length.
    """
    if x.ndim != 1:
        raise ValueError(f"compute_ranks takes a 1-D array, got shape {x.shape}.")
    ranks = np.empty(len(x), dtype=int)
    ranks[np.argsort(x)] = np.arange(len(x))
    return ranks


def compute_centered_ranks(x: np.ndarray) -> np.ndarray:
    """Fitness shaping: every entry of `x` (any shape) replaced by its rank among all
    entries, scaled to [-0.5, 0.5] (float32). Outliers then weigh no more than any other
    return, and the scale of the rewards does not matter.

    Args:
        x: returns, e.g. `[num_perturbations, 2]` (+ and - perturbation).

    Returns:
        An array of `x`'s shape.
    """
    ranks = compute_ranks(x.ravel()).reshape(x.shape).astype(np.float32)
    # (One entry has rank 0 only: its centred rank is 0, not a division by zero.)
    ranks /= max(x.size - 1, 1)
    ranks -= 0.5
    return ranks


def itergroups(items: Iterable[Any], group_size: int) -> Iterator[tuple]:
    """Consecutive tuples of `group_size` items (the last one may be shorter).

    Args:
        items: any iterable.
        group_size: items per tuple (>= 1).
    """
    if group_size < 1:
        raise ValueError(f"group_size must be >= 1, got {group_size}.")
    group: list[Any] = []
    for item in items:
        group.append(item)
        if len(group) == group_size:
            yield tuple(group)
            group = []
    if group:
        yield tuple(group)


def batched_weighted_sum(
    weights: Iterable[float], vecs: Iterable[np.ndarray], batch_size: int
) -> tuple[np.ndarray | float, int]:
    """`sum_i weights[i] * vecs[i]`, `batch_size` vectors at a time (float32).

    The vectors are read lazily (slices of the noise table), so at most `batch_size`
    of them are stacked at once.

    Args:
        weights: one weight per vector.
        vecs: vectors of one length.
        batch_size: vectors per matrix product.

    Returns:
        (the weighted sum, the number of vectors summed); the sum is 0 when there was
        no vector.
    """
    total: np.ndarray | float = 0.0
    count = 0
    for batch_weights, batch_vecs in zip(
        itergroups(weights, batch_size), itergroups(vecs, batch_size)
    ):
        if len(batch_weights) != len(batch_vecs):
            raise ValueError("batched_weighted_sum needs as many weights as vectors.")
        total = total + np.dot(
            np.asarray(batch_weights, dtype=np.float32), np.asarray(batch_vecs, dtype=np.float32)
        )
        count += len(batch_weights)
    return total, count


__all__ = ["batched_weighted_sum", "compute_centered_ranks", "compute_ranks", "itergroups"]
