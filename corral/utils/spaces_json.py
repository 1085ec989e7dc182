"""Gymnasium spaces as JSON-able dicts, and back.

Checkpoints store the spaces of policies added at runtime (`Trainer.add_policy`)
so that `restore()` can rebuild them without pickle. Supported: `Box` (low,
high, shape, dtype; non-finite bounds as the strings "inf", "-inf", "nan"),
`Discrete` (n, start), `MultiDiscrete` (nvec, dtype, start), `MultiBinary`
(n), and `Tuple` / `Dict` of those, recursively.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np


def space_to_json(space: gym.Space) -> dict[str, Any]:
    """A JSON-able dict describing `space`.

    Raises:
        TypeError: a space type this module does not encode.
    """
    if isinstance(space, gym.spaces.Box):
        return {
            "type": "Box",
            "low": _encode_array(space.low),
            "high": _encode_array(space.high),
            "shape": list(space.shape),
            "dtype": np.dtype(space.dtype).name,
        }
    if isinstance(space, gym.spaces.Discrete):
        return {"type": "Discrete", "n": int(space.n), "start": int(space.start)}
    if isinstance(space, gym.spaces.MultiDiscrete):
        out = {
            "type": "MultiDiscrete",
            "nvec": np.asarray(space.nvec).tolist(),
            "dtype": np.dtype(space.dtype).name,
        }
        start = getattr(space, "start", None)
        if start is not None and np.any(start != 0):
            out["start"] = np.asarray(start).tolist()
        return out
    if isinstance(space, gym.spaces.MultiBinary):
        n = space.n
        return {"type": "MultiBinary", "n": n if isinstance(n, int) else list(n)}
    if isinstance(space, gym.spaces.Tuple):
        return {"type": "Tuple", "spaces": [space_to_json(s) for s in space.spaces]}
    if isinstance(space, gym.spaces.Dict):
        for key in space.spaces:
            if not isinstance(key, str):
                raise TypeError(f"Dict space keys must be strings to encode as JSON, got {key!r}.")
        return {
            "type": "Dict",
            "spaces": [[key, space_to_json(s)] for key, s in space.spaces.items()],
        }
    raise TypeError(
        f"Cannot encode a {type(space).__name__} space as JSON; supported: Box, Discrete, "
        "MultiDiscrete, MultiBinary, Tuple, Dict."
    )


def space_from_json(data: dict[str, Any]) -> gym.Space:
    """The space that `space_to_json` described.

    Raises:
        ValueError: `data` is not a space description this module wrote.
    """
    if not isinstance(data, dict) or "type" not in data:
        raise ValueError(f"Not a space description (a dict with a 'type'): {data!r}.")
    kind = data["type"]
    if kind == "Box":
        dtype = np.dtype(data["dtype"])
        shape = tuple(data["shape"])
        low = _decode_array(data["low"], dtype, shape)
        high = _decode_array(data["high"], dtype, shape)
        return gym.spaces.Box(low=low, high=high, shape=shape, dtype=dtype)
    if kind == "Discrete":
        return gym.spaces.Discrete(int(data["n"]), start=int(data.get("start", 0)))
    if kind == "MultiDiscrete":
        dtype = np.dtype(data.get("dtype", "int64"))
        nvec = np.asarray(data["nvec"], dtype=dtype)
        if "start" in data:
            return gym.spaces.MultiDiscrete(
                nvec, dtype=dtype, start=np.asarray(data["start"], dtype=dtype)
            )
        return gym.spaces.MultiDiscrete(nvec, dtype=dtype)
    if kind == "MultiBinary":
        n = data["n"]
        return gym.spaces.MultiBinary(n if isinstance(n, int) else list(n))
    if kind == "Tuple":
        return gym.spaces.Tuple([space_from_json(s) for s in data["spaces"]])
    if kind == "Dict":
        return gym.spaces.Dict({key: space_from_json(s) for key, s in data["spaces"]})
    raise ValueError(f"Unknown space type {kind!r} in {data!r}.")


def _encode_array(values: np.ndarray) -> Any:
    """Nested lists of numbers; non-finite floats as strings (JSON has no inf/nan)."""
    array = np.asarray(values)
    if array.dtype.kind != "f":
        return array.tolist()
    return np.vectorize(_encode_float, otypes=[object])(array).tolist() if array.size else []


def _encode_float(x: float) -> float | str:
    x = float(x)
    if math.isfinite(x):
        return x
    return "nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")


def _decode_array(values: Any, dtype: np.dtype, shape: tuple[int, ...]) -> np.ndarray:
    if dtype.kind == "f":
        array = np.asarray(values, dtype=object)
        array = np.vectorize(float, otypes=[np.float64])(array) if array.size else array
        return np.asarray(array, dtype=dtype).reshape(shape)
    return np.asarray(values, dtype=dtype).reshape(shape)


__all__ = ["space_from_json", "space_to_json"]
