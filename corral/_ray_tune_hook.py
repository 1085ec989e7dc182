"""Lets Ray Tune take corral Trainer classes, without importing Ray.

Every Ray Tune entry point (`tune.run`, `Tuner`, `Experiment`) resolves a trainable class
through `ray.tune.registry.register_trainable`, which accepts only subclasses of Ray's
`Trainable`. `import corral` puts a finder on `sys.meta_path` that does nothing until
`ray.tune.registry` is imported; then it wraps that module's `register_trainable` so that a
corral class is replaced by its adapter (`corral.tune.ray_adapter.as_ray_trainable`), and
every other trainable is passed through untouched. This module is small on purpose:
`import corral` loads it.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import sys
from typing import Any

_REGISTRY_MODULE = "ray.tune.registry"
# Modules that bind `register_trainable` with `from ray.tune.registry import ...`.
_BINDERS = ("ray.tune", "ray.tune.experiment.experiment")


def _is_corral_trainable(obj: Any) -> bool:
    module = sys.modules.get("corral.tune.trainable")
    return module is not None and isinstance(obj, type) and issubclass(obj, module.Trainable)


def _patch_registry(registry: Any) -> None:
    """Makes `registry.register_trainable` accept corral classes (once)."""
    original = registry.register_trainable
    if getattr(original, "_corral_patched", False):
        return

    @functools.wraps(original)
    def register_trainable(name: str, trainable: Any, *args: Any, **kwargs: Any) -> Any:
        if _is_corral_trainable(trainable):
            from corral.tune.ray_adapter import as_ray_trainable

            trainable = as_ray_trainable(trainable)
        return original(name, trainable, *args, **kwargs)

    register_trainable._corral_patched = True  # type: ignore[attr-defined]
    registry.register_trainable = register_trainable
    for name in _BINDERS:
        module = sys.modules.get(name)
        if module is not None and getattr(module, "register_trainable", None) is original:
            setattr(module, "register_trainable", register_trainable)  # noqa: B010


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, loader: Any) -> None:
        self._loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module: Any) -> None:
        self._loader.exec_module(module)
        _patch_registry(module)


class _RayTuneRegistryFinder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: wraps the loader of `ray.tune.registry` only."""

    def find_spec(self, fullname: str, path: Any, target: Any = None) -> Any:
        if fullname != _REGISTRY_MODULE:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None:
                if spec.loader is not None:
                    spec.loader = _PatchingLoader(spec.loader)
                return spec
        return None


def install_hook() -> None:
    """Lets Ray Tune take corral classes; patches now if Ray Tune is already imported."""
    registry = sys.modules.get(_REGISTRY_MODULE)
    if registry is not None:
        _patch_registry(registry)
        return
    if not any(isinstance(f, _RayTuneRegistryFinder) for f in sys.meta_path):
        sys.meta_path.insert(0, _RayTuneRegistryFinder())
