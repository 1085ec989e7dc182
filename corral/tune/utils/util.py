"""``ray.tune.utils.util``: the helpers of Ray Tune 1.13 that RLlib 1.x code imports
(``merge_dicts``, ``deep_update``, ``flatten_dict``, ``unflatten_dict``, ...).

corral's own helpers are reused where they exist: ``deep_update`` is
``corral.agents.config_merge``'s (RLlib's signature), ``merge_dicts`` ``corral.utils``'s,
``unflatten_dict`` the variant generator's; ``flatten_dict`` is ``corral.tune.logger``'s
with Tune's ``prevent_delimiter``.
"""

from __future__ import annotations

import json
import logging
import math
import numbers
import time
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from corral.agents.config_merge import deep_update
from corral.tune.logger import flatten_dict as _flatten_dict
from corral.tune.suggest.variant_generator import unflatten_dict
from corral.utils import merge_dicts

logger = logging.getLogger(__name__)

__all__ = [
    "SafeFallbackEncoder",
    "date_str",
    "deep_update",
    "diagnose_serialization",
    "flatten_dict",
    "is_nan",
    "is_nan_or_inf",
    "merge_dicts",
    "unflatten_dict",
    "unflattened_lookup",
    "warn_if_slow",
]

_MISSING = object()


def flatten_dict(
    dt: Mapping[str, Any], delimiter: str = "/", prevent_delimiter: bool = False
) -> dict[str, Any]:
    """``dt`` with nested mappings flattened into one level, keys joined by ``delimiter``.

    Raises:
        ValueError: ``prevent_delimiter`` and a key holds ``delimiter``.
    """
    if prevent_delimiter:
        _check_no_delimiter(dt, delimiter)
    return _flatten_dict(dt, delimiter)


def _check_no_delimiter(dt: Mapping, delimiter: str) -> None:
    for key, value in dt.items():
        if delimiter in str(key):
            raise ValueError(f"Found delimiter `{delimiter}` in key when trying to flatten: {key}")
        if isinstance(value, Mapping):
            _check_no_delimiter(value, delimiter)


def unflattened_lookup(flat_key: str, lookup: Any, delimiter: str = "/", **kwargs: Any) -> Any:
    """The value at ``flat_key`` (keys joined by ``delimiter``; list items by index) in
    the nested dicts and lists ``lookup``.

    Args:
        flat_key: e.g. ``"info/learner/default_policy/total_loss"``.
        lookup: nested dicts (and lists).
        delimiter: what joins the keys.
        **kwargs: ``default=...``: returned when the key is missing.

    Raises:
        KeyError: the key is missing and no ``default`` was given.
    """
    default = kwargs.get("default", _MISSING)
    node = lookup
    for part in str(flat_key).split(delimiter):
        if isinstance(node, Mapping) and part in node:
            node = node[part]
        elif (
            isinstance(node, list | tuple)
            and part.lstrip("-").isdigit()
            and (-len(node) <= int(part) < len(node))
        ):
            node = node[int(part)]
        elif default is not _MISSING:
            return default
        else:
            raise KeyError(flat_key)
    return node


def date_str() -> str:
    """Now as ``YYYY-MM-DD_HH-MM-SS`` (Tune's folder-name stamp)."""
    return datetime.today().strftime("%Y-%m-%d_%H-%M-%S")


def is_nan(value: Any) -> bool:
    """Whether ``value`` is a NaN number."""
    try:
        return math.isnan(value)
    except TypeError:
        return False


def is_nan_or_inf(value: Any) -> bool:
    """Whether ``value`` is a NaN or infinite number."""
    try:
        return not math.isfinite(value)
    except TypeError:
        return False


class SafeFallbackEncoder(json.JSONEncoder):
    """A JSON encoder that never fails: NaN as ``nan_str``, numpy arrays as lists, numpy
    numbers as Python's, anything else as its ``str()``."""

    def __init__(self, nan_str: str = "null", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.nan_str = nan_str

    def default(self, value: Any) -> Any:
        try:
            if type(value).__module__ == "numpy" and hasattr(value, "tolist"):
                value = value.tolist()  # (arrays as lists, numpy numbers as Python's)
                if not isinstance(value, numbers.Number):
                    return value
            if isinstance(value, numbers.Number) and is_nan(value):
                return self.nan_str
            if isinstance(value, numbers.Integral):
                return int(value)
            if isinstance(value, numbers.Real):
                return float(value)
            return super().default(value)
        except Exception:
            return str(value)


class warn_if_slow:
    """A context manager that logs a warning when its block takes longer than
    ``threshold`` seconds (default 0.5).

    Args:
        name: what the block does, for the warning.
        threshold: seconds.
        disable: no warning.
    """

    def __init__(self, name: str, threshold: float | None = None, disable: bool = False) -> None:
        self.name = name
        self.threshold = 0.5 if threshold is None else threshold
        self.disable = disable
        self.too_slow = False
        self._start = 0.0

    def __enter__(self) -> warn_if_slow:
        self._start = time.monotonic()
        return self

    def __exit__(self, *exc: Any) -> None:
        took = time.monotonic() - self._start
        if took > self.threshold and not self.disable:
            self.too_slow = True
            logger.warning(
                "The `%s` operation took %.3f s, which may be a bottleneck.", self.name, took
            )


def diagnose_serialization(trainable: Callable) -> bool | set[str]:
    """Why ``trainable`` (a function trainable) cannot be pickled, if it cannot: True when
    ``cloudpickle`` serialises it; else the names of the globals and closure variables it
    uses that fail (each printed), which a ``tune.with_parameters`` or a local import
    fixes. (corral runs trials in this process, but ``"backend": "ray"`` ships them.)
    """
    import inspect

    import cloudpickle

    def serializes(obj: Any) -> bool:
        try:
            cloudpickle.dumps(obj)
        except Exception:
            return False
        return True

    if serializes(trainable):
        print(f"Trainable {trainable!r} serializes.")
        return True
    try:
        found = inspect.getclosurevars(trainable)
        variables = {**found.globals, **found.nonlocals}
    except TypeError:
        variables = {}
    failing = {name for name, value in variables.items() if not serializes(value)}
    for name in sorted(failing):
        print(f"Variable {name!r} of {trainable!r} does not serialize.")
    if not failing:
        print(f"Trainable {trainable!r} does not serialize, nor is one of its variables the cause.")
    return failing
