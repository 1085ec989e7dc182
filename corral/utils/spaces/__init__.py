"""Flat action rows for ``Tuple``/``Dict`` action spaces, and back.

The sampler keeps actions in one preallocated numpy buffer and the learner in one tensor,
so a nested action travels as a flat float32 row: the leaves in :func:`flatten_space`
order, each taking :func:`flat_action_size` columns (a discrete choice as its index).
:func:`unflatten_actions` rebuilds the nested actions just before they reach the env.
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


def flat_action_size(space: gym.Space) -> int:
    """Columns one action of a leaf space takes in a flat action row."""
    if isinstance(space, gym.spaces.Discrete):
        return 1
    return int(np.prod(space.shape))


def _leaf_action(
    space: gym.Space, columns: np.ndarray, unsquash: bool, clip: bool
) -> np.ndarray | int:
    if isinstance(space, gym.spaces.Discrete):
        return int(columns[0])
    if isinstance(space, (gym.spaces.MultiDiscrete, gym.spaces.MultiBinary)):
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
