"""`from_config`: build an object from a config (RLlib 1.13's helper).

A config is a dict whose `"type"` names the class (a class, a dotted path
`"package.module.Class"`, or the name of a class in the module of the base class given),
the other keys being constructor arguments; a YAML/JSON string or file of such a dict; or
an object that already is the thing (returned as it is). Old `gym.spaces` objects among
the arguments are passed as their Gymnasium spaces.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import sys
from typing import Any

import yaml

from corral.utils.keyword_aliases import keyword_aliases


def from_config(cls: Any, config: Any = None, **kwargs: Any) -> Any:
    """An instance built from `config` (see the module doc).

    Args:
        cls: the base class (the default type, and where a bare type name is looked up);
            or the config itself when `config` is None.
        config: the config.
        **kwargs: constructor arguments added to (and overriding) the config's.

    Returns:
        The instance; None when the type is an abstract class (RLlib 1.13's answer to an
        attempt to build one).

    Raises:
        ValueError: the type cannot be found.
        TypeError: `config` is of a kind not understood.
    """
    if config is None and isinstance(cls, (dict, str)):
        cls, config = None, cls
    if isinstance(cls, type) and isinstance(config, cls):
        return config
    if config is None:
        config = {}
    if isinstance(config, str):
        config = _parse(config)
    if isinstance(config, type):
        config = {"type": config}
    if not isinstance(config, dict):
        raise TypeError(f"from_config: config must be a dict, a string or None, got {config!r}")
    arguments = dict(config)
    type_ = arguments.pop("type", cls)
    arguments.update(kwargs)
    # Old `gym.spaces` arguments (an exploration's `action_space`, ...) as Gymnasium's,
    # as corral converts them everywhere else. (Other arguments are passed as they are:
    # a dict argument is the caller's own object.)
    from corral.env.gym_compat import convert_space, is_old_gym_space

    for key, value in arguments.items():
        if is_old_gym_space(value):
            arguments[key] = convert_space(value)
    if isinstance(type_, str):
        found = lookup_type(cls, type_)
        if found is None:
            raise ValueError(
                f"from_config: no class {type_!r} (give a class, a dotted path "
                "'package.module.Class', or a class name of the base class's module)."
            )
        type_ = found
    if type_ is None:
        raise ValueError(f"from_config: config {config!r} names no 'type' and no class was given")
    if inspect.isabstract(type_):
        return None
    return type_(**arguments)


def from_file(cls: Any, filename: str, *args: Any, **kwargs: Any) -> Any:
    """`from_config(cls, <the YAML or JSON in filename>, **kwargs)`; `args` are RLlib's
    and must be empty."""
    if args:
        raise TypeError(f"from_file takes keyword arguments only, got positional {args!r}")
    with open(filename, encoding="utf-8") as f:
        config = yaml.safe_load(f)
    return from_config(cls, config, **kwargs)


@keyword_aliases(type_="type_name")
def lookup_type(cls: Any, type_name: str) -> Any:
    """The class `type_name` (RLlib 1.13: `type_`) names: a dotted path, or a class of that
    name (any case, ignoring `_`) in the module of `cls` or among its subclasses; None if
    none."""
    if "." in type_name:
        module_name, _, attr = type_name.rpartition(".")
        try:
            return getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError):
            return None
    if cls is None:
        return None
    wanted = type_name.lower().replace("_", "")
    candidates = list(_subclasses(cls))
    module = sys.modules.get(getattr(cls, "__module__", ""))
    if module is not None:
        candidates += [obj for _, obj in inspect.getmembers(module, inspect.isclass)]
    for candidate in [cls, *candidates]:
        if candidate.__name__.lower().replace("_", "") == wanted:
            return candidate
    return None


def _subclasses(cls: type) -> list[type]:
    found = []
    for sub in cls.__subclasses__():
        found.append(sub)
        found.extend(_subclasses(sub))
    return found


def _parse(text: str) -> Any:
    """A config string: a file's path, YAML/JSON of a dict, or a type name."""
    if os.path.isfile(text):
        with open(text, encoding="utf-8") as f:
            return yaml.safe_load(f)
    try:
        value = json.loads(text)
    except json.JSONDecodeError:
        try:
            value = yaml.safe_load(text)
        except yaml.YAMLError:
            value = None
    return value if isinstance(value, dict) else {"type": text}
