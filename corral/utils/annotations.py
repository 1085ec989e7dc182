"""RLlib 1.13's API annotations: ``override`` checks, the others only document.

``@override(Parent)`` raises ``NameError`` at class-definition time when ``Parent`` has no
attribute of the method's name, which catches typos in overriding method names.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from corral.utils import numpy_compat
from corral.utils.deprecation import Deprecated

# RLlib 1.x code imports this module first: give it the NumPy 1.x names it may use.
numpy_compat.install()

__all__ = [
    "Deprecated",
    "DeveloperAPI",
    "ExperimentalAPI",
    "OverrideToImplementCustomLogic",
    "OverrideToImplementCustomLogic_CallToSuperRecommended",
    "PublicAPI",
    "override",
]

_T = TypeVar("_T")


def override(cls: type) -> Callable[[_T], _T]:
    """Decorator: the method overrides one of ``cls`` (checked when the class is defined).

    Args:
        cls: the superclass that provides the overridden method.

    Raises:
        NameError: ``cls`` has no attribute of the decorated method's name. (Not checked
            against corral's stand-ins of TensorFlow-only classes, which have no methods
            to look at: a module defining a TF and a torch model side by side imports.)
    """
    from corral._surface import is_stand_in

    if is_stand_in(cls):
        return lambda method: method

    def check_override(method: _T) -> _T:
        name = getattr(method, "__name__", None)
        if name is None:
            # classmethod/staticmethod/property objects: the function underneath is named.
            inner = getattr(method, "__func__", None) or getattr(method, "fget", None)
            name = getattr(inner, "__name__", None)
        if name not in dir(cls):
            raise NameError(f"{method} does not override any method of {cls}")
        return method

    return check_override


def PublicAPI(obj: _T) -> _T:  # noqa: N802 (RLlib's name)
    """Documents a public API (stable across releases); returns ``obj`` unchanged."""
    return obj


def DeveloperAPI(obj: _T) -> _T:  # noqa: N802
    """Documents an API for building custom algorithms; returns ``obj`` unchanged."""
    return obj


def ExperimentalAPI(obj: _T) -> _T:  # noqa: N802
    """Documents an API that may still change; returns ``obj`` unchanged."""
    return obj


def OverrideToImplementCustomLogic(obj: _T) -> _T:  # noqa: N802
    """Documents a method users override (without calling super) for custom logic."""
    return obj


def OverrideToImplementCustomLogic_CallToSuperRecommended(obj: _T) -> _T:  # noqa: N802
    """Documents a method users override, best calling the superclass' method too."""
    return obj
