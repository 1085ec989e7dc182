"""Flat action rows for ``Tuple``/``Dict`` action spaces, and back.

The sampler keeps actions in one preallocated numpy buffer and the learner in one tensor,
so a nested action travels as a flat float32 row: the leaves in :func:`flatten_space`
order, each taking :func:`flat_action_size` columns (a discrete choice as its index).
:func:`unflatten_actions` rebuilds the nested actions just before they reach the env.
Under `_disable_action_flattening` sample batches hold them nested instead
(:func:`nest_action_rows`, :func:`flatten_action_rows`), and a policy's `compute_actions`
returns them nested, as RLlib's (:func:`as_flat_action_rows` takes them back).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np


def flatten_space(space: gym.Space) -> list[gym.Space]:
    """The leaf spaces of a (nested) ``Tuple``/``Dict`` space, in flattening order:
    ``Tuple`` by position, ``Dict`` in the space's key order."""
    if isinstance(space, gym.spaces.Tuple):
        return [leaf for sub in space.spaces for leaf in flatten_space(sub)]
    if isinstance(space, gym.spaces.Dict):
        return [leaf for sub in space.spaces.values() for leaf in flatten_space(sub)]
    return [space]


# The most categories (logits) an integer ``Box`` action space may ask of a model.
MAX_INT_BOX_CATEGORIES = 1_000_000


def is_int_box(space: gym.Space) -> bool:
    """Whether `space` is a ``Box`` of an integer dtype: as an action space, one
    categorical choice per element among its ``high - low + 1`` values (RLlib 1.13's
    multi-categorical treatment), not a continuous action."""
    return isinstance(space, gym.spaces.Box) and np.issubdtype(space.dtype, np.integer)


def int_box_sizes(space: gym.spaces.Box) -> list[int]:
    """The number of values ``high - low + 1`` of each element of an integer ``Box``
    action space, flattened in C order (the logits per element a model outputs).

    Raises:
        UnsupportedSpaceException: an element is unbounded, or the space asks for more
            than :data:`MAX_INT_BOX_CATEGORIES` logits in all.
    """
    from corral.utils.error import UnsupportedSpaceException

    if not (np.all(space.bounded_below) and np.all(space.bounded_above)):
        raise UnsupportedSpaceException(
            f"Integer Box action space {space} has unbounded elements: each element "
            "needs finite low and high bounds (one categorical over its values)."
        )
    sizes = (space.high.astype(np.int64) - space.low.astype(np.int64) + 1).ravel()
    if int(sizes.sum()) > MAX_INT_BOX_CATEGORIES:
        raise UnsupportedSpaceException(
            f"Integer Box action space {space} has {int(sizes.sum())} values over its "
            f"elements, more than the {MAX_INT_BOX_CATEGORIES} categorical logits corral "
            "gives a model; use a float Box or narrower bounds."
        )
    return [int(n) for n in sizes]


def flat_action_size(space: gym.Space) -> int:
    """Columns one action of a leaf space takes in a flat action row."""
    if isinstance(space, gym.spaces.Discrete):
        return 1
    return int(np.prod(space.shape))


def flat_action_width(space: gym.Space) -> int:
    """Columns one action of `space` takes in a flat action row (the sum over its leaves)."""
    return sum(flat_action_size(leaf) for leaf in flatten_space(space))


def _leaf_action(
    space: gym.Space, columns: np.ndarray, unsquash: bool, clip: bool
) -> np.ndarray | int:
    if isinstance(space, gym.spaces.Discrete):
        return int(columns[0])
    if isinstance(space, (gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)) or is_int_box(space):
        return columns.astype(space.dtype).reshape(space.shape)
    action = columns.astype(np.float32).reshape(space.shape)
    if isinstance(space, gym.spaces.Box) and (unsquash or clip):
        low, high = space.low.astype(np.float32), space.high.astype(np.float32)
        if unsquash:
            action = low + (action + 1.0) * 0.5 * (high - low)
        action = np.clip(action, low, high)
    return action


def _rebuild(space: gym.Space, row: np.ndarray, start: int, unsquash: bool, clip: bool):
    if isinstance(space, gym.spaces.Tuple):
        parts = []
        for sub in space.spaces:
            part, start = _rebuild(sub, row, start, unsquash, clip)
            parts.append(part)
        return tuple(parts), start
    if isinstance(space, gym.spaces.Dict):
        out = {}
        for key, sub in space.spaces.items():
            out[key], start = _rebuild(sub, row, start, unsquash, clip)
        return out, start
    end = start + flat_action_size(space)
    return _leaf_action(space, row[start:end], unsquash, clip), end


def unflatten_actions(
    space: gym.Space, flat: np.ndarray, unsquash: bool = False, clip: bool = False
) -> Any:
    """Flat rows ``[B, K]`` -> a list of ``B`` nested actions (one row ``[K]`` -> one action).

    With ``unsquash``, ``Box`` leaves are mapped from ``[-1, 1]`` onto their bounds (then
    clipped); with ``clip`` only clipped, as ``TorchPolicy.to_env_actions`` does for a
    plain ``Box`` space.
    """
    flat = np.asarray(flat)
    if flat.ndim == 1:
        return _rebuild(space, flat, 0, unsquash, clip)[0]
    return [_rebuild(space, row, 0, unsquash, clip)[0] for row in flat]


