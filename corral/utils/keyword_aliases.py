"""`keyword_aliases`: a second keyword name for a parameter (RLlib 1.13's, where corral's
parameter has another name).

Positional calls are unchanged; a call may name the parameter either way (not both).
`inspect.signature` shows each alias as a keyword-only parameter, so documentation and
signature checks see both names.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, TypeVar, cast

_F = TypeVar("_F", bound=Callable[..., Any])


class _SameAs:
    """The shown default of an alias: "what its parameter defaults to"."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<as {self.name}>"


def keyword_aliases(**aliases: str) -> Callable[[_F], _F]:
    """Lets callers pass parameter `name` as keyword `alias`, for each `alias=name`.

    Example: `@keyword_aliases(frame="observation")` on `def observation(self,
    observation)` accepts `observation(x)`, `observation(observation=x)` and
    `observation(frame=x)`.

    Raises:
        TypeError: at decoration, an alias names no parameter of the function or is one
            already; at a call, both names of one parameter are given.
    """

    def decorate(fn: _F) -> _F:
        signature = inspect.signature(fn)
        params = list(signature.parameters.values())
        for alias, name in aliases.items():
            if name not in signature.parameters or alias in signature.parameters:
                raise TypeError(
                    f"keyword_aliases({alias}={name!r}) on {fn.__qualname__}{signature}: "
                    f"{name!r} must be a parameter and {alias!r} must not."
                )
        # The aliases, keyword-only, before a `**kwargs` (a signature's last parameter).
        at = len(params) - (params and params[-1].kind is inspect.Parameter.VAR_KEYWORD)
        shown = [
            inspect.Parameter(alias, inspect.Parameter.KEYWORD_ONLY, default=_SameAs(name))
            for alias, name in aliases.items()
        ]
        items = tuple(aliases.items())

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if kwargs:
                for alias, name in items:
                    if alias in kwargs:
                        if name in kwargs:
                            raise TypeError(
                                f"{fn.__qualname__}() got both {name!r} and its other name "
                                f"{alias!r}: pass one."
                            )
                        kwargs[name] = kwargs.pop(alias)
            return fn(*args, **kwargs)

        wrapper.__signature__ = signature.replace(  # type: ignore[attr-defined]
            parameters=[*params[:at], *shown, *params[at:]]
        )
        return cast(_F, wrapper)

    return decorate


__all__ = ["keyword_aliases"]
