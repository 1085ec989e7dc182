"""corral's utilities; RLlib 1.13's ``ray.rllib.utils`` names.

The few helpers RLlib defines in ``ray/rllib/utils/__init__.py`` are here; its re-exports
(``override``, ``try_import_torch``, ``check``, the schedules, ...) are served lazily by
the surface table (``corral/_surface.py``) from their modules, so importing this package
stays cheap.
"""

# No `from __future__ import annotations` here: it would bind the name `annotations` in
# this package, hiding the `corral.utils.annotations` module from `from corral.utils import
# annotations`.
import contextlib
import copy
from collections.abc import Mapping
from functools import partial
from typing import Any

__all__ = [
    "NullContextManager",
    "add_mixins",
    "check_env",
    "force_list",
    "force_tuple",
    "merge_dicts",
    "partial",
]


def add_mixins(base: type, mixins: Any, reversed: bool = False) -> type:  # noqa: A002
    """A new class: `base` with `mixins` applied, the first mixin taking priority (with
    ``reversed``, `base` takes priority)."""
    mixins = list(mixins or [])
    while mixins:
        mixin = mixins.pop()
        bases = (base, mixin) if reversed else (mixin, base)
        base = type(base.__name__, bases, {})
    return base


def force_list(elements: Any = None, to_tuple: bool = False) -> list | tuple:
    """`elements` as a list (or tuple): None -> empty, a list/set/tuple -> its items, any
    other object -> a one-item list."""
    ctor = tuple if to_tuple else list
    if elements is None:
        return ctor()
    if type(elements) in (list, set, tuple):
        return ctor(elements)
    return ctor([elements])


force_tuple = partial(force_list, to_tuple=True)


def check_env(env: Any) -> None:
    """RLlib 1.13's standalone env check; see `corral.utils.pre_checks.env.check_env`."""
    from corral.utils.pre_checks.env import check_env as check

    check(env)


def merge_dicts(d1: Mapping, d2: Mapping) -> dict:
    """A deep copy of `d1` deep-updated with `d2` (new keys allowed at every level).

    corral's one recursive merge is `deep_update` (`corral.agents.config_merge`, also
    importable from `corral.agents.config` and `corral.utils`); this is its copying form,
    for configs, overrides and experiment specs (the command line's too).
    """
    from corral.agents.config_merge import deep_update

    merged = copy.deepcopy(dict(d1))
    deep_update(merged, d2, True, [])
    return merged


class NullContextManager(contextlib.AbstractContextManager):
    """A context manager that does nothing."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, *args: Any) -> None:
        return None
