"""`torch_compile_learner`: the learner's loss computations through `torch.compile`.

For the length of an update the learner puts a compiled version of a policy's loss
methods on the policy object (instance attributes, removed afterwards, so the policy
pickles, copies and computes TD errors outside updates as it always did): `loss` for a
policy the learner steps itself, and for a `learn_step` policy the methods it names in
`compiled_loss_methods` (pure tensor functions: no optimiser steps inside, so a failed
compilation can be redone eagerly on the same minibatch). Backward, the finite checks,
gradient clipping and the optimiser step stay eager.

Compiled code is kept per policy object and method across updates. dynamo compiles
each new input shape once; when a shape changes (a last minibatch or an update of
another size) it recompiles once with that dimension dynamic (`torch.compile`'s
`dynamic=None`), so the number of compilations stays small. dynamo keeps its
compiled variants per code object (`torch._dynamo.config.recompile_limit`, 8 by
default): many policies of one class in one process (a large multi-agent league)
each need a variant, and those past the limit run eagerly (torch warns).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

logger = logging.getLogger("corral.core.learner")

__all__ = ["CompiledMethod", "LossCompiler"]


class CompiledMethod:
    """A policy method run through `torch.compile`, eagerly once compiling has failed.

    Args:
        method: the bound method.
        label: `Class.method`, for the warning.
        backend: `torch.compile`'s backend.
        mode: `torch.compile`'s mode (None: default).
    """

    def __init__(self, method: Callable[..., Any], label: str, backend: str, mode: str | None):
        import torch

        self.eager = method
        self.label = label
        self.backend = backend
        self.mode = mode
        self.failed: BaseException | None = None
        self.compiled = torch.compile(method, backend=backend, mode=mode, dynamic=None)

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.failed is not None:
            return self.eager(*args, **kwargs)
        try:
            return self.compiled(*args, **kwargs)
        except Exception as err:  # noqa: BLE001 - any failure of the compiler stack
            self.failed = err
            logger.warning(
                "torch_compile_learner: torch.compile(backend=%r, mode=%r) of %s failed "
                "(%s: %s); it runs eagerly from now on. Set "
                "`torch_compile_learner: False`, or another "
                "`torch_compile_learner_dynamo_backend` (e.g. 'aot_eager').",
                self.backend,
                self.mode,
                self.label,
                *_cause_of(err),
            )
            # The methods compiled are pure loss computations: running the same
            # minibatch again eagerly changes nothing twice.
            return self.eager(*args, **kwargs)


def _cause_of(err: BaseException) -> tuple[str, str]:
    """(type name, first line of the message) of the innermost cause of `err` (dynamo
    wraps a backend's error in `BackendCompilerFailed`)."""
    root = err
    for _ in range(10):
        inner = getattr(root, "inner_exception", None) or root.__cause__
        if not isinstance(inner, BaseException) or inner is root:
            break
        root = inner
    lines = [line for line in str(root).splitlines() if line.strip()]
    return type(root).__name__, lines[0].strip() if lines else ""


class LossCompiler:
    """Per policy object, the compiled versions of its loss methods (see the module doc).

    Args:
        backend: `torch_compile_learner_dynamo_backend`.
        mode: `torch_compile_learner_dynamo_mode` (None or "default": torch's default).
    """

    def __init__(self, backend: str = "inductor", mode: str | None = None) -> None:
        self.backend = backend
        self.mode = None if mode in (None, "default") else mode
        # id(policy) -> (policy, {method name: CompiledMethod}); the policy is kept
        # so that its id is not reused while the entry lives.
        self._compiled: dict[int, tuple[Any, dict[str, CompiledMethod]]] = {}

    @staticmethod
    def method_names(policy: Any) -> tuple[str, ...]:
        """The methods to compile: `loss` unless the policy has a `learn_step`, else
        those its `compiled_loss_methods` names (none without it)."""
        if getattr(policy, "learn_step", None) is None:
            return ("loss",)
        return tuple(getattr(policy, "compiled_loss_methods", ()))

    def methods_of(self, policy: Any) -> dict[str, CompiledMethod]:
        """The policy's compiled methods (compiled lazily, on their first call)."""
        entry = self._compiled.get(id(policy))
        if entry is None or entry[0] is not policy:
            cls = type(policy).__name__
            methods = {
                name: CompiledMethod(
                    getattr(policy, name), f"{cls}.{name}", self.backend, self.mode
                )
                for name in self.method_names(policy)
                if callable(getattr(policy, name, None))
            }
            entry = self._compiled[id(policy)] = (policy, methods)
        return entry[1]

    def forget(self, policy: Any) -> None:
        """Drops the compiled code of `policy` (removed or spilled)."""
        self._compiled.pop(id(policy), None)

    @contextmanager
    def compiled(self, policy: Any) -> Iterator[None]:
        """Within the block, the policy's loss methods are the compiled ones."""
        methods = self.methods_of(policy)
        attrs = vars(policy)
        saved = {name: attrs[name] for name in methods if name in attrs}
        attrs.update(methods)
        try:
            yield
        finally:
            for name in methods:
                if name in saved:
                    attrs[name] = saved[name]
                else:
                    attrs.pop(name, None)
