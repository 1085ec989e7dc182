"""RLlib 1.13's space helpers (``ray.rllib.utils.spaces.space_utils``).

Note: :func:`flatten_space` here is RLlib's (``Dict`` keys sorted); the package's own
``corral.utils.spaces.flatten_space`` follows the space's key order, as corral's flat
action rows do.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from corral.utils._nest import flatten, map_structure, unflatten_as

__all__ = [
    "clip_action",
    "convert_element_to_space_type",
    "flatten_space",
    "flatten_to_single_ndarray",
    "get_base_struct_from_space",
    "get_dummy_batch_for_space",
    "normalize_action",
    "unbatch",
    "unsquash_action",
]


def flatten_space(space: gym.Space) -> list[gym.Space]:
    """The leaf spaces of a nested ``Tuple``/``Dict`` space (``Dict`` keys sorted)."""
    if isinstance(space, gym.spaces.Tuple):
        return [leaf for sub in space.spaces for leaf in flatten_space(sub)]
    if isinstance(space, gym.spaces.Dict):
        return [leaf for key in sorted(space.spaces) for leaf in flatten_space(space[key])]
    return [space]


def get_base_struct_from_space(space: gym.Space) -> Any:
    """A ``Tuple``/``Dict`` space as the tuple/dict of its (leaf) spaces."""
    if isinstance(space, gym.spaces.Tuple):
        return tuple(get_base_struct_from_space(s) for s in space.spaces)
    if isinstance(space, gym.spaces.Dict):
        return {k: get_base_struct_from_space(s) for k, s in space.spaces.items()}
    return space


def get_dummy_batch_for_space(
    space: gym.Space,
    batch_size: int = 32,
    fill_value: float | int | str = 0.0,
    time_size: int | None = None,
    time_major: bool = False,
) -> Any:
    """A batch of `batch_size` (x `time_size`) values of `space`, all `fill_value` (or
    sampled, with ``fill_value="random"``); nested spaces give the nested structure."""
    if isinstance(space, (gym.spaces.Dict, gym.spaces.Tuple)):
        return map_structure(
            lambda s: get_dummy_batch_for_space(s, batch_size, fill_value, time_size, time_major),
            get_base_struct_from_space(space),
        )
    if fill_value == "random":
        if time_size is not None:
            outer, inner = (time_size, batch_size) if time_major else (batch_size, time_size)
            return np.array(
                [[space.sample() for _ in range(inner)] for _ in range(outer)], dtype=space.dtype
            )
        return np.array(
            [space.sample() for _ in range(batch_size)] if batch_size > 0 else space.sample(),
            dtype=space.dtype,
        )
    if time_size is not None:
        shape = [time_size, batch_size] if time_major else [batch_size, time_size]
    else:
        shape = [batch_size] if batch_size > 0 else []
    return np.full(shape + list(space.shape), fill_value=fill_value, dtype=space.dtype)


def flatten_to_single_ndarray(input_: Any) -> Any:
    """A nested structure of arrays -> one 1-D array of all their values (leaves as is)."""
    if isinstance(input_, (list, tuple, dict)):
        parts = [np.reshape(leaf, [-1]) for leaf in flatten(input_)]
        return np.concatenate(parts, axis=0).flatten()
    return input_


def unbatch(batches_struct: Any) -> list[Any]:
    """A structure of batches -> a list of structures, one per batch row."""
    flat = flatten(batches_struct)
    return [unflatten_as(batches_struct, [leaf[i] for leaf in flat]) for i in range(len(flat[0]))]


def clip_action(action: Any, action_space: Any) -> Any:
    """Clips the ``Box`` leaves of `action` into their bounds (`action_space`: a space
    struct as :func:`get_base_struct_from_space` gives)."""

    def clip(a: Any, s: Any) -> Any:
        return np.clip(a, s.low, s.high) if isinstance(s, gym.spaces.Box) else a

    return map_structure(clip, action, action_space)


def unsquash_action(action: Any, action_space_struct: Any) -> Any:
    """Maps bounded float ``Box`` leaves from [-1, 1] onto their bounds (then clips);
    integer ``Box`` leaves are shifted by their low bound."""

    def unsquash(a: Any, s: Any) -> Any:
        if isinstance(s, gym.spaces.Box) and np.all(s.bounded_below) and np.all(s.bounded_above):
            if s.dtype in (np.float32, np.float64):
                a = s.low + (a + 1.0) * (s.high - s.low) / 2.0
                a = np.clip(a, s.low, s.high)
            elif np.issubdtype(s.dtype, np.integer):
                a = s.low + a
        return a

    return map_structure(unsquash, action, action_space_struct)


def normalize_action(action: Any, action_space_struct: Any) -> Any:
    """The inverse of :func:`unsquash_action` for float ``Box`` leaves: bounds -> [-1, 1]."""

    def normalize(a: Any, s: Any) -> Any:
        if isinstance(s, gym.spaces.Box) and s.dtype in (np.float32, np.float64):
            a = ((a - s.low) * 2.0) / (s.high - s.low) - 1.0
        return a

    return map_structure(normalize, action, action_space_struct)


def convert_element_to_space_type(element: Any, sampled_element: Any) -> Any:
    """Casts the leaves of `element` to the types of a sample of the space (e.g. float64
    arrays to the space's float32, Python floats to 0-d arrays), so ``contains`` accepts it."""

    def convert(elem: Any, s: Any) -> Any:
        if isinstance(s, np.ndarray):
            if not isinstance(elem, np.ndarray):
                if not isinstance(elem, (float, int)):
                    raise ValueError(f"`elem` ({elem}) must be np.array, float or int!")
                if s.shape != ():
                    raise ValueError(
                        f"Element should be of type np.ndarray but is of type {type(elem)}"
                    )
                elem = np.array(elem, dtype=s.dtype)
            elif s.dtype != elem.dtype:
                elem = elem.astype(s.dtype)
        elif isinstance(s, int) and isinstance(elem, float) and elem.is_integer():
            elem = int(elem)
        return elem

    return map_structure(convert, element, sampled_element)
