"""RLlib's ``Simplex`` space: points whose last axis sums to 1 (Dirichlet samples)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


class Simplex(gym.Space):
    """Vectors of the probability simplex along the last axis of ``shape``.

    Args:
        shape: the space's shape; the last axis is the simplex dimension.
        concentration: the Dirichlet concentration used by :meth:`sample` (default ones).
        dtype: the dtype of the points.
    """

    def __init__(
        self, shape: tuple | list, concentration: Any = None, dtype: Any = np.float32
    ) -> None:
        if not isinstance(shape, (tuple, list)):
            raise TypeError(f"Simplex shape must be a tuple or list, got {shape!r}")
        super().__init__(tuple(shape), dtype)
        self.dim = self.shape[-1]
        if concentration is not None:
            concentration = np.asarray(concentration)
            if concentration.shape != (self.dim,):
                raise ValueError(
                    f"concentration must have shape ({self.dim},), got {concentration.shape}"
                )
            self.concentration = concentration
        else:
            self.concentration = np.ones(self.dim)

    def sample(self, mask: Any = None, probability: Any = None) -> np.ndarray:
        return self.np_random.dirichlet(self.concentration, size=self.shape[:-1]).astype(self.dtype)

    def contains(self, x: Any) -> bool:
        x = np.asarray(x)
        return x.shape == self.shape and bool(
            np.allclose(np.sum(x, axis=-1), np.ones_like(x[..., 0]))
        )

    @property
    def is_np_flattenable(self) -> bool:
        return True

    def to_jsonable(self, sample_n: Any) -> list:
        return np.array(sample_n).tolist()

    def from_jsonable(self, sample_n: Any) -> list:
        return [np.asarray(sample) for sample in sample_n]

    def __eq__(self, other: Any) -> bool:
        return (
            isinstance(other, Simplex)
            and self.shape == other.shape
            and np.allclose(self.concentration, other.concentration)
        )

    def __repr__(self) -> str:
        return f"Simplex({self.shape}; {list(self.concentration)})"
