"""Trainer checkpoints on disk: safetensors for weights, JSON for the rest.

Layout of a checkpoint directory (written by `Trainer.save_checkpoint`):

    trainer_state.json          counters, metrics history, policy directory names,
                                policies added/removed at runtime (ids, classes, spaces)
    policies/<n>/weights.safetensors
    policies/<n>/policy_state.json
    worker_state.json           filters and global vars of the local worker
    learner_state.pt            optimiser states (tensors only: weights_only load)

    extra_state.{json,safetensors}   algorithm state beyond weights (e.g. replay buffers)
    manifest.json, .tune_metadata.json   written by `Trainable.save` (see checkpoint_files)

Loading executes no code from the checkpoint: safetensors and JSON are plain
data, the torch file is read with `weights_only=True`, every path a file names
must stay inside the checkpoint, loaded weights must be finite, and class names
are resolved by `corral.utils.checkpoint_config` (never imported).
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from corral.utils.checkpoint_files import inside, read_json
from corral.utils.error import CheckpointError

TRAINER_STATE = "trainer_state.json"
WORKER_STATE = "worker_state.json"
LEARNER_STATE = "learner_state.pt"
WEIGHTS = "weights.safetensors"
POLICY_STATE = "policy_state.json"


def write_trainer_state(
    checkpoint_dir: str, trainer_state: dict, worker_state: dict, learner_state: dict
) -> None:
    import torch
    from safetensors.numpy import save_file

    policy_dirs = {}
    for i, (pid, pstate) in enumerate(worker_state["policy_states"].items()):
        rel = os.path.join("policies", str(i))
        os.makedirs(os.path.join(checkpoint_dir, rel), exist_ok=True)
        weights = {k: np.ascontiguousarray(v) for k, v in pstate["weights"].items()}
        save_file(weights, os.path.join(checkpoint_dir, rel, WEIGHTS))
        rest = {k: v for k, v in pstate.items() if k != "weights"}
        _write_json(os.path.join(checkpoint_dir, rel, POLICY_STATE), rest)
        policy_dirs[pid] = rel
    _write_json(
        os.path.join(checkpoint_dir, WORKER_STATE),
        {
            "filters": worker_state.get("filters", {}),
            "global_vars": worker_state.get("global_vars", {}),
        },
    )
    torch.save(learner_state, os.path.join(checkpoint_dir, LEARNER_STATE))
    _write_json(
        os.path.join(checkpoint_dir, TRAINER_STATE), {**trainer_state, "policies": policy_dirs}
    )


def read_trainer_meta(checkpoint_dir: str) -> dict:
    """`trainer_state.json` alone (counters, policy directories, added policies), e.g.
    to rebuild the policy map before `read_trainer_state` checks it."""
    if os.path.isfile(checkpoint_dir):
        checkpoint_dir = os.path.dirname(checkpoint_dir)
    path = os.path.join(checkpoint_dir, TRAINER_STATE)
    state = read_json(path, "the trainer state")
    if not isinstance(state, dict):
        raise CheckpointError(f"{path} holds {type(state).__name__}; expected a JSON object.")
    return state


def read_trainer_state(checkpoint_dir: str, expected_worker_state: dict) -> tuple[dict, dict, dict]:
    """Returns (trainer state, worker state, learner state), checked against
    the current worker's state (same policies, same weight names and shapes)."""
    import torch

    if os.path.isfile(checkpoint_dir):
        checkpoint_dir = os.path.dirname(checkpoint_dir)
    state = read_trainer_meta(checkpoint_dir)
    policy_dirs = state.get("policies")
    if not isinstance(policy_dirs, dict):
        raise CheckpointError(
            f"{os.path.join(checkpoint_dir, TRAINER_STATE)} has no 'policies' mapping "
            "(expected policy id -> directory)."
        )
    expected = expected_worker_state["policy_states"]
    if set(policy_dirs) != set(expected):
        raise CheckpointError(
            f"Checkpoint {checkpoint_dir} holds policies {sorted(policy_dirs)}, but this "
            f"trainer has {sorted(expected)}."
        )
    policy_states = {}
    state_file = os.path.join(checkpoint_dir, TRAINER_STATE)
    for pid, rel in policy_dirs.items():
        folder = inside(checkpoint_dir, rel, state_file)
        path = os.path.join(folder, WEIGHTS)
        weights = _read_weights(path)
        _check_weights(path, weights, expected[pid]["weights"])
        _check_finite(path, weights)
        rest = read_json(os.path.join(folder, POLICY_STATE), "a policy state")
        policy_states[pid] = {**rest, "weights": weights}
    worker = read_json(os.path.join(checkpoint_dir, WORKER_STATE), "the worker state")
    learner_path = os.path.join(checkpoint_dir, LEARNER_STATE)
    try:
        learner = torch.load(learner_path, weights_only=True)
    except FileNotFoundError:
        raise CheckpointError(
            f"{learner_path} is missing (expected the optimiser state)."
        ) from None
    except Exception as e:
        raise CheckpointError(
            f"{learner_path} cannot be read ({e}); expected a torch file of optimiser state."
        ) from e
    return state, {"policy_states": policy_states, **worker}, learner


