"""Declarative type and range specs for trainer config keys.

A spec says what one config value may be (`Int(1)`, `Float(0, 1)`,
`OneOf("a", "b")`, `Optional(ListOf(Int(1)))`, ...). Tables of specs sit next to
the keys they describe (`COMMON_CONFIG_SPECS` beside `COMMON_CONFIG`, each
algorithm's `CONFIG_SPECS` beside its `DEFAULT_CONFIG`, `MODEL_SPECS` beside
`MODEL_DEFAULTS`), and `check_config_values` walks a config against a table at
trainer construction. A bad value raises `ValueError` (a value out of range, a
non-finite number) or `TypeError` (a value of the wrong type), always naming the
key's full path (`model.fcnet_hiddens`), the value and what was expected, instead
of failing later deep inside sampling or learning.

No numpy or torch import here: checking a config must stay cheap. numpy scalars
still pass, since numpy registers them with the `numbers` ABCs.
"""

from __future__ import annotations

import functools
import math
import numbers
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "AnyOf",
    "AnyValue",
    "Bool",
    "CallableSpec",
    "ClassOrFactory",
    "Dict",
    "Float",
    "Int",
    "ListOf",
    "Num",
    "OneOf",
    "Optional",
    "Schedule",
    "Spec",
    "Satisfies",
    "Str",
    "SubConfig",
    "Rule",
    "check_config_values",
    "check_rules",
]


# The largest float32 (numpy.finfo(numpy.float32).max, spelled out: no numpy import).
FLOAT32_MAX = 3.4028234663852886e38


def _short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


class ConfigValueError(ValueError):
    """A config value out of its documented range (the message names the key)."""


class ConfigTypeError(TypeError):
    """A config value of the wrong type (the message names the key)."""


class ConfigKeyError(KeyError, ValueError):
    """A config key (or a key inside a config dict, e.g. a policy id) that is not allowed.

    A `KeyError`, as RLlib 1.13 raises for `multiagent`'s keys, and a `ValueError` (a bad
    config value), as corral raised it before. Its text is the message itself (a plain
    `KeyError` would show it quoted).
    """

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


class Spec:
    """What one config value may be. Subclasses define `describe` and `problem`."""

    def describe(self) -> str:
        """What is expected, as it reads after "must be": e.g. "an int >= 1"."""
        raise NotImplementedError

    def problem(self, value: Any, path: str) -> Exception | None:
        """None if `value` fits, else the error to raise (naming `path`)."""
        raise NotImplementedError

    def _error(self, path: str, value: Any, wrong_type: bool) -> Exception:
        cls = ConfigTypeError if wrong_type else ConfigValueError
        return cls(f"`{path}` must be {self.describe()}, got {_short(value)}.")

    def check(self, value: Any, path: str) -> None:
        """Raise the problem of `value`, if any."""
        err = self.problem(value, path)
        if err is not None:
            raise err


def _is_int(value: Any) -> bool:
    return isinstance(value, numbers.Integral) and not _is_bool(value)


def _is_bool(value: Any) -> bool:
    # numpy's bool_ is no `numbers` member; recognise it by name (no numpy import).
    return isinstance(value, bool) or type(value).__name__ == "bool_"


