"""What a checkpoint may name, and how a name becomes an object again.

A checkpoint stores the trainer's config as JSON so that
`Trainer.from_checkpoint` can rebuild the algorithm. Config values that are
code (classes, functions) cannot be data; they are stored as their qualified
name. Turning such a name back into an object must never run code the user did
not ask to run, so:

* **Nothing is imported** on a checkpoint's word, except modules of corral
  itself. A class named by a checkpoint is looked up in the modules this process
  has already imported, and must be a subclass of what the key expects (a
  `Policy`, `DefaultCallbacks`, `Exploration`): `subprocess.Popen` named as a
  policy class is refused even though `subprocess` is loaded.
* **Functions are never resolved** (`policy_mapping_fn`, `custom_eval_function`,
  ...): no type check could tell a mapping function from `os.system`. The user
  passes them again (`config_overrides`).
* **An env** named by a checkpoint is used only when it is a name registered in
  this process (`register_env`) or a Gymnasium id without a `module:` prefix
  (that form imports the module); a class or dotted path needs the user to pass
  the env.

Whatever cannot be resolved becomes an `Unresolved` marker; `check_resolved`
raises one error listing each such key, why, and how to pass it.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from corral.utils.error import CheckpointError

# JSON markers of values that are not plain data.
_CLASS = "__class__"
_FUNCTION = "__function__"
_SPACE = "__space__"
_OPAQUE = "__unstorable__"
_TUPLE = "__tuple__"
_MARKERS = (_CLASS, _FUNCTION, _SPACE, _OPAQUE, _TUPLE)


@dataclass(frozen=True)
class Unresolved:
    """A config value a checkpoint could not give back, and why."""

    key: str
    reason: str


# -- classes named by a checkpoint -----------------------------------------------------


def qualified_name(obj: Any) -> str:
    """`module:Qual.Name` of a class or function (the form `resolve_class` reads)."""
    return f"{obj.__module__}:{obj.__qualname__}"


def resolve_class(name: Any, base: type, named_by: str) -> type:
    """The class a checkpoint names, without importing anything but corral's own modules.

    Args:
        name: `module:Qual.Name` (or the older dotted `module.Qual.Name`).
        base: what the class must derive from.
        named_by: the file or key naming it (for the error message).

    Raises:
        CheckpointError: the name is malformed, its module is not imported in
            this process, or the object is not a subclass of `base`.
    """
    if not isinstance(name, str) or not name:
        raise CheckpointError(f"{named_by} names the class {name!r}; expected 'module:Class'.")
    obj = _lookup_loaded(name)
    if obj is None:
        raise CheckpointError(
            f"{named_by} names the class {name!r}, whose module is not imported in this "
            "process. corral never imports what a checkpoint names: import that module (or "
            "pass the class yourself) before loading the checkpoint."
        )
    if not (isinstance(obj, type) and issubclass(obj, base)):
        raise CheckpointError(
            f"{named_by} names {name!r}, which is not a subclass of {base.__name__}; refused."
        )
    return obj


def _lookup_loaded(name: str) -> Any:
    """The object at `name` in an already imported module (or a module of corral)."""
    if ":" in name:
        module_name, _, qualname = name.partition(":")
        candidates = [(module_name, qualname)]
    else:  # dotted: try the longest module prefix first
        parts = name.split(".")
        candidates = [
            (".".join(parts[:i]), ".".join(parts[i:])) for i in range(len(parts) - 1, 0, -1)
        ]
    for module_name, qualname in candidates:
        module = sys.modules.get(module_name)
        if module is None and (module_name == "corral" or module_name.startswith("corral.")):
            try:
                module = importlib.import_module(module_name)
            except ImportError:
                module = None
        if module is None or "<locals>" in qualname:
            continue
        obj: Any = module
        try:
            for attr in qualname.split("."):
                obj = getattr(obj, attr)
        except AttributeError:
            continue
        return obj
    return None


def class_named_by_config(value: Any, base: type, key: str) -> Any:
    """`value`, or for a string the class it names as `params.json` writes classes
    (`module.QualName`), which RLlib 1.x scripts pass back as a config: looked up in
    the modules already imported (or corral's own), never importing another.

    Raises:
        ValueError: a string that names no loaded subclass of `base`.
    """
    if not isinstance(value, str):
        return value
    found = _lookup_loaded(value)
    if isinstance(found, type) and issubclass(found, base):
        return found
    raise ValueError(
        f"config key {key!r} is the string {value!r}; expected a {base.__name__} subclass "
        "(a string is taken for the class it names, as params.json writes them, only when "
        "that class's module is already imported: corral imports nothing a config names)."
    )


# -- envs named by a checkpoint ---------------------------------------------------------


def env_is_known(env: Any) -> bool:
    """Whether a checkpoint's `env` may be made without the user passing it again:
    a name registered in this process or a plain Gymnasium id (no `module:` prefix)."""
    if not isinstance(env, str) or not env:
        return False
    from corral.tune.registry import ENV_CREATOR, _global_registry

    if _global_registry.contains(ENV_CREATOR, env):
        return True
    if ":" in env:
        return False
    import gymnasium

    return env in gymnasium.registry


def env_refusal(env: Any, named_by: str) -> str:
    """Why a checkpoint's env is not used, and what to do instead."""
    return (
        f"{named_by} names the env {env!r}, which is neither registered in this process "
        "(register_env) nor a Gymnasium id; corral does not import or call what a checkpoint "
        "names: pass the env yourself"
    )


# -- the config as JSON ------------------------------------------------------------------


def config_to_json(config: Any) -> Any:
    """`config` as JSON-able data, code replaced by markers naming it."""
    import numpy as np

    if isinstance(config, Mapping):
        return {str(k): config_to_json(v) for k, v in config.items()}
    if isinstance(config, tuple) and not hasattr(config, "_fields"):
        return {_TUPLE: [config_to_json(v) for v in config]}
    if isinstance(config, list | tuple):
        return [config_to_json(v) for v in config]
    if config is None or isinstance(config, bool | int | str):
        return config
    if isinstance(config, float):
        return config if np.isfinite(config) else {_OPAQUE: repr(config)}
    if isinstance(config, np.generic):
        return config_to_json(config.item())
    if isinstance(config, type):
        return {_CLASS: qualified_name(config)}
    if callable(config) and hasattr(config, "__qualname__"):
        return {_FUNCTION: qualified_name(config)}
    import gymnasium

    if isinstance(config, gymnasium.Space):
        from corral.utils.spaces_json import space_to_json

        try:
            return {_SPACE: space_to_json(config)}
        except TypeError:
            pass
    return {_OPAQUE: f"{type(config).__name__} {_short(repr(config))}"}


def config_from_json(data: Any, named_by: str) -> Any:
    """Inverse of `config_to_json`: classes resolved by `resolve_class` rules, code and
    other non-data values left as `Unresolved` (see `check_resolved`)."""
    return _decode(data, "", named_by)


def _decode(node: Any, key: str, named_by: str) -> Any:
    if isinstance(node, list):
        return [_decode(v, f"{key}[{i}]", named_by) for i, v in enumerate(node)]
    if not isinstance(node, dict):
        return node
    if len(node) == 1 and next(iter(node)) in _MARKERS:
        kind, value = next(iter(node.items()))
        return _decode_marker(kind, value, key, named_by)
    out = {}
    for k, v in node.items():
        path = f"{key}.{k}" if key else k
        out[k] = _decode(v, path, named_by)
        if k == "env" and out[k] is not None and not isinstance(out[k], Unresolved):
            if not env_is_known(out[k]):
                out[k] = Unresolved(path, env_refusal(out[k], named_by))
        elif k == "type" and key.endswith("exploration_config") and isinstance(out[k], str):
            out[k] = _decode_exploration_type(out[k], path, named_by)
        elif k == "type" and key.endswith("logger_config") and isinstance(out[k], str):
            # A dotted path would be imported by the logger factory: never from a checkpoint.
            out[k] = Unresolved(path, f"it names the logger {out[k]!r}, which is not imported")
    return out


def _decode_marker(kind: str, value: Any, key: str, named_by: str) -> Any:
    if kind == _TUPLE:
        return tuple(_decode(v, f"{key}[{i}]", named_by) for i, v in enumerate(value))
    if kind == _SPACE:
        from corral.utils.spaces_json import space_from_json

        try:
            return space_from_json(value)
        except (KeyError, ValueError, TypeError) as e:
            raise CheckpointError(f"{named_by}: the space at {key!r} is malformed ({e}).") from e
    if kind == _CLASS:
        if key.rsplit(".", 1)[-1] == "env":
            return Unresolved(key, env_refusal(value, named_by))
        base = _expected_base(key)
        if base is None:
            return Unresolved(key, f"it was the class {value!r}, which a checkpoint cannot name")
        try:
            return resolve_class(value, base, f"{named_by} (key {key!r})")
        except CheckpointError as e:
            return Unresolved(key, str(e))
    if kind == _FUNCTION:
        return Unresolved(key, f"it was the function {value!r}; checkpoints do not store code")
    return Unresolved(key, f"its value ({value}) could not be stored as data")


def _decode_exploration_type(kind: str, key: str, named_by: str) -> Any:
    if "." not in kind and ":" not in kind:
        return kind  # one of corral's exploration classes by name
    from corral.utils.exploration import Exploration

    try:
        return resolve_class(kind, Exploration, f"{named_by} (key {key!r})")
    except CheckpointError as e:
        return Unresolved(key, str(e))


def _expected_base(key: str) -> type | None:
    """The base class a class-valued config key must derive from (None: not a class key)."""
    last = key.rsplit(".", 1)[-1]
    if last == "callbacks":
        from corral.agents.callbacks import DefaultCallbacks

        return DefaultCallbacks
    if last == "type" and "exploration_config" in key:
        from corral.utils.exploration import Exploration

        return Exploration
    if last == "type" and "logger_config" in key:
        from corral.tune.logger import Logger

        return Logger
    if ".policies." in f".{key}" or last in ("policy_class", "default_policy_class"):
        from corral.policy.policy import Policy

        return Policy
    if last == "custom_model":  # `model.custom_model`, Dreamer's `dreamer_model.custom_model`
        from corral.models.modelv2 import ModelV2

        return ModelV2
    return None


def find_unresolved(config: Any) -> list[Unresolved]:
    """Every `Unresolved` marker left in `config`."""
    if isinstance(config, Unresolved):
        return [config]
    if isinstance(config, Mapping):
        return [u for v in config.values() for u in find_unresolved(v)]
    if isinstance(config, list | tuple):
        return [u for v in config for u in find_unresolved(v)]
    return []


def check_resolved(config: Any, checkpoint: str) -> None:
    """Raises one `CheckpointError` naming every key the checkpoint could not give back."""
    missing = find_unresolved(config)
    if missing:
        lines = "\n".join(f"  {u.key}: {u.reason}" for u in missing)
        raise CheckpointError(
            f"Checkpoint {checkpoint} cannot rebuild these config keys:\n{lines}\n"
            "Pass them in `config_overrides` (e.g. Trainer.from_checkpoint(path, "
            "config_overrides={'env': ...})); corral does not import or run what a checkpoint "
            "names."
        )


def _short(text: str, limit: int = 80) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def apply_overrides(config: Mapping, overrides: Mapping) -> dict:
    """`config` with `overrides` merged in: nested dicts merge, anything else replaces
    (an `Unresolved` value included)."""
    out = dict(config)
    for key, value in overrides.items():
        current = out.get(key)
        if isinstance(value, Mapping) and isinstance(current, Mapping):
            out[key] = apply_overrides(current, value)
        else:
            out[key] = value
    return out
