"""Helpers for retiring config keys and APIs without breaking ported RLlib code.

`DEPRECATED_VALUE` marks a config key that is still accepted but should no longer
be set: a default of `DEPRECATED_VALUE` means "the user did not touch it", so the
config validator can tell an explicit setting apart and warn (or map it to the new
key).
"""

from __future__ import annotations

import logging

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
    error: bool | None = None,
) -> None:
    """Report that `old` is deprecated, pointing at `new` (or `help`) when given.

    :param old: what is deprecated (a config key, a function, an argument).
    :param new: what to use instead, if anything.
    :param help: free-text advice, used when there is no single replacement.
    :param error: True raises `CorralDeprecationError` (a `ValueError`) because the
        old form is no longer supported; False or None only logs a warning.
    """
    msg = f"`{old}` has been deprecated."
    if new:
        msg += f" Use `{new}` instead."
    if help:
        msg += f" {help}"
    if error:
        raise CorralDeprecationError(msg)
    logger.warning("DeprecationWarning: %s This will raise an error in the future!", msg)
