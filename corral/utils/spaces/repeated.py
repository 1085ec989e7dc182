"""RLlib's ``Repeated`` space: a variable-length list (up to ``max_len``) of one child space."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class Repeated(gym.Space):
    """A list of 0..``max_len`` elements of ``child_space`` (e.g. the objects in view).

    Preprocessed (``RepeatedValuesPreprocessor``) it becomes one flat row: the list's
    length, then ``max_len`` slots of the child's flat size (unused slots zero). A model
    gets it back from ``restore_original_dimensions`` as a ``RepeatedValues`` of
    ``[B, max_len, ...]`` values and ``[B]`` lengths.

    Args:
        child_space: the space of each element.
        max_len: the most elements a list can have.
    """

    def __init__(self, child_space: gym.Space, max_len: int) -> None:
        super().__init__()
        self.child_space = child_space
        self.max_len = int(max_len)

    def seed(self, seed: int | None = None) -> list[int]:
        seeds = super().seed(seed)
        self.child_space.seed(None if seed is None else seed + 1)
        return seeds

    def sample(self, mask: Any = None, probability: Any = None) -> list[Any]:
        count = int(self.np_random.integers(1, self.max_len + 1))
        return [self.child_space.sample() for _ in range(count)]

    def contains(self, x: Any) -> bool:
        return (
            isinstance(x, (list, np.ndarray))
            and len(x) <= self.max_len
            and all(self.child_space.contains(c) for c in x)
        )

    @property
    def is_np_flattenable(self) -> bool:
        return False

    def __eq__(self, other: Any) -> bool:
        return (
            isinstance(other, Repeated)
            and self.child_space == other.child_space
            and self.max_len == other.max_len
        )

    def __repr__(self) -> str:
        return f"Repeated({self.child_space}, {self.max_len})"