def _is_real(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not _is_bool(value)


class Num(Spec):
    """A finite number in a range.

    Args:
        lo: lower bound (None: none).
        hi: upper bound (None: none).
        lo_open: exclude `lo` itself.
        hi_open: exclude `hi` itself.
        integer: only ints (bools are not ints here); floats such as 150.5 or
            200.0 are rejected, because the code uses the value as a count.
        integral_float_ok: with `integer`, also accept floats without a
            fractional part (1e6): for keys the code casts with `int()` and
            that users commonly write in scientific notation.
    """

    def __init__(
        self,
        lo: float | None = None,
        hi: float | None = None,
        *,
        lo_open: bool = False,
        hi_open: bool = False,
        integer: bool = False,
        integral_float_ok: bool = False,
    ) -> None:
        self.lo, self.hi = lo, hi
        self.lo_open, self.hi_open = lo_open, hi_open
        self.integer = integer
        self.integral_float_ok = integral_float_ok

    def describe(self) -> str:
        kind = "an int" if self.integer else "a number"
        lo, hi = self.lo, self.hi
        if lo is not None and hi is not None:
            left = "(" if self.lo_open else "["
            right = ")" if self.hi_open else "]"
            return f"{kind} in {left}{lo}, {hi}{right}"
        if lo is not None:
            return f"{kind} {'>' if self.lo_open else '>='} {lo}"
        if hi is not None:
            return f"{kind} {'<' if self.hi_open else '<='} {hi}"
        return kind if self.integer else "a finite number"

    def problem(self, value: Any, path: str) -> Exception | None:
        if self.integer:
            ok_type = _is_int(value) or (
                self.integral_float_ok
                and _is_real(value)
                and math.isfinite(value)
                and float(value).is_integer()
            )
            if not ok_type:
                wrong_type = not _is_real(value)
                return self._error(path, value, wrong_type)
        elif not _is_real(value):
            return self._error(path, value, wrong_type=True)
        if not math.isfinite(value):
            return self._error(path, value, wrong_type=False)
        if not self.integer and abs(value) > FLOAT32_MAX:
            # Torch computes in float32: a larger value overflows there (to inf, or
            # with an error converting it) even when it is finite in Python.
            return ConfigValueError(
                f"`{path}` must be {self.describe()} within float32's range "
                f"(|x| <= {FLOAT32_MAX:.4g}), got {_short(value)}."
            )
        lo, hi = self.lo, self.hi
        if lo is not None and (value < lo or (self.lo_open and value == lo)):
            return self._error(path, value, wrong_type=False)
        if hi is not None and (value > hi or (self.hi_open and value == hi)):
            return self._error(path, value, wrong_type=False)
        return None


def Int(lo: int | None = None, hi: int | None = None, **kwargs: Any) -> Num:  # noqa: N802
    """An int in [lo, hi] (see `Num`)."""
    return Num(lo, hi, integer=True, **kwargs)


def Float(lo: float | None = None, hi: float | None = None, **kwargs: Any) -> Num:  # noqa: N802
    """A finite number (int or float) in [lo, hi] (see `Num`)."""
    return Num(lo, hi, **kwargs)


class Bool(Spec):
    """True or False (not 0/1, not "no")."""

    def describe(self) -> str:
        return "a bool (True or False)"

    def problem(self, value: Any, path: str) -> Exception | None:
        return None if _is_bool(value) else self._error(path, value, wrong_type=True)


class Str(Spec):
    """Any str."""

    def describe(self) -> str:
        return "a str"

    def problem(self, value: Any, path: str) -> Exception | None:
        return None if isinstance(value, str) else self._error(path, value, wrong_type=True)


class OneOf(Spec):
    """One of a fixed set of values (compared with ==, bools never equal to 0/1)."""

    def __init__(self, *choices: Any, ignore_case: bool = False) -> None:
        self.choices = choices
        self.ignore_case = ignore_case

    def describe(self) -> str:
        return "one of " + ", ".join(repr(c) for c in self.choices)

    def problem(self, value: Any, path: str) -> Exception | None:
        if self.ignore_case and isinstance(value, str):
            value = value.lower()
        for choice in self.choices:
            if type(choice) is type(value) and choice == value:
                return None
            if isinstance(choice, str) and isinstance(value, str) and choice == value:
                return None
        wrong_type = not any(isinstance(value, type(c)) for c in self.choices)
        return self._error(path, value, wrong_type)


class _Described(Spec):
    """A spec described by a text given at construction (`default_what` without one)."""

    default_what = ""

    def __init__(self, what: str | None = None) -> None:
        self.what = self.default_what if what is None else what

    def describe(self) -> str:
        return self.what


class AnyValue(_Described):
    """Anything (opaque objects: env classes, spaces, user functions' data ...)."""

    default_what = "any value"

    def problem(self, value: Any, path: str) -> Exception | None:
        return None


class CallableSpec(_Described):
    """A callable (function, class, partial ...)."""

    default_what = "a callable"

    def problem(self, value: Any, path: str) -> Exception | None:
        return None if callable(value) else self._error(path, value, wrong_type=True)


class ClassOrFactory(_Described):
    """A subclass of `base`, a `functools.partial` of one, an instance of `base`
    that is itself callable (e.g. `MultiCallbacks([...])`), or another callable
    whose result the trainer checks when it calls it.

    A class or partial of the wrong class is rejected here, at once.
    """

    def __init__(self, base: type, what: str) -> None:
        super().__init__(what)
        self.base = base

    def problem(self, value: Any, path: str) -> Exception | None:
        target = value.func if isinstance(value, functools.partial) else value
        if isinstance(target, type):
            if issubclass(target, self.base):
                return None
            return self._error(path, value, wrong_type=True)
        if isinstance(value, self.base) or callable(value):
            return None
        return self._error(path, value, wrong_type=True)


class Optional(Spec):
    """None, or a value of `inner`."""

    def __init__(self, inner: Spec) -> None:
        self.inner = inner

    def describe(self) -> str:
        return f"None or {self.inner.describe()}"

    def problem(self, value: Any, path: str) -> Exception | None:
        if value is None:
            return None
        err = self.inner.problem(value, path)
        if err is None:
            return None
        if _names_this_path(err, path):
            # Re-word with "None or ..." (a problem inside a container keeps its own path).
            return self._error(path, value, isinstance(err, TypeError))
        return err


def _names_this_path(err: Exception, path: str) -> bool:
    return str(err).startswith(f"`{path}` must be ")


class AnyOf(Spec):
    """A value that fits at least one of `options` (tried in order)."""

    def __init__(self, *options: Spec) -> None:
        self.options = options

    def describe(self) -> str:
        return " or ".join(o.describe() for o in self.options)

    def problem(self, value: Any, path: str) -> Exception | None:
        errors = []
        for option in self.options:
            err = option.problem(value, path)
            if err is None:
                return None
            errors.append(err)
        # A problem deeper inside one container option (`key[0]`) says more than the
        # list of alternatives.
        deeper = [e for e in errors if not _names_this_path(e, path)]
        if len(deeper) == 1:
            return deeper[0]
        return self._error(path, value, all(isinstance(e, TypeError) for e in errors))


class ListOf(Spec):
    """A list (or tuple) whose every item fits `item`.

    Args:
        item: spec of each item; its path is `key[i]`.
        min_len: fewest items.
        length: exact number of items (None: any).
        sets_ok: accept sets too (for collections of ids, where order is moot).
    """

    def __init__(
        self, item: Spec, min_len: int = 0, length: int | None = None, sets_ok: bool = False
    ) -> None:
        self.item, self.min_len, self.length = item, min_len, length
        self.kinds: tuple[type, ...] = (list, tuple, set, frozenset) if sets_ok else (list, tuple)

    def describe(self) -> str:
        if self.length is not None:
            return f"a list of {self.length} items, each {self.item.describe()}"
        at_least = f"at least {self.min_len} " if self.min_len else ""
        return f"a list of {at_least}items, each {self.item.describe()}"

    def problem(self, value: Any, path: str) -> Exception | None:
        if not isinstance(value, self.kinds):
            return self._error(path, value, wrong_type=True)
        if len(value) < self.min_len or (self.length is not None and len(value) != self.length):
            return self._error(path, value, wrong_type=False)
        for i, v in enumerate(value):
            err = self.item.problem(v, f"{path}[{i}]")
            if err is not None:
                return err
        return None


class Dict(_Described):
    """A dict (any `Mapping`), optionally with specs for some of its keys.

    Args:
        keys: specs of known sub-keys, checked when present (path `key.sub`).
        values: spec of every value (e.g. `Str()` for environment variables).
        what: how to describe the expected dict.
    """

    def __init__(
        self,
        keys: Mapping[str, Spec] | None = None,
        values: Spec | None = None,
        what: str = "a dict",
    ) -> None:
        super().__init__(what)
        self.keys = dict(keys or {})
        self.values = values

    def problem(self, value: Any, path: str) -> Exception | None:
        if not isinstance(value, Mapping):
            return self._error(path, value, wrong_type=True)
        for k, v in value.items():
            spec = self.keys.get(k, self.values)
            if spec is None:
                continue
            err = spec.problem(v, f"{path}.{k}")
            if err is not None:
                return err
        return None


class SubConfig(Spec):
    """None or a dict of overrides of the config it sits in (`evaluation_config`):
    `check_config_values` checks its keys against the same table, under
    "<key>.<sub-key>"."""

    def describe(self) -> str:
        return "a dict of config overrides"

    def problem(self, value: Any, path: str) -> Exception | None:
        if value is None or isinstance(value, Mapping):
            return None
        return self._error(path, value, wrong_type=True)


class Schedule(Spec):
    """None or `[[timestep, value], ...]` with ints >= 0 in increasing order and
    finite values, as a piecewise-linear schedule reads it."""

    def __init__(self, value: Spec | None = None) -> None:
        self.value = value or Float()

    def describe(self) -> str:
        return (
            "None or a non-empty list of [timestep, value] pairs (timesteps ints >= 0, "
            f"increasing; values {self.value.describe()})"
        )

    def problem(self, value: Any, path: str) -> Exception | None:
        if value is None:
            return None
        if not isinstance(value, list | tuple) or not value:
            return self._error(path, value, wrong_type=not isinstance(value, list | tuple))
        last = -1
        for i, pair in enumerate(value):
            if not isinstance(pair, list | tuple) or len(pair) != 2:
                return self._error(path, value, wrong_type=False)
            t, v = pair
            if not _is_int(t) or t < 0 or t < last:
                return self._error(path, value, wrong_type=False)
            last = t
            err = self.value.problem(v, f"{path}[{i}][1]")
            if err is not None:
                return err
        return None


class Lazy(Spec):
    """A spec built on first use (e.g. one that needs gymnasium, or a table that
    refers to itself, like `evaluation_config`)."""

    def __init__(self, factory: Callable[[], Spec]) -> None:
        self.factory = factory
        self._spec: Spec | None = None

    def _get(self) -> Spec:
        if self._spec is None:
            self._spec = self.factory()
        return self._spec

    def describe(self) -> str:
        return self._get().describe()

    def problem(self, value: Any, path: str) -> Exception | None:
        return self._get().problem(value, path)


class _ImportedTarget(_Described):
    """A spec whose class or predicate is imported lazily from `module:name` on the first
    check (so that reading a config imports neither gymnasium nor torch)."""

    def __init__(self, target: str, what: str) -> None:
        super().__init__(what)
        self.target = target

    def _resolve(self) -> Any:
        import importlib

        module, name = self.target.split(":")
        return getattr(importlib.import_module(module), name)


class InstanceOf(_ImportedTarget):
    """An instance of a class imported lazily from `module:name` on the first check."""

    def problem(self, value: Any, path: str) -> Exception | None:
        cls = self._resolve()
        return None if isinstance(value, cls) else self._error(path, value, wrong_type=True)


def _is_numpy_scalar(value: Any) -> bool:
    return type(value).__module__ == "numpy" and isinstance(value, numbers.Number | bool)


def _to_python_numbers(value: Any) -> Any:
    """`value` with numpy scalars (in dicts and lists, at any depth) replaced by the
    equal Python numbers: `random.seed`, JSON (params.json, checkpoints) and
    other consumers of a config accept only those."""
    if _is_numpy_scalar(value) or type(value).__name__ == "bool_":
        return value.item()
    if isinstance(value, dict):
        for k, v in value.items():
            new = _to_python_numbers(v)
            if new is not v:
                value[k] = new
        return value
    if type(value) is list:
        for i, v in enumerate(value):
            new = _to_python_numbers(v)
            if new is not v:
                value[i] = new
        return value
    return value


class Satisfies(_ImportedTarget):
    """A value for which a predicate imported lazily from `module:function` is true."""

    def problem(self, value: Any, path: str) -> Exception | None:
        predicate = self._resolve()
        return None if predicate(value) else self._error(path, value, wrong_type=True)


def check_config_values(
    config: Mapping[str, Any], specs: Mapping[str, Spec], prefix: str = ""
) -> None:
    """Check each key of `config` that has a spec in `specs`.

    Keys without a spec are skipped here (unknown keys are rejected when configs
    merge; a test keeps the tables complete). numpy scalars pass as numbers and, in a
    mutable config, are replaced by Python numbers once they passed.

    Raises:
        ValueError: a value out of range (the message names the key's path, the
            value and what is expected).
        TypeError: a value of the wrong type (same message).
    """
    for key, value in config.items():
        spec = specs.get(key)
        if spec is None:
            continue
        path = f"{prefix}{key}"
        spec.check(value, path)
        if isinstance(spec, SubConfig) and value:
            check_config_values(value, specs, prefix=f"{path}.")
        elif isinstance(config, dict):
            new = _to_python_numbers(value)
            if new is not value:
                config[key] = new


class Rule:
    """A check across config keys, declared next to an algorithm's specs.

    Args:
        holds: fn(config) -> whether the config is acceptable.
        message: the `ValueError`'s text, formatted with the config's keys
            (``"{v_min}"`` is the config's `v_min`).
    """

    def __init__(self, holds: Callable[[Mapping[str, Any]], bool], message: str) -> None:
        self.holds, self.message = holds, message

    def check(self, config: Mapping[str, Any]) -> None:
        """Raises `ValueError` with the message when `holds(config)` is false."""
        if not self.holds(config):
            raise ValueError(self.message.format_map(config))


def check_rules(config: Mapping[str, Any], owner: type) -> None:
    """Checks the `_config_rules` (a tuple of `Rule`) of `owner` and of its base classes,
    base classes first.

    Raises:
        ValueError: the first rule that does not hold, in its words.
    """
    for klass in reversed(owner.__mro__):
        for rule in klass.__dict__.get("_config_rules", ()):
            rule.check(config)
