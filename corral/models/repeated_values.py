"""RLlib's ``RepeatedValues``: a batch of variable-length lists, padded to ``max_len``."""

from __future__ import annotations

from typing import Any

__all__ = ["RepeatedValues"]


class RepeatedValues:
    """What a model gets for a ``Repeated`` observation space.

    Args:
        values: the padded elements, ``[B, max_len, ...]`` (or a dict/tuple of such, for a
            structured child space).
        lengths: ``[B]``: how many of the ``max_len`` slots of each row are used.
        max_len: the space's ``max_len``.
    """

    def __init__(self, values: Any, lengths: Any, max_len: int) -> None:
        self.values = values
        self.lengths = lengths
        self.max_len = max_len
        self._unbatched_repr: list[list[Any]] | None = None

    def unbatch_all(self) -> list[list[Any]]:
        """The batch as a list (rows) of lists (the used elements), each element with
        the batch and list dimensions removed."""
        if self._unbatched_repr is None:
            batch = int(_batch_dim(self.values))
            slices = self.unbatch_repeat_dim()
            result = []
            for i in range(batch):
                length = self.lengths[i]
                length = int(length.item() if hasattr(length, "item") else length)
                result.append([_index(slices, i, j) for j in range(length)])
            self._unbatched_repr = result
        return self._unbatched_repr

    def unbatch_repeat_dim(self) -> list[Any]:
        """The ``max_len`` slots as a list of ``[B, ...]`` values."""
        return _unbatch(self.values, self.max_len)

    def __repr__(self) -> str:
        return (
            f"RepeatedValues(value={self.values!r}, lengths={self.lengths!r}, "
            f"max_len={self.max_len})"
        )

    __str__ = __repr__


def _batch_dim(v: Any) -> int:
    if isinstance(v, dict):
        return _batch_dim(next(iter(v.values())))
    if isinstance(v, tuple):
        return _batch_dim(v[0])
    if isinstance(v, RepeatedValues):
        return _batch_dim(v.values)
    return v.shape[0]


def _unbatch(v: Any, max_len: int) -> Any:
    if isinstance(v, dict):
        return {k: _unbatch(u, max_len) for k, u in v.items()}
    if isinstance(v, tuple):
        return tuple(_unbatch(u, max_len) for u in v)
    if isinstance(v, RepeatedValues):
        return [
            RepeatedValues(u, v.lengths[:, i, ...], v.max_len)
            for i, u in enumerate(_unbatch(v.values, max_len))
        ]
    return [v[:, i, ...] for i in range(max_len)]


def _index(v: Any, i: int, j: int) -> Any:
    if isinstance(v, dict):
        return {k: _index(u, i, j) for k, u in v.items()}
    if isinstance(v, tuple):
        return tuple(_index(u, i, j) for u in v)
    if isinstance(v, list):
        return _index(v[j], i, j)
    if isinstance(v, RepeatedValues):
        return v.unbatch_all()[i]
    return v[i, ...]
