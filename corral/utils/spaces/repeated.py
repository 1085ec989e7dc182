"""RLlib's ``Repeated`` space: a variable-length list (up to ``max_len``) of one child space."""

from __future__ import annotations

import functools
import sys
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

    def __new__(cls, child_space: Any = None, max_len: int = 0) -> Repeated:
        # RLlib 1.x code nests a Repeated of old `gym.spaces` inside old gym Dicts and
        # Tuples, which take only old gym spaces: such a Repeated is one of those too.
        if cls is Repeated:
            from corral.env.gym_compat import is_old_gym_space

            if is_old_gym_space(child_space):
                cls = _old_gym_repeated()
        return super().__new__(cls)

    def __init__(self, child_space: gym.Space, max_len: int) -> None:
        super().__init__()
        self.child_space = child_space
        self.max_len = int(max_len)

    def seed(self, seed: int | None = None) -> list[int]:
        seeds = super().seed(seed)
        self.child_space.seed(None if seed is None else seed + 1)
        # (A list, as old gym's Dict and Tuple add their parts' seeds up.)
        return seeds if isinstance(seeds, list) else [seeds]

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


@functools.cache
def _old_gym_repeated() -> type:
    """`Repeated` that is also an old `gym.spaces.Space` (gym is loaded: the child
    space is one of its objects). It pickles as a plain `Repeated` of its child."""

    def __reduce__(self: Repeated) -> tuple:
        return (Repeated, (self.child_space, self.max_len))

    old_space = sys.modules["gym"].spaces.Space
    return type("Repeated", (Repeated, old_space), {"__reduce__": __reduce__})
