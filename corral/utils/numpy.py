"""RLlib 1.13's numpy helpers (``ray.rllib.utils.numpy``): reference maths for tests, and
``convert_to_numpy`` for results. No torch import unless a tensor is passed."""

from __future__ import annotations

import sys
from collections import OrderedDict
from types import MappingProxyType
from typing import Any

import numpy as np

from corral.utils._nest import flatten, map_structure
from corral.utils.deprecation import DEPRECATED_VALUE, deprecation_warning

__all__ = [
    "LARGE_INTEGER",
    "MAX_LOG_NN_OUTPUT",
    "MIN_LOG_NN_OUTPUT",
    "SMALL_NUMBER",
    "aligned_array",
    "concat_aligned",
    "convert_to_numpy",
    "fc",
    "flatten_inputs_to_1d_tensor",
    "huber_loss",
    "l2_loss",
    "lstm",
    "make_action_immutable",
    "one_hot",
    "relu",
    "sigmoid",
    "softmax",
]

SMALL_NUMBER = 1e-6
LARGE_INTEGER = 100000000
MIN_LOG_NN_OUTPUT = -5
MAX_LOG_NN_OUTPUT = 2


def _is_tensor(x: Any) -> bool:
    torch = sys.modules.get("torch")
    return torch is not None and isinstance(x, torch.Tensor)


def aligned_array(size: int, dtype: Any, align: int = 64) -> np.ndarray:
    """An uninitialised 1-D array of `size` items whose data starts at an `align`-byte
    boundary."""
    dtype = np.dtype(dtype)
    n = size * dtype.itemsize
    empty = np.empty(n + (align - 1), dtype=np.uint8)
    misalign = empty.ctypes.data % align
    offset = 0 if misalign == 0 else align - misalign
    if n == 0:
        return empty[offset : offset + 1][0:0].view(dtype)
    return empty[offset : offset + n].view(dtype)


def concat_aligned(items: list[np.ndarray], time_major: bool | None = None) -> np.ndarray:
    """``np.concatenate`` of `items` (along axis 1 when `time_major`) into 64-byte-aligned
    memory for float32/float64/uint8 arrays."""
    if len(items) == 0:
        return []  # type: ignore[return-value]
    if len(items) == 1:
        return items[0]
    first = items[0]
    axis = 1 if time_major else 0
    if isinstance(first, np.ndarray) and first.dtype in (np.float32, np.float64, np.uint8):
        flat = aligned_array(sum(s.size for s in items), first.dtype)
        shape = list(first.shape)
        shape[axis] = sum(s.shape[axis] for s in items)
        output = flat.reshape(shape)
        np.concatenate(items, out=output, axis=axis)
        return output
    return np.concatenate(items, axis=axis)


def convert_to_numpy(
    x: Any, reduce_type: bool = True, reduce_floats: Any = DEPRECATED_VALUE
) -> Any:
    """Tensors in a structure -> numpy (0-d -> Python numbers); with `reduce_type`, float
    arrays become float32 and int arrays int32. `reduce_floats`: RLlib 1.13's deprecated
    name of `reduce_type` (it warns, and is used when given)."""
    if reduce_floats != DEPRECATED_VALUE:
        deprecation_warning(old="convert_to_numpy(reduce_floats)", new="reduce_type", error=False)
        reduce_type = reduce_floats

    def convert(item: Any) -> Any:
        if _is_tensor(item):
            item = item.cpu().item() if item.dim() == 0 else item.detach().cpu().numpy()
        if reduce_type and isinstance(item, np.ndarray):
            if np.issubdtype(item.dtype, np.floating):
                item = item.astype(np.float32)
            elif np.issubdtype(item.dtype, np.integer):
                item = item.astype(np.int32)
        return item

    return map_structure(convert, x)


def _np(x: Any) -> Any:
    return x.detach().cpu().numpy() if _is_tensor(x) else x


def fc(x: Any, weights: Any, biases: Any = None, framework: str | None = None) -> np.ndarray:
    """A dense layer ``x @ weights + biases`` in numpy (torch's ``[out, in]`` weights are
    transposed when `framework` is "torch" and the shapes say so)."""
    x, weights, biases = _np(x), _np(weights), _np(biases)
    if framework == "torch" and x.shape[1] != weights.shape[0] and x.shape[1] == weights.shape[1]:
        weights = np.transpose(weights)
    return np.matmul(x, weights) + (0.0 if biases is None else biases)


