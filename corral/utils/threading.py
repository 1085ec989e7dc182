"""RLlib's ``with_lock``: serialise an object's methods on its ``self._lock``."""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

__all__ = ["with_lock"]


def with_lock(func: Callable) -> Callable:
    """Decorator: runs the method holding ``self._lock`` (a ``threading.(R)Lock`` the
    object creates in its constructor).

    Raises:
        AttributeError: the object has no ``_lock``.
    """

    @functools.wraps(func)
    def wrapper(self: Any, *args: Any, **kwargs: Any) -> Any:
        lock = getattr(self, "_lock", None)
        if lock is None:
            raise AttributeError(
                f"Object {self} must have a `self._lock` property (assigned to a "
                "threading.RLock() object in its constructor)!"
            )
        with lock:
            return func(self, *args, **kwargs)

    return wrapper