def flatten_actions(space: gym.Space, actions: Any) -> np.ndarray:
    """The inverse of :func:`unflatten_actions` for one nested action: a float32 row."""
    if isinstance(space, gym.spaces.Tuple):
        parts = [flatten_actions(sub, a) for sub, a in zip(space.spaces, actions)]
    elif isinstance(space, gym.spaces.Dict):
        parts = [flatten_actions(sub, actions[k]) for k, sub in space.spaces.items()]
    else:
        return np.asarray(actions, np.float32).reshape(-1)
    return np.concatenate(parts) if parts else np.zeros(0, np.float32)


def nest_action_rows(space: gym.Space, flat: Any) -> Any:
    """Flat action rows ``[B, K]`` (a numpy array or a torch tensor) -> the batch as the
    nested structure of ``space``: a dict/tuple of ``[B, ...]`` leaves, a discrete choice
    as its int64 index, a MultiDiscrete / MultiBinary / integer Box part as its integer
    values, a float Box part as float32 in its shape (`_disable_action_flattening`'s
    `actions` column).

    The inverse of :func:`flatten_action_rows`; unlike :func:`unflatten_actions` it keeps
    the batch axis on every leaf and maps no bounds.
    """
    rows = flat.reshape(flat.shape[0], -1)
    return _nest_rows(space, rows, 0)[0]


def _nest_rows(space: gym.Space, rows: Any, start: int) -> tuple[Any, int]:
    if isinstance(space, gym.spaces.Tuple):
        parts = []
        for sub in space.spaces:
            part, start = _nest_rows(sub, rows, start)
            parts.append(part)
        return tuple(parts), start
    if isinstance(space, gym.spaces.Dict):
        out = {}
        for key, sub in space.spaces.items():
            out[key], start = _nest_rows(sub, rows, start)
        return out, start
    end = start + flat_action_size(space)
    leaf = rows[:, start:end]
    if isinstance(space, gym.spaces.Discrete):
        return _cast(leaf[:, 0], np.int64), end
    dtype = (
        space.dtype
        if isinstance(space, gym.spaces.MultiDiscrete | gym.spaces.MultiBinary) or is_int_box(space)
        else np.float32
    )
    return _cast(leaf, dtype).reshape(rows.shape[0], *space.shape), end


def _cast(values: Any, dtype: Any) -> Any:
    """`values` (an array or a tensor) as `dtype` (a numpy dtype)."""
    if isinstance(values, np.ndarray):
        return values.astype(dtype)
    import torch

    return values.to(torch.from_numpy(np.zeros(0, dtype)).dtype)


def flatten_action_rows(space: gym.Space, nested: Any) -> Any:
    """A batch of nested actions of ``space`` (leaves ``[B, ...]``, numpy arrays or torch
    tensors) -> flat float32 rows ``[B, K]`` (the inverse of :func:`nest_action_rows`)."""
    leaves = list(action_leaves(space, nested))
    if isinstance(leaves[0], np.ndarray):
        n = len(leaves[0])
        return np.concatenate([np.asarray(x, np.float32).reshape(n, -1) for x in leaves], -1)
    import torch

    n = len(leaves[0])
    return torch.cat([x.float().reshape(n, -1) for x in leaves], -1)


def action_leaves(space: gym.Space, nested: Any) -> Any:
    """The leaves of a nested action batch, in :func:`flatten_space` order."""
    if isinstance(space, gym.spaces.Tuple):
        for sub, part in zip(space.spaces, nested):
            yield from action_leaves(sub, part)
    elif isinstance(space, gym.spaces.Dict):
        for key, sub in space.spaces.items():
            yield from action_leaves(sub, nested[key])
    else:
        yield nested if hasattr(nested, "shape") else np.asarray(nested)


def is_nested_action(actions: Any) -> bool:
    """Whether an action batch is nested (a dict or tuple), not flat rows."""
    return isinstance(actions, dict | tuple)


def as_flat_action_rows(space: gym.Space, actions: Any) -> Any:
    """A batch of actions as corral's samplers keep them: for a ``Tuple``/``Dict`` action
    space, flat rows ``[B, K]``, whichever of RLlib's forms a policy's `compute_actions`
    gave: nested leaves ``[B, ...]`` (RLlib's torch policies), a list of ``B`` nested
    actions (RLlib's `RandomPolicy`), or flat rows already. Other spaces' actions pass
    through as an array."""
    if not isinstance(space, gym.spaces.Tuple | gym.spaces.Dict):
        return np.asarray(actions)
    if is_nested_action(actions):
        return flatten_action_rows(space, actions)
    if isinstance(actions, list) and actions and is_nested_action(actions[0]):
        return np.stack([flatten_actions(space, a) for a in actions])
    return np.asarray(actions)
