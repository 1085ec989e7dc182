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

This module is corral's one home of checkpoint persistence: finding a
checkpoint folder (`find_checkpoint_dir`), JSON files whose errors name the
file (`read_json` / `write_json`), paths a checkpoint's files name
(`inside`), and the "weights.safetensors + state JSON" pair a policy is stored
as (`write_weights_and_state` / `read_weights_and_state`: trainer
checkpoints, `PolicyMap` spills and `Policy.export_checkpoint` all use it).
The manifest and atomic placement of whole checkpoint folders are in
`corral.utils.checkpoint_files`.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from corral.utils.error import CheckpointError

TRAINER_STATE = "trainer_state.json"
WORKER_STATE = "worker_state.json"
LEARNER_STATE = "learner_state.pt"
WEIGHTS = "weights.safetensors"
POLICY_STATE = "policy_state.json"


# -- finding a checkpoint, paths and JSON -------------------------------------


def find_checkpoint_dir(
    path: str | os.PathLike,
    marker: str = TRAINER_STATE,
    expected: str = "a checkpoint folder written by `Trainer.save()` or `corral train`",
) -> str:
    """The checkpoint directory holding `marker`: `path` itself or its nearest ancestor.

    Ancestors count because RLlib hands out paths of files inside the checkpoint
    (`.../checkpoint_000010/checkpoint-10`).

    Args:
        path: a checkpoint folder or a path inside one (`~` is expanded).
        marker: the file that marks the folder (`trainer_state.json` for a
            trainer's checkpoint, `.tune_metadata.json` for any `Trainable`'s).
        expected: what the folder should be, for the error message.

    Raises:
        CheckpointError: `path` does not exist, or neither it nor an ancestor
            holds `marker`.
    """
    path = os.path.abspath(os.path.expanduser(os.fspath(path)))
    if not os.path.exists(path):
        raise CheckpointError(f"Checkpoint {path} does not exist; expected {expected}.")
    start = path if os.path.isdir(path) else os.path.dirname(path)
    candidate = start
    while not os.path.isfile(os.path.join(candidate, marker)):
        parent = os.path.dirname(candidate)
        if parent == candidate:
            raise CheckpointError(
                f"{path} is not a checkpoint: no {marker} in it or above it "
                f"({os.path.join(start, marker)} not found; expected {expected})."
            )
        candidate = parent
    return candidate


def inside(checkpoint_dir: str, relative: Any, named_by: str) -> str:
    """`checkpoint_dir/relative`, refused unless it stays inside `checkpoint_dir`.

    Args:
        checkpoint_dir: the checkpoint folder.
        relative: a relative path read from one of the checkpoint's files.
        named_by: that file (for the error message).

    Raises:
        CheckpointError: `relative` is not a relative path, or leads outside.
    """
    if not isinstance(relative, str) or not relative or os.path.isabs(relative):
        raise CheckpointError(
            f"{named_by} names the path {relative!r}; expected a relative path inside the "
            "checkpoint."
        )
    root = os.path.realpath(checkpoint_dir)
    if os.path.commonpath([root, os.path.realpath(os.path.join(root, relative))]) != root:
        raise CheckpointError(
            f"{named_by} names the path {relative!r}, which leads outside the checkpoint "
            f"{checkpoint_dir}; a checkpoint may only refer to its own files."
        )
    return os.path.normpath(os.path.join(checkpoint_dir, relative))