def _read_weights(path: str) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    if not os.path.exists(path):
        raise CheckpointError(f"{path} is missing (expected the policy's weights).")
    try:
        arrays = load_file(path)
    except Exception as e:
        raise CheckpointError(
            f"{path} cannot be read ({e}); expected a safetensors file of policy weights. "
            "Is the checkpoint truncated?"
        ) from e
    return arrays


def _check_finite(path: str, weights: dict[str, np.ndarray]) -> None:
    for name, array in weights.items():
        if np.issubdtype(array.dtype, np.floating) and not np.isfinite(array).all():
            raise CheckpointError(
                f"{path}: the tensor {name!r} holds NaN or infinite values; a policy's "
                "weights must be finite (corrupted, or saved after training diverged)."
            )


def _check_weights(path: str, loaded: dict, expected: dict) -> None:
    missing = sorted(set(expected) - set(loaded))
    unexpected = sorted(set(loaded) - set(expected))
    wrong = [
        f"{k}: {tuple(loaded[k].shape)} (expected {tuple(np.shape(v))})"
        for k, v in expected.items()
        if k in loaded and tuple(loaded[k].shape) != tuple(np.shape(v))
    ]
    if missing or unexpected or wrong:
        raise CheckpointError(
            f"{path} does not match this trainer's model: missing {missing}, "
            f"unexpected {unexpected}, wrong shapes {wrong}."
        )


def _write_json(path: str, obj: Any) -> None:
    with open(path, "w") as f:
        json.dump(obj, f, default=_json_default)


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return repr(value)


# -- nested state with numpy arrays (e.g. replay buffers) ---------------------

_ARRAY_REF = "__array__"


def write_array_state(directory: str, name: str, state: dict) -> None:
    """Writes a nested dict as `<name>.safetensors` (its numpy arrays) + `<name>.json`.

    Each array leaf is replaced in the JSON by `{"__array__": "<path/in/dict>"}`
    and stored in the safetensors file under that path; everything else must
    be JSON-able. Reading it back (`read_array_state`) executes no code.
    """
    from safetensors.numpy import save_file

    arrays: dict[str, np.ndarray] = {}

    def strip(node: Any, path: str) -> Any:
        if isinstance(node, np.ndarray):
            arrays[path] = np.ascontiguousarray(node)
            return {_ARRAY_REF: path}
        if isinstance(node, dict):
            return {str(k): strip(v, f"{path}/{k}" if path else str(k)) for k, v in node.items()}
        if isinstance(node, (list, tuple)):
            return [strip(v, f"{path}/{i}") for i, v in enumerate(node)]
        return node

    skeleton = strip(state, "")
    save_file(arrays, os.path.join(directory, f"{name}.safetensors"))
    _write_json(os.path.join(directory, f"{name}.json"), skeleton)


def has_array_state(directory: str, name: str) -> bool:
    if os.path.isfile(directory):
        directory = os.path.dirname(directory)
    return os.path.exists(os.path.join(directory, f"{name}.json"))


def read_array_state(directory: str, name: str) -> dict:
    """The nested dict written by `write_array_state`, arrays restored."""
    if os.path.isfile(directory):
        directory = os.path.dirname(directory)
    skeleton = read_json(os.path.join(directory, f"{name}.json"), f"the {name} state")
    arrays = _read_weights(os.path.join(directory, f"{name}.safetensors"))

    def fill(node: Any) -> Any:
        if isinstance(node, dict):
            if set(node) == {_ARRAY_REF}:
                try:
                    return arrays[node[_ARRAY_REF]]
                except KeyError:
                    raise CheckpointError(
                        f"{os.path.join(directory, name)}.safetensors lacks the array "
                        f"{node[_ARRAY_REF]!r} named in {name}.json."
                    ) from None
            return {k: fill(v) for k, v in node.items()}
        if isinstance(node, list):
            return [fill(v) for v in node]
        return node

    return fill(skeleton)


def read_saved_config(checkpoint_dir: str) -> tuple[str, dict]:
    """(algorithm name, config) a checkpoint was saved with.

    The config comes back as `checkpoint_config.config_from_json` gives it:
    what cannot be rebuilt without running code the checkpoint names is left
    as `Unresolved` (see `checkpoint_config.check_resolved`).
    """
    from corral.utils.checkpoint_config import config_from_json

    path = os.path.join(checkpoint_dir, TRAINER_STATE)
    meta = read_trainer_meta(checkpoint_dir)
    name, config = meta.get("trainer"), meta.get("config")
    if not isinstance(name, str) or not isinstance(config, dict):
        raise CheckpointError(
            f"{path} records no algorithm and config (written before checkpoints stored "
            "them?): build the trainer with its config yourself and call restore()."
        )
    return name, config_from_json(config, path)
