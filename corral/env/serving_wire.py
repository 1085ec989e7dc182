"""The messages between `PolicyClient` and `PolicyServerInput`: JSON, with numpy arrays as
`.npy` bytes (read with `allow_pickle=False`). Nothing a peer sends can run code on the
other side (RLlib 1.x pickled its messages; corral does not unpickle network input).
"""

from __future__ import annotations

import base64
import io
import json
from typing import Any

import numpy as np


class Commands:
    """The requests a `PolicyClient` sends (RLlib 1.13's names)."""

    START_EPISODE = "START_EPISODE"
    GET_ACTION = "GET_ACTION"
    LOG_ACTION = "LOG_ACTION"
    LOG_RETURNS = "LOG_RETURNS"
    END_EPISODE = "END_EPISODE"
    # Local inference (the client runs the policy): not built in corral.
    GET_WORKER_ARGS = "GET_WORKER_ARGS"
    GET_WEIGHTS = "GET_WEIGHTS"
    REPORT_SAMPLES = "REPORT_SAMPLES"


def _encode(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        buffer = io.BytesIO()
        np.save(buffer, value, allow_pickle=False)
        return {"__ndarray__": base64.b64encode(buffer.getvalue()).decode("ascii")}
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, tuple):
        return {"__tuple__": [_encode(v) for v in value]}
    if isinstance(value, dict):
        if all(isinstance(k, str) and not k.startswith("__") for k in value):
            return {k: _encode(v) for k, v in value.items()}
        return {"__items__": [[_encode(k), _encode(v)] for k, v in value.items()]}
    if isinstance(value, list):
        return [_encode(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TypeError(
        f"Cannot send a {type(value).__name__} to the policy server: observations, actions "
        "and infos must be numbers, strings, numpy arrays, or lists/tuples/dicts of them."
    )


def _decode(value: Any) -> Any:
    if isinstance(value, list):
        return [_decode(v) for v in value]
    if not isinstance(value, dict):
        return value
    if "__ndarray__" in value:
        data = base64.b64decode(value["__ndarray__"])
        return np.load(io.BytesIO(data), allow_pickle=False)
    if "__tuple__" in value:
        return tuple(_decode(v) for v in value["__tuple__"])
    if "__items__" in value:
        return {_decode(k): _decode(v) for k, v in value["__items__"]}
    return {k: _decode(v) for k, v in value.items()}


def dumps(message: dict[str, Any]) -> bytes:
    """A message as the bytes of its JSON."""
    return json.dumps(_encode(message)).encode("utf-8")


def loads(data: bytes) -> dict[str, Any]:
    """The message in `data` (JSON from `dumps`).

    Raises:
        ValueError: `data` is no such message.
    """
    message = _decode(json.loads(data.decode("utf-8")))
    if not isinstance(message, dict):
        raise ValueError(
            f"A policy-serving message must be a JSON object, got {type(message).__name__}"
        )
    return message