def read_json(path: str, what: str) -> Any:
    """The JSON document at `path`.

    Args:
        path: the file.
        what: what it should hold (e.g. "the trainer state"), for error messages.

    Raises:
        CheckpointError: naming the file and `what`, when it is missing, not
            UTF-8 or not JSON.
    """
    try:
        with open(path, "rb") as f:
            return json.loads(f.read().decode("utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{path} is missing (expected {what} as JSON).") from None
    except UnicodeDecodeError as e:
        raise CheckpointError(
            f"{path} is not UTF-8 text ({e}); expected {what} as JSON (corrupted?)."
        ) from None
    except json.JSONDecodeError as e:
        raise CheckpointError(
            f"{path} is not valid JSON ({e}); expected {what} (truncated or corrupted?)."
        ) from None


def read_json_object(path: str, what: str) -> dict:
    """`read_json`, refused (`CheckpointError` naming the file) unless it is a JSON object."""
    obj = read_json(path, what)
    if not isinstance(obj, dict):
        raise CheckpointError(
            f"{path} holds {type(obj).__name__}; expected {what} as a JSON object."
        )
    return obj


def write_json(path: str, obj: Any, *, indent: int | None = None, sort_keys: bool = False) -> None:
    """Writes `obj` as UTF-8 JSON to `path`.

    numpy scalars and arrays become numbers and lists; any other value JSON
    cannot hold is written as its `repr` (a string), so a save never fails on
    an odd config value; reading it back gives that string, never an object.
    """
    with open(path, "w", encoding="utf-8") as f:
        json.dump(obj, f, default=_json_default, indent=indent, sort_keys=sort_keys)


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    return repr(value)


# -- a policy as "weights.safetensors + state JSON" ---------------------------


def write_weights_and_state(
    folder: str,
    state: dict,
    *,
    weights_file: str = WEIGHTS,
    state_file: str = POLICY_STATE,
) -> None:
    """Writes a policy's state as two plain-data files in `folder` (created if needed).

    Args:
        folder: where to write.
        state: `Policy.get_state()`: its `"weights"` (name -> array) go to
            `weights_file` (safetensors), everything else to `state_file` (JSON).
        weights_file: the safetensors file's name.
        state_file: the JSON file's name.
    """
    from safetensors.numpy import save_file

    os.makedirs(folder, exist_ok=True)
    rest = dict(state)
    # (Reshaped back: `ascontiguousarray` makes a 0-d weight, a scalar parameter, 1-d.)
    weights = {
        k: np.ascontiguousarray(v).reshape(np.shape(v)) for k, v in rest.pop("weights", {}).items()
    }
    save_file(weights, os.path.join(folder, weights_file))
    write_json(os.path.join(folder, state_file), rest)


def read_weights_and_state(
    folder: str,
    *,
    weights_file: str = WEIGHTS,
    state_file: str = POLICY_STATE,
    expected_weights: dict | None = None,
    check_finite: bool = True,
) -> dict:
    """The policy state `write_weights_and_state` wrote, `"weights"` as numpy arrays.

    Args:
        folder: where the two files are.
        weights_file: the safetensors file's name.
        state_file: the JSON file's name.
        expected_weights: name -> array of the policy it will be loaded into;
            the files must hold the same names and shapes (None: not checked).
        check_finite: refuse floating-point weights holding NaN or infinity.

    Raises:
        CheckpointError: naming the file that is missing, unreadable, of
            another model, or not finite.
    """
    path = os.path.join(folder, weights_file)
    weights = _read_weights(path)
    if expected_weights is not None:
        _check_weights(path, weights, expected_weights)
    if check_finite:
        _check_finite(path, weights)
    rest = read_json_object(os.path.join(folder, state_file), "a policy state")
    return {**rest, "weights": weights}


def write_trainer_state(
    checkpoint_dir: str, trainer_state: dict, worker_state: dict, learner_state: dict
) -> None:
    import torch

    policy_dirs = {}
    for i, (pid, pstate) in enumerate(worker_state["policy_states"].items()):
        rel = os.path.join("policies", str(i))
        write_weights_and_state(os.path.join(checkpoint_dir, rel), pstate)
        policy_dirs[pid] = rel
    write_json(
        os.path.join(checkpoint_dir, WORKER_STATE),
        {
            "filters": worker_state.get("filters", {}),
            "global_vars": worker_state.get("global_vars", {}),
        },
    )
    torch.save(learner_state, os.path.join(checkpoint_dir, LEARNER_STATE))
    write_json(
        os.path.join(checkpoint_dir, TRAINER_STATE), {**trainer_state, "policies": policy_dirs}
    )


def read_trainer_meta(checkpoint_dir: str) -> dict:
    """`trainer_state.json` alone (counters, policy directories, added policies), e.g.
    to rebuild the policy map before `read_trainer_state` checks it."""
    if os.path.isfile(checkpoint_dir):
        checkpoint_dir = os.path.dirname(checkpoint_dir)
    return read_json_object(os.path.join(checkpoint_dir, TRAINER_STATE), "the trainer state")


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
        policy_states[pid] = read_weights_and_state(
            folder, expected_weights=expected[pid]["weights"]
        )
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
            arrays[path] = np.ascontiguousarray(node).reshape(np.shape(node))
            return {_ARRAY_REF: path}
        if isinstance(node, dict):
            return {str(k): strip(v, f"{path}/{k}" if path else str(k)) for k, v in node.items()}
        if isinstance(node, (list, tuple)):
            return [strip(v, f"{path}/{i}") for i, v in enumerate(node)]
        return node

    skeleton = strip(state, "")
    save_file(arrays, os.path.join(directory, f"{name}.safetensors"))
    write_json(os.path.join(directory, f"{name}.json"), skeleton)


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
