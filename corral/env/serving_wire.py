"""The messages between `PolicyClient` and `PolicyServerInput`: JSON, with numpy arrays as
`.npy` bytes (read with `allow_pickle=False`). Nothing a peer sends can run code on the
other side (RLlib 1.x pickled its messages; corral does not unpickle network input).

Local inference's experience travels as data too: `batch_to_wire` / `batch_from_wire`
(a sample batch's columns as arrays) and `metrics_to_wire` / `metrics_from_wire` (the
client's finished episodes as `RolloutMetrics` fields).
"""

from __future__ import annotations

import base64
import io
import json
from typing import Any

import numpy as np

from corral.evaluation.metrics import RolloutMetrics
from corral.policy.sample_batch import (
    MultiAgentBatch,
    SampleBatch,
    leaf_columns,
    nested_columns,
)


class Commands:
    """The requests a `PolicyClient` sends (RLlib 1.13's names)."""

    START_EPISODE = "START_EPISODE"
    GET_ACTION = "GET_ACTION"
    LOG_ACTION = "LOG_ACTION"
    LOG_RETURNS = "LOG_RETURNS"
    END_EPISODE = "END_EPISODE"
    # Local inference (the client runs the policy): the worker's description as JSON
    # data, the policies' weights as arrays, the client's batches and episode metrics.
    GET_WORKER_ARGS = "GET_WORKER_ARGS"
    GET_WEIGHTS = "GET_WEIGHTS"
    REPORT_SAMPLES = "REPORT_SAMPLES"
    # RLlib 1.13 names these too; neither its server nor corral's answers them (the
    # spaces come with GET_WORKER_ARGS).
    ACTION_SPACE = "ACTION_SPACE"
    OBSERVATION_SPACE = "OBSERVATION_SPACE"


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


# -- local inference's experience ---------------------------------------------------------


def _columns_to_wire(batch: SampleBatch) -> dict[str, Any]:
    columns: dict[str, Any] = {}
    # A nested column (e.g. Dict observations with `_disable_preprocessor_api`) travels
    # as one array per leaf, named by its path (`leaf_columns`).
    for key, value in leaf_columns(batch).items():
        array = np.asarray(value) if key != SampleBatch.INFOS else value
        if isinstance(array, np.ndarray) and array.dtype != object:
            columns[key] = array
        else:  # infos, or another column of Python objects: JSON data (or a TypeError)
            columns[key] = list(array)
    return columns


def batch_to_wire(batch: SampleBatch | MultiAgentBatch) -> dict[str, Any]:
    """A sampled batch as a message part: its columns as arrays (infos as JSON data)."""
    if isinstance(batch, MultiAgentBatch):
        return {
            "type": "MultiAgentBatch",
            "count": int(batch.count),
            "policy_batches": {
                str(pid): _columns_to_wire(b) for pid, b in batch.policy_batches.items()
            },
        }
    return {"type": "SampleBatch", "columns": _columns_to_wire(batch)}


def _columns_from_wire(columns: Any, where: str) -> SampleBatch:
    if not isinstance(columns, dict) or not all(isinstance(k, str) for k in columns):
        raise ValueError(f"{where}: the columns must be an object of column name -> values.")
    checked: dict[str, Any] = {}
    for key, value in columns.items():
        if key == SampleBatch.INFOS:
            if not isinstance(value, list):
                raise ValueError(f"{where}: column 'infos' must be a list.")
            checked[key] = value
            continue
        if not isinstance(value, np.ndarray) or value.dtype.kind not in "biuf":
            kind = value.dtype if isinstance(value, np.ndarray) else type(value).__name__
            raise ValueError(
                f"{where}: column {key!r} must be a numeric or boolean array, got {kind}."
            )
        checked[key] = value
    return SampleBatch(nested_columns(checked))


def batch_from_wire(data: Any) -> SampleBatch | MultiAgentBatch:
    """The batch `batch_to_wire` described.

    Raises:
        ValueError: `data` is no such batch (a column not numeric, columns of unequal
            lengths, an unknown type).
    """
    if not isinstance(data, dict):
        raise ValueError("The reported samples must be an object with a 'type'.")
    kind = data.get("type")
    if kind == "SampleBatch":
        return _columns_from_wire(data.get("columns"), "The reported SampleBatch")
    if kind == "MultiAgentBatch":
        batches, count = data.get("policy_batches"), data.get("count")
        if not isinstance(batches, dict) or isinstance(count, bool) or not isinstance(count, int):
            raise ValueError(
                "The reported MultiAgentBatch needs 'count' (an int) and 'policy_batches'."
            )
        if count < 0:
            raise ValueError(f"The reported MultiAgentBatch has count={count}.")
        return MultiAgentBatch(
            {
                str(pid): _columns_from_wire(cols, f"The reported batch of policy {pid!r}")
                for pid, cols in batches.items()
            },
            count,
        )
    raise ValueError(f"Unknown batch type {kind!r}: expected 'SampleBatch' or 'MultiAgentBatch'.")


def metrics_to_wire(metrics: list[RolloutMetrics]) -> list[dict[str, Any]]:
    """Finished episodes' metrics as a message part. A field that is not JSON data (e.g.
    `media` holding an image object) is sent empty."""
    out = []
    for metric in metrics:
        fields = metric._asdict()
        for key, value in fields.items():
            try:
                _encode(value)
            except TypeError:
                fields[key] = {}
        out.append(fields)
    return out


def _number(value: Any, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"The reported episode metrics: {what} must be a number, got {value!r}.")
    return float(value)


def _mapping(value: Any, what: str) -> dict[Any, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"The reported episode metrics: {what} must be an object.")
    return value


def metrics_from_wire(data: Any) -> list[RolloutMetrics]:
    """The `RolloutMetrics` `metrics_to_wire` described.

    Raises:
        ValueError: an entry is not such metrics (a missing field, a non-number reward).
    """
    if not isinstance(data, list):
        raise ValueError("The reported episode metrics must be a list.")
    metrics = []
    for entry in data:
        if not isinstance(entry, dict):
            raise ValueError("Each reported episode's metrics must be an object.")
        agent_rewards = _mapping(entry.get("agent_rewards", {}), "agent_rewards")
        for key, reward in agent_rewards.items():
            if not (isinstance(key, tuple) and len(key) == 2):
                raise ValueError(
                    "The reported episode metrics: agent_rewards are keyed by (agent id, "
                    f"policy id), got {key!r}."
                )
            _number(reward, f"agent_rewards[{key!r}]")
        custom = _mapping(entry.get("custom_metrics", {}), "custom_metrics")
        metrics.append(
            RolloutMetrics(
                episode_length=int(_number(entry.get("episode_length"), "episode_length")),
                episode_reward=_number(entry.get("episode_reward"), "episode_reward"),
                agent_rewards=agent_rewards,
                custom_metrics=custom,
                perf_stats=_mapping(entry.get("perf_stats", {}), "perf_stats"),
                hist_data=_mapping(entry.get("hist_data", {}), "hist_data"),
                media=_mapping(entry.get("media", {}), "media"),
                episode_faulty=bool(entry.get("episode_faulty", False)),
            )
        )
    return metrics
