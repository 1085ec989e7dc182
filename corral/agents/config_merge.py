"""Merging trainer configs: RLlib 1.x's `deep_update` and `merge_trainer_configs`.

A user's partial config is merged over an algorithm's `DEFAULT_CONFIG`; an unknown key
(also below the top level, except in the dicts of `ALLOW_UNKNOWN_SUBKEYS`) is an error
naming the key and the closest valid ones. Re-exported by `corral.agents.config`.

No torch import here: reading or validating a config must stay cheap.
"""

from __future__ import annotations

import copy
import difflib
import functools
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from corral.agents.callbacks import DefaultCallbacks

# A complete trainer config (every key present) and a user's partial one.
TrainerConfigDict = dict[str, Any]
PartialTrainerConfigDict = dict[str, Any]


def copy_config(value: Any) -> Any:
    """Copy the containers (dicts, lists, tuples, sets) of a config, not the leaves.

    `copy.deepcopy` would also clone classes' instances, functions' closures, torch
    modules or gym spaces the config refers to; those are kept by reference.
    """
    if isinstance(value, dict):
        if type(value) is dict:
            return {k: copy_config(v) for k, v in value.items()}
        # dict subclasses (OrderedDict, defaultdict, EnvContext ...) keep their type
        # and attributes.
        new = copy.copy(value)
        for k, v in value.items():
            new[k] = copy_config(v)
        return new
    if isinstance(value, list):
        return [copy_config(v) for v in value]
    if isinstance(value, tuple):
        items = [copy_config(v) for v in value]
        # NamedTuples (e.g. PolicySpec) are rebuilt positionally.
        return type(value)(*items) if hasattr(value, "_fields") else type(value)(items)
    if isinstance(value, set | frozenset):
        return type(value)(value)
    return value


# Dict-valued top-level keys whose dicts may receive sub-keys that the defaults lack
# (env options, model extras, per-class exploration arguments, ...).
ALLOW_UNKNOWN_SUBKEYS: list[str] = [
    "tf_session_args",
    "local_tf_session_args",
    "env_config",
    "model",
    "optimizer",
    "multiagent",
    "custom_resources_per_worker",
    "evaluation_config",
    "exploration_config",
    "extra_python_environs_for_driver",
    "extra_python_environs_for_worker",
    "input_config",
    "output_config",
    "logger_config",
]

# Dict-valued top-level keys replaced as a whole (not merged) when the new dict names a
# different "type": the old class's arguments would not fit the new class.
OVERRIDE_ALL_SUBKEYS_IF_TYPE_CHANGES: list[str] = ["exploration_config"]


def _close_matches(key: Any, valid: Iterable[Any]) -> list[str]:
    """Valid keys resembling `key`, best first, ignoring case."""
    by_lower: dict[str, str] = {}
    for k in valid:
        by_lower.setdefault(str(k).lower(), str(k))
    hits = difflib.get_close_matches(str(key).lower(), list(by_lower), n=3, cutoff=0.6)
    return [by_lower[h] for h in hits]


def unknown_key_error(
    key: Any, valid: Iterable[Any], prefix: str = "", hint: str = ""
) -> ValueError:
    """Build the error for a config key that does not exist, with suggestions.

    Args:
        key: the unknown key.
        valid: the keys that would have been accepted at that place.
        prefix: path of the enclosing dict, e.g. "model/".
        hint: extra advice appended to the message.
    """
    valid = list(valid)
    msg = f"Unknown config key '{prefix}{key}'."
    matches = _close_matches(key, valid)
    if matches:
        msg += " Did you mean: " + ", ".join(f"'{prefix}{m}'" for m in matches) + "?"
    elif prefix:
        msg += " Valid keys there: " + ", ".join(sorted(f"'{k}'" for k in map(str, valid))) + "."
    else:
        msg += " See COMMON_CONFIG and the algorithm's DEFAULT_CONFIG for the valid keys."
    if hint:
        msg += " " + hint
    return ValueError(msg)


