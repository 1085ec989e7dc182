"""Nested structures (dicts, lists, tuples, namedtuples) mapped and flattened leaf by leaf.

What RLlib does with ``dm-tree``, without that dependency: dicts are walked in sorted key
order (as ``tree.flatten`` does), sequences in order; anything else is a leaf.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any


def _is_namedtuple(x: Any) -> bool:
    return isinstance(x, tuple) and hasattr(x, "_fields")


def is_nested(x: Any) -> bool:
    """Whether `x` is a dict, list or tuple (so not a leaf)."""
    return isinstance(x, (Mapping, list, tuple))


def flatten(struct: Any) -> list[Any]:
    """The leaves of `struct`, dicts in sorted key order."""
    if isinstance(struct, Mapping):
        return [leaf for key in sorted(struct) for leaf in flatten(struct[key])]
    if isinstance(struct, (list, tuple)):
        return [leaf for item in struct for leaf in flatten(item)]
    return [struct]


def map_structure(fn: Callable[..., Any], *structs: Any) -> Any:
    """`fn` applied to the leaves of `structs` (all of the same structure), same structure out."""
    first = structs[0]
    if isinstance(first, Mapping):
        out = {key: map_structure(fn, *(s[key] for s in structs)) for key in first}
        return type(first)(out) if type(first) is not dict else out
    if _is_namedtuple(first):
        return type(first)(*(map_structure(fn, *items) for items in zip(*structs)))
    if isinstance(first, (list, tuple)):
        return type(first)(map_structure(fn, *items) for items in zip(*structs))
    return fn(*structs)


def unflatten_as(structure: Any, flat: list[Any]) -> Any:
    """Puts the leaves `flat` (in :func:`flatten`'s order) back into `structure`'s shape."""
    leaves = iter(flat)

    def rebuild(struct: Any) -> Any:
        if isinstance(struct, Mapping):
            values = {key: rebuild(struct[key]) for key in sorted(struct)}
            return {key: values[key] for key in struct}
        if _is_namedtuple(struct):
            return type(struct)(*(rebuild(item) for item in struct))
        if isinstance(struct, (list, tuple)):
            return type(struct)(rebuild(item) for item in struct)
        return next(leaves)

    return rebuild(structure)
