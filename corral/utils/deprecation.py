"""Helpers for retiring config keys and APIs without breaking ported RLlib code.

`DEPRECATED_VALUE` marks a config key that is still accepted but should no longer
be set: a default of `DEPRECATED_VALUE` means "the user did not touch it", so the
config validator can tell an explicit setting apart and warn (or map it to the new
key).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from typing import Any

logger = logging.getLogger(__name__)

# Same sentinel as RLlib, so configs written against RLlib compare equal here.
DEPRECATED_VALUE = -1

_logged_keys: set[str] = set()


class CorralDeprecationError(DeprecationWarning, ValueError):
    """Raised for a deprecated feature that no longer works at all.

    It is both a `ValueError` (what RLlib 1.x raised, so existing `except` clauses
    still match) and a `DeprecationWarning` (what it semantically is).
    """


def log_once(key: str) -> bool:
    """Return True the first time `key` is seen in this process, False afterwards.

    Use it to guard a log line that would otherwise repeat every iteration.
    """
    if key in _logged_keys:
        return False
    _logged_keys.add(key)
    return True


def deprecation_warning(
    old: str,
    new: str | None = None,
    *,
    help: str | None = None,
    error: bool | type[Exception] | None = None,
) -> None:
    """Report that `old` is deprecated, pointing at `new` (or `help`) when given.

    Args:
        old: what is deprecated (a config key, a function, an argument).
        new: what to use instead, if anything.
        help: free-text advice, used when there is no single replacement.
        error: True raises `CorralDeprecationError` (a `ValueError`) because the
            old form is no longer supported; an exception class raises that (as RLlib's);
            False or None only logs a warning.
    """
    msg = f"`{old}` has been deprecated."
    if new:
        msg += f" Use `{new}` instead."
    if help:
        msg += f" {help}"
    if isinstance(error, type) and issubclass(error, Exception):
        raise error(msg)
    if error:
        raise CorralDeprecationError(msg)
    logger.warning("DeprecationWarning: %s This will raise an error in the future!", msg)


def deprecation_warning_once(old: str, new: str | None = None, *, help: str | None = None) -> None:
    """`deprecation_warning` the first time `old` is reported in this process: for a
    deprecated method or argument of a call made per step (RLlib's `Deprecated`
    decorator logged once too)."""
    if log_once(f"Deprecated:{old}"):
        deprecation_warning(old, new, help=help)


def Deprecated(  # noqa: N802 (RLlib's name)
    old: str | None = None,
    *,
    new: str | None = None,
    help: str | None = None,
    error: bool | type[Exception] | None,
) -> Callable[[Any], Any]:
    """Decorator marking a class, method or function deprecated (RLlib 1.13's ``Deprecated``).

    Using the decorated object calls :func:`deprecation_warning` first (once per process
    and name, as RLlib's ``log_once`` does): a class warns (or raises) when instantiated,
    a function or method when called. With ``error=True`` (or an exception class) every use
    raises instead.

    Args:
        old: what is deprecated; defaults to the decorated object's name.
        new: what to use instead.
        help: free-text advice when there is no single replacement.
        error: whether (or which exception) to raise instead of warning.
    """

    def decorate(obj: Any) -> Any:
        what = old or obj.__name__

        def warn() -> None:
            if error or log_once(f"Deprecated:{what}"):
                deprecation_warning(old=what, new=new, help=help, error=error)

        if isinstance(obj, type):
            original_init = obj.__init__

            @functools.wraps(original_init)
            def patched_init(*args: Any, **kwargs: Any) -> None:
                warn()
                original_init(*args, **kwargs)

            obj.__init__ = patched_init
            return obj

        @functools.wraps(obj)
        def patched(*args: Any, **kwargs: Any) -> Any:
            warn()
            return obj(*args, **kwargs)

        return patched

    return decorate