def _update(
    original: dict,
    new: Mapping,
    new_keys_allowed: bool,
    allow_new_subkey_list: Collection[str],
    override_all_if_type_changes: Collection[str],
    prefix: str,
) -> dict:
    for key, value in new.items():
        if key not in original and not new_keys_allowed:
            raise unknown_key_error(key, original.keys(), prefix)
        old = original.get(key)
        if isinstance(old, dict) and isinstance(value, Mapping):
            if (
                key in override_all_if_type_changes
                and "type" in value
                and "type" in old
                and value["type"] != old["type"]
            ):
                original[key] = copy_config(dict(value))
            else:
                # Below the top level, sub-keys are either all allowed (keys in the
                # allow list) or inherit the caller's rule; the lists apply only at
                # the top.
                sub_allowed = key in allow_new_subkey_list or new_keys_allowed
                _update(old, value, sub_allowed, (), (), f"{prefix}{key}/")
        else:
            original[key] = copy_config(value)
    return original


def deep_update(
    original: dict,
    new_dict: Mapping,
    new_keys_allowed: bool = False,
    allow_new_subkey_list: Collection[str] | None = None,
    override_all_if_type_changes: Collection[str] | None = None,
) -> dict:
    """Merge `new_dict` into `original` recursively, in place, and return `original`.

    Dicts present on both sides merge key by key; anything else in `new_dict` replaces
    the old value (containers copied, other objects by reference).

    Args:
        original: the dict to update (changed in place).
        new_dict: the updates.
        new_keys_allowed: whether top-level keys missing from `original` may be
            added; otherwise they raise `ValueError` naming the key and close matches.
        allow_new_subkey_list: top-level keys whose dict values may gain new
            sub-keys at any depth. Other dict values may not (unless `new_keys_allowed`):
            a new sub-key raises `ValueError` naming its path ("key/subkey").
        override_all_if_type_changes: top-level keys whose dict value is replaced
            as a whole when the new dict's "type" entry differs from the old one.
    """
    return _update(
        original,
        new_dict,
        new_keys_allowed,
        allow_new_subkey_list or (),
        override_all_if_type_changes or (),
        "",
    )


def merge_trainer_configs(
    config1: Mapping[str, Any],
    config2: Mapping[str, Any] | None,
    allow_unknown_configs: bool = False,
    allow_unknown_subkeys: Collection[str] = ALLOW_UNKNOWN_SUBKEYS,
    override_all_subkeys_if_type_changes: Collection[str] = OVERRIDE_ALL_SUBKEYS_IF_TYPE_CHANGES,
) -> TrainerConfigDict:
    """Return a new config: `config2` merged over a copy of `config1`.

    Neither input is modified. A legacy dict given as `callbacks` becomes a factory of
    `DefaultCallbacks(legacy_callbacks_dict=...)`.

    Args:
        config1: the base, usually the algorithm's `DEFAULT_CONFIG`.
        config2: the (partial) user config; None means no changes.
        allow_unknown_configs: accept top-level keys `config1` lacks.
        allow_unknown_subkeys: see `deep_update`'s `allow_new_subkey_list`.
        override_all_subkeys_if_type_changes: see `deep_update`.
    """
    if config2 is None:
        config2 = {}
    if not isinstance(config2, Mapping):
        raise ValueError(
            f"A trainer config must be a dict, got {type(config2).__name__}: {config2!r}"
        )
    merged = copy_config(dict(config1))
    updates = dict(config2)
    if type(updates.get("callbacks")) is dict:
        # A partial (not a closure) so the factory pickles into worker processes.
        updates["callbacks"] = functools.partial(
            DefaultCallbacks, legacy_callbacks_dict=updates["callbacks"]
        )
    return deep_update(
        merged,
        updates,
        allow_unknown_configs,
        allow_unknown_subkeys,
        override_all_subkeys_if_type_changes,
    )