def flatten_inputs_to_1d_tensor(
    inputs: Any, spaces_struct: Any = None, time_axis: bool = False
) -> np.ndarray:
    """The numpy form of ``torch_utils.flatten_inputs_to_1d_tensor``."""
    import gymnasium as gym

    from corral.env.gym_compat import convert_space

    flat_inputs = flatten(inputs)
    # (Old `gym.spaces` leaves are read as their Gymnasium equals.)
    flat_spaces = (
        [convert_space(s) for s in flatten(spaces_struct)]
        if spaces_struct is not None
        else [None] * len(flat_inputs)
    )
    batch = time = None
    out = []
    for array, space in zip(flat_inputs, flat_spaces):
        array = np.asarray(array)
        if batch is None:
            batch = array.shape[0]
            if time_axis:
                time = array.shape[1]
        rows = [batch * time] if time_axis else [batch]
        if isinstance(space, gym.spaces.Discrete):
            out.append(one_hot(np.reshape(array, rows), depth=int(space.n)).astype(np.float32))
        elif isinstance(space, gym.spaces.MultiDiscrete):
            array = np.reshape(array, [*rows, -1])
            nvec = np.asarray(space.nvec).reshape(-1)
            out.append(
                np.concatenate(
                    [
                        one_hot(array[:, i], depth=int(n)).astype(np.float32)
                        for i, n in enumerate(nvec)
                    ],
                    axis=-1,
                )
            )
        else:
            out.append(np.reshape(array, [*rows, -1]).astype(np.float32))
    merged = np.concatenate(out, axis=-1)
    return np.reshape(merged, [batch, time, -1]) if time_axis else merged


def make_action_immutable(obj: Any) -> Any:
    """Arrays made read-only, dicts wrapped read-only (what callbacks get as actions)."""
    if isinstance(obj, np.ndarray):
        obj.setflags(write=False)
        return obj
    if isinstance(obj, OrderedDict):
        return MappingProxyType(dict(obj))
    if isinstance(obj, dict):
        return MappingProxyType(obj)
    return obj


def huber_loss(x: np.ndarray, delta: float = 1.0) -> np.ndarray:
    """Elementwise Huber loss."""
    return np.where(np.abs(x) < delta, np.power(x, 2.0) * 0.5, delta * (np.abs(x) - 0.5 * delta))


def l2_loss(x: np.ndarray) -> np.ndarray:
    """``sum(x^2) / 2``."""
    return np.sum(np.square(x)) / 2.0


def lstm(
    x: np.ndarray,
    weights: np.ndarray,
    biases: np.ndarray | None = None,
    initial_internal_states: Any = None,
    time_major: bool = False,
    forget_bias: float = 1.0,
) -> tuple[np.ndarray, tuple[np.ndarray, np.ndarray]]:
    """A numpy LSTM (TF's gate order: input, cell, forget, output) over a sequence.

    Returns:
        ``(outputs [B, T, units] (or [T, B, units]), (c, h))``.
    """
    sequence_length = x.shape[0 if time_major else 1]
    batch_size = x.shape[1 if time_major else 0]
    units = weights.shape[1] // 4
    if initial_internal_states is None:
        c_states = np.zeros((batch_size, units))
        h_states = np.zeros((batch_size, units))
    else:
        c_states, h_states = initial_internal_states[0], initial_internal_states[1]
    shape = (
        (sequence_length, batch_size, units) if time_major else (batch_size, sequence_length, units)
    )
    outputs = np.zeros(shape)
    biases = 0.0 if biases is None else biases
    for t in range(sequence_length):
        step = x[t, :, :] if time_major else x[:, t, :]
        gates = np.matmul(np.concatenate((step, h_states), axis=1), weights) + biases
        c_states = c_states * sigmoid(gates[:, units * 2 : units * 3] + forget_bias)
        c_states = c_states + sigmoid(gates[:, 0:units]) * np.tanh(gates[:, units : units * 2])
        h_states = sigmoid(gates[:, units * 3 : units * 4]) * np.tanh(c_states)
        if time_major:
            outputs[t, :, :] = h_states
        else:
            outputs[:, t, :] = h_states
    return outputs, (c_states, h_states)


def one_hot(x: Any, depth: int = 0, on_value: float = 1.0, off_value: float = 0.0) -> np.ndarray:
    """One-hot along a new last axis (`depth` 0: ``max(x) + 1``; bools: depth 2)."""
    x = np.asarray(_np(x))
    if x.dtype == np.bool_:
        x = x.astype(np.int64)
        depth = 2
    if depth == 0:
        depth = int(np.max(x)) + 1
    if x.size and np.max(x) >= depth:
        raise ValueError(f"The max. index of `x` ({np.max(x)}) is larger than depth ({depth})!")
    out = np.full((*x.shape, depth), off_value, dtype=np.float64)
    np.put_along_axis(out, x[..., None].astype(np.int64), on_value, axis=-1)
    return out


def relu(x: np.ndarray, alpha: float = 0.0) -> np.ndarray:
    """``max(x, alpha * x)`` (leaky with `alpha` > 0)."""
    return np.maximum(x, x * alpha)


def sigmoid(x: np.ndarray, derivative: bool = False) -> np.ndarray:
    """The logistic function (with `derivative`: ``x * (1 - x)`` of a sigmoid output `x`)."""
    if derivative:
        return x * (1 - x)
    return 1 / (1 + np.exp(-x))


def softmax(x: Any, axis: int = -1, epsilon: float | None = None) -> np.ndarray:
    """Softmax along `axis`, floored at `epsilon` (default ``SMALL_NUMBER``)."""
    epsilon = epsilon or SMALL_NUMBER
    x_exp = np.exp(x)
    return np.maximum(x_exp / np.sum(x_exp, axis, keepdims=True), epsilon)
