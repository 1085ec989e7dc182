"""torch's compiler (`torch._dynamo`) is imported when something compiles, not before.

torch guards four `Optimizer` methods (`add_param_group`, `zero_grad`, `state_dict` and
`load_state_dict`) with `torch._disable_dynamo`. On its first call, that wrapper imports
`torch._dynamo` (about 1 s of a 2-core CPU's time), makes a `torch._dynamo.disable` of the
method, keeps it on the method as `__dynamo_disable`, and calls it. So building the first
optimiser of a process costs the compiler's import, whether or not anything ever compiles.

While `torch._dynamo` is not imported, nothing can be compiling, and `disable(method)` is the
method itself. `defer_dynamo_import()` puts the plain method in those four caches. It also
puts a `sys.meta_path` finder first, which takes them out again as soon as anything starts
to import `torch._dynamo`: `torch.compile`, `torch_compile_learner`, `torch.export`, or a
user's own import. From then on torch's wrapper does what it always did, before any frame
can be compiled. The optimiser's arithmetic is the same either way. Only the compiler's
import moves, from the first optimiser to the first compile.

Only a wrapper that is torch's lazy `_disable_dynamo` (the wrapped method is in
`__wrapped__`, and the wrapper's code reads the `__dynamo_disable` cache) is touched. A torch
that guards these methods another way is left as it is, and pays its import as before.
"""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Callable, Sequence
from typing import Any

import torch

_DYNAMO = "torch._dynamo"
_CACHE = "__dynamo_disable"  # the attribute `torch._compile._disable_dynamo` caches in
_GUARDED = ("add_param_group", "zero_grad", "state_dict", "load_state_dict")

# The methods whose cache holds corral's plain call: (the method, that call).
_deferred: list[tuple[Callable[..., Any], Callable[..., Any]]] = []


class _DynamoImportFinder(importlib.abc.MetaPathFinder):
    """Finds nothing: when the import of `torch._dynamo` starts, gives torch back its own
    `disable` wrappers (the import then goes on to the next finder)."""

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: Any = None) -> None:
        if fullname == _DYNAMO and _deferred:
            _restore()
        return None


_FINDER = _DynamoImportFinder()


def defer_dynamo_import() -> None:
    """Lets torch's optimisers run without importing `torch._dynamo` until something
    compiles (see the module's docstring). Idempotent; a no-op once `torch._dynamo` is
    imported."""
    if _DYNAMO in sys.modules or _deferred:
        return
    for name in _GUARDED:
        wrapper = getattr(torch.optim.Optimizer, name, None)
        method = getattr(wrapper, "__wrapped__", None)
        code = getattr(wrapper, "__code__", None)
        if wrapper is None or method is None or code is None or _CACHE not in code.co_consts:
            continue  # not torch's lazy `_disable_dynamo` wrapper
        if getattr(method, _CACHE, None) is not None:
            continue  # torch has made its `disable` already
        call = _plain_call(wrapper, method)
        setattr(method, _CACHE, call)
        _deferred.append((method, call))
    if _deferred and _FINDER not in sys.meta_path:
        sys.meta_path.insert(0, _FINDER)


def _plain_call(wrapper: Callable[..., Any], method: Callable[..., Any]) -> Callable[..., Any]:
    def call(*args: Any, **kwargs: Any) -> Any:
        if _DYNAMO in sys.modules:  # imported past the finder (e.g. put in sys.modules)
            _restore()
            return wrapper(*args, **kwargs)
        return method(*args, **kwargs)

    return call


def _restore() -> None:
    """Takes corral's plain calls out of torch's caches: torch's wrappers then make their
    `torch._dynamo.disable` on their next call, as they would have on their first. The
    finder stays on `sys.meta_path` (removing it while the import system walks that list
    would skip the finder after it) and does nothing from now on."""
    while _deferred:
        method, call = _deferred.pop()
        if vars(method).get(_CACHE) is call:
            delattr(method, _CACHE)
