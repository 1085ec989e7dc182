"""RLlib 1.13's public surface in corral: the one table of what corral builds and what not.

Every ``ray.rllib.X`` module of RLlib 1.13 exists as ``corral.X`` with every public name it
had (``ray.rllib.X.Y`` -> ``corral.X.Y``, the porting rule of the project's API contract).
This module is the single source of truth for those names:

- :data:`_SNAPSHOT` (``snapshot.py``): RLlib 1.13's module list with each module's public
  names (a compact copy of the reference list, so the surface exists in any checkout);
- :data:`NOT_BUILT` (``not_built.py``, the one registry of what is not built, with the
  config settings of :data:`NOT_BUILT_SETTINGS`): the algorithms and features corral does
  not build; their names import and raise :class:`NotBuiltError` (a
  ``NotImplementedError``) naming them on use. The README's list, docs/not-built.md and
  ``corral.agents.registry``'s "not built yet" answers are read from here;
- :data:`_NOT_PROVIDED` (``names.py``, as the next two): single RLlib names of modules
  corral builds that corral leaves out (mostly RLlib's function-built policy pieces, where
  corral's policies are classes);
- TensorFlow/JAX-only names (``*TFPolicy``, ``TFModelV2``, ``models.tf.*``, ``tf_utils``,
  ``*_tf_*`` modules) are recognised by rule; they import without TensorFlow and raise
  :class:`TensorFlowOnlyError` (an ``ImportError`` and a ``NotImplementedError``) naming the
  torch counterpart on use;
- :data:`_ALIASES`: names corral builds under another path (re-exported lazily).

Every other listed name is real corral code in the module of the same path, or, for a
package, in the deepest listed submodule that defines it (RLlib's packages re-export
their submodules' names; corral serves those re-exports lazily).

The mechanism: :func:`install` (called by ``corral/__init__.py``) puts one finder on
``sys.meta_path``. Only ``corral.*`` module names of the table are looked at. A module with
a file is loaded as always, then given a module ``__getattr__`` that serves the names it
does not define itself from this table (a real definition always wins). A module with no
file is created empty (a package) with the same ``__getattr__``. Nothing here imports
torch; the table is parsed on the first lookup.

"Use" of a stand-in is calling it or instantiating it (also through a subclass: user code
may subclass ``TFModelV2`` at import time), indexing it, or reading an attribute of it.
Class factories of TF policies (``build_tf_policy(...)``, ``SomeTFPolicy.with_updates(...)``)
return another stand-in class, so a module defining a TF and a torch policy side by side
still imports; instantiating that class raises.
"""

from __future__ import annotations

import importlib
import importlib.machinery
import re
import sys
from typing import Any

from corral._surface.names import (
    _ALIASES,
    _NOT_PROVIDED,
    _TF_CLASS_FACTORIES,
    _TF_CLASS_FACTORY_METHODS,
    _TF_COUNTERPARTS,
    _TF_NAMES,
)
from corral._surface.not_built import (
    NOT_BUILT,
    NOT_BUILT_SETTINGS,
    Feature,
    Setting,
    markdown_not_built,
    markdown_not_built_settings,
    not_built_algorithms,
)
from corral._surface.snapshot import _SNAPSHOT

__all__ = [
    "NOT_BUILT",
    "NOT_BUILT_SETTINGS",
    "Feature",
    "NotBuiltError",
    "Setting",
    "TensorFlowOnlyError",
    "Verdict",
    "classify",
    "install",
    "is_stand_in",
    "markdown_not_built",
    "markdown_not_built_settings",
    "not_built_algorithms",
    "surface",
]


class NotBuiltError(NotImplementedError):
    """Raised on use of an RLlib name whose feature corral does not build (yet)."""


class TensorFlowOnlyError(ImportError, NotImplementedError):
    """Raised on use of a TensorFlow- or JAX-only RLlib name; corral runs on PyTorch."""


# --------------------------------------------------------------------------------------
# Classification
# --------------------------------------------------------------------------------------


class Verdict:
    """What an RLlib name is in corral.

    Attributes:
        kind: "real" (corral code), "tf" (TensorFlow/JAX-only stand-in), "unbuilt" (a
            feature corral does not build) or "missing" (an RLlib helper corral leaves out).
        module: the module the name finally resolves to: relative to ``corral`` for corral
            modules (``""`` is ``corral`` itself), absolute otherwise (e.g. ``"torch.nn"``).
        name: the attribute there; ``""`` means the module itself.
        detail: the feature name, the torch counterpart, the reason or the provider.
    """

    __slots__ = ("detail", "kind", "module", "name")

    def __init__(self, kind: str, module: str, name: str, detail: str = "") -> None:
        self.kind = kind
        self.module = module
        self.name = name
        self.detail = detail

    @property
    def is_stand_in(self) -> bool:
        """Whether corral serves a stand-in for this name (anything but "real")."""
        return self.kind != "real"

    @property
    def rllib_path(self) -> str:
        """RLlib's dotted path of the final name (``ray.rllib.X.Y``)."""
        return _rllib_path(self.module, self.name)

    def __repr__(self) -> str:
        return f"Verdict({self.kind!r}, {self.module!r}, {self.name!r}, {self.detail!r})"


def _rllib_path(module: str, name: str) -> str:
    if module == "tune" or module.startswith("tune."):
        base = f"ray.{module}"  # Ray Tune's (`corral.tune` is `ray.tune`)
    else:
        base = "ray.rllib" + (f".{module}" if module else "")
    return f"{base}.{name}" if name else base


def _corral_path(module: str, name: str = "") -> str:
    base = "corral" + (f".{module}" if module else "")
    return f"{base}.{name}" if name else base


_surface_cache: dict[str, tuple[str, ...]] | None = None
_modules_cache: frozenset[str] | None = None
_name_rules: dict[str, tuple[str, str]] | None = None
_defining: dict[str, list[str]] | None = None


def surface() -> dict[str, tuple[str, ...]]:
    """RLlib 1.13's modules (relative to ``ray.rllib``; ``""`` is the root) -> public names."""
    global _surface_cache
    if _surface_cache is None:
        table: dict[str, list[str]] = {}
        current: list[str] = []
        for line in _SNAPSHOT.splitlines():
            if not line.strip():
                continue
            if line[0].isspace():
                current.extend(n.strip() for n in line.split(",") if n.strip())
                continue
            module, _, names = line.partition(":")
            module = "" if module == "." else module
            current = table.setdefault(module, [])
            current.extend(n.strip() for n in names.split(",") if n.strip())
        _surface_cache = {m: tuple(ns) for m, ns in table.items()}
    return _surface_cache


def _modules() -> frozenset[str]:
    """Every module of the table and every package above one (they must exist too)."""
    global _modules_cache
    if _modules_cache is None:
        found: set[str] = set()
        for module in surface():
            parts = module.split(".") if module else []
            for i in range(1, len(parts) + 1):
                found.add(".".join(parts[:i]))
        _modules_cache = frozenset(found)
    return _modules_cache


def _rules() -> dict[str, tuple[str, str]]:
    """``"module:Name"`` -> (kind, detail) for the names listed one by one."""
    global _name_rules
    if _name_rules is None:
        rules: dict[str, tuple[str, str]] = {}
        for module, (reason, names) in _NOT_PROVIDED.items():
            for name in names.split():
                rules[f"{module}:{name}"] = ("missing", reason)
        for feature in NOT_BUILT:
            for key in feature.names:
                rules[key] = ("unbuilt", feature.name)
        for key in _TF_NAMES:
            rules[key] = ("tf", "")
        _name_rules = rules
    return _name_rules


def _feature_of(module: str) -> Feature | None:
    best: tuple[int, Feature | None] = (-1, None)
    for feature in NOT_BUILT:
        for prefix in feature.modules:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best[0]:
                best = (len(prefix), feature)
    return best[1]


_TF_NAME = re.compile(r"TF(?![a-z])|^Keras_|^JAX")


def _is_tf(module: str, name: str) -> bool:
    parts = module.split(".")
    if "tf" in parts or "jax" in parts:
        return True
    if "tf" in parts[-1].split("_"):
        return True
    return bool(_TF_NAME.search(name))


def _defining_module(module: str, name: str) -> str | None:
    """The deepest module below `module` that lists `name` (RLlib's re-export source)."""
    global _defining
    if _defining is None:
        index: dict[str, list[str]] = {}
        for mod, names in surface().items():
            for n in names:
                index.setdefault(n, []).append(mod)
        _defining = index
    leaf = module.rsplit(".", 1)[-1]

    def rank(candidate: str) -> tuple[int, bool, bool]:
        # Deepest first; among equals, a module corral builds, then the package's namesake
        # (`agents.ppo.DEFAULT_CONFIG` is PPO's, from `agents.ppo.ppo`, not APPO's).
        return (
            candidate.count("."),
            _feature_of(candidate) is None,
            candidate.rsplit(".", 1)[-1] == leaf,
        )

    below = [c for c in _defining.get(name, ()) if (c.startswith(module + ".") if module else c)]
    return max(below, key=rank) if below else None


def _counterpart(module: str, name: str) -> str:
    """The corral (torch) name to use instead of a TF/JAX-only RLlib name."""
    explicit = _TF_COUNTERPARTS.get(f"{module}:{name}") or _TF_COUNTERPARTS.get(module)
    if explicit:
        return explicit
    parts = ["torch" if p in ("tf", "jax") else p for p in module.split(".")]
    leaf = parts[-1].split("_")
    leaf = ["torch" if t in ("tf", "jax") else t for t in leaf]
    parts[-1] = "_".join(leaf)
    if parts[-1] in ("dynamic_torch_policy", "eager_torch_policy"):
        parts[-1] = "torch_policy"
    target = ".".join(parts)
    renamed = name.replace("TF", "Torch").replace("JAX", "Torch").removeprefix("Keras_")
    table = surface()
    if target in table:
        for candidate in (name, renamed, "Torch" + name):
            if candidate in table[target]:
                return _corral_path(target, candidate)
        return _corral_path(target)
    for candidate in (renamed, name):
        home = _defining_module(module.rsplit(".", 1)[0] if "." in module else "", candidate)
        if home is not None and not _is_tf(home, candidate):
            return _corral_path(home, candidate)
    return "corral's torch classes (framework='torch')"


def classify(module: str, name: str, _depth: int = 0) -> Verdict:
    """What RLlib 1.13's ``ray.rllib.<module>.<name>`` is in corral.

    Args:
        module: the module path relative to ``ray.rllib`` / ``corral`` (``""``: the root).
        name: a public name of that module.

    Returns:
        The :class:`Verdict`, following re-exports to the module that finally holds the name.
    """
    if _depth > 20:
        raise RecursionError(f"alias cycle at {module}:{name}")
    key = f"{module}:{name}"
    target = _ALIASES.get(key)
    if target is not None:
        tmodule, _, tname = target.partition(":")
        if tmodule == "corral" or tmodule.startswith("corral."):
            # Final: an alias names real corral code (no further table lookups).
            return Verdict("real", tmodule[7:], tname or name)
        return Verdict("real", tmodule, tname, "external")
    if name == "F" and not _is_tf(module, name):
        # RLlib's torch modules re-export `F = nn.functional`.
        return Verdict("real", "torch.nn.functional", "", "external")
    rule = _rules().get(key)
    if rule is not None:
        kind, detail = rule
        if kind == "tf":
            detail = _counterpart(module, name)
        return Verdict(kind, module, name, detail)
    feature = _feature_of(module)
    if feature is not None:
        return Verdict("unbuilt", module, name, feature.name)
    home = _defining_module(module, name)
    if home is not None:
        return classify(home, name, _depth + 1)
    if _is_tf(module, name):
        return Verdict("tf", module, name, _counterpart(module, name))
    return Verdict("real", module, name)


# --------------------------------------------------------------------------------------
# Stand-ins
# --------------------------------------------------------------------------------------

_stand_ins: dict[tuple[str, str], type] = {}


def _message(verdict: Verdict, used: str) -> str:
    path = verdict.rllib_path
    kind = verdict.kind
    if kind == "tf":
        return (
            f"{used}: `{path}` is TensorFlow/JAX-only and corral runs on PyTorch only; use "
            f"{verdict.detail} (framework='torch') instead."
        )
    if kind == "unbuilt":
        feature = next(f for f in NOT_BUILT if f.name == verdict.detail)
        return (
            f"{used}: `{path}` belongs to {feature.name} ({feature.what}), which corral does "
            "not build; the name exists only so that RLlib code importing it still imports."
        )
    return f"{used}: corral does not provide RLlib's `{path}`: {verdict.detail}."


def _error(verdict: Verdict, used: str) -> Exception:
    cls = TensorFlowOnlyError if verdict.kind == "tf" else NotBuiltError
    return cls(_message(verdict, used))


def _verdict_of(cls: type) -> tuple[Verdict, type]:
    for klass in cls.__mro__:
        verdict = klass.__dict__.get("_corral_stand_in")
        if verdict is not None:
            return verdict, klass
    raise TypeError(f"{cls!r} is no corral stand-in")


class _StandInMeta(type):
    """Metaclass of stand-ins: any use but subclassing and introspection raises."""

    def __getattr__(cls, attr: str) -> Any:
        if attr.startswith("_"):
            raise AttributeError(attr)
        verdict, base = _verdict_of(cls)
        if verdict.kind == "tf" and attr in _TF_CLASS_FACTORY_METHODS:
            return _tf_class_factory(verdict, cls.__name__)
        raise _error(verdict, f"{cls.__name__}.{attr}")

    def __getitem__(cls, key: Any) -> Any:
        raise _error(_verdict_of(cls)[0], f"{cls.__name__}[{key!r}]")

    def __iter__(cls) -> Any:
        raise _error(_verdict_of(cls)[0], f"iterating {cls.__name__}")

    def __contains__(cls, item: Any) -> bool:
        raise _error(_verdict_of(cls)[0], f"`in {cls.__name__}`")

    def __repr__(cls) -> str:
        verdict, base = _verdict_of(cls)
        what = {"tf": "TensorFlow-only", "unbuilt": "not built"}
        state = what.get(verdict.kind, "not provided")
        return f"<corral stand-in {cls.__name__} for {verdict.rllib_path}: {state}>"


def _stand_in_new(cls: type, *args: Any, **kwargs: Any) -> Any:
    verdict, base = _verdict_of(cls)
    if verdict.kind == "tf" and base.__dict__.get("_corral_factory"):
        return _tf_class_factory(verdict, base.__name__)(*args, **kwargs)
    used = cls.__name__ if cls is base else f"{cls.__name__} (a subclass of {base.__name__})"
    raise _error(verdict, f"{used}(...)")


def _make_stand_in(verdict: Verdict, name: str, factory: bool = False) -> type:
    namespace = {
        "_corral_stand_in": verdict,
        "_corral_factory": factory,
        "__new__": _stand_in_new,
        "__doc__": _message(verdict, name),
        "__module__": _corral_path(verdict.module) if verdict.kind != "real" else "corral",
    }
    return _StandInMeta(name, (), namespace)


def _tf_class_factory(verdict: Verdict, default_name: str) -> Any:
    """``build_tf_policy(name=...)`` / ``X.with_updates(name=...)``: a new stand-in class."""

    def factory(*args: Any, **kwargs: Any) -> type:
        name = kwargs.get("name") or (args[0] if args and isinstance(args[0], str) else None)
        return _make_stand_in(verdict, str(name or default_name))

    return factory


def _stand_in(verdict: Verdict) -> type:
    key = (verdict.module, verdict.name)
    cls = _stand_ins.get(key)
    if cls is None:
        factory = f"{verdict.module}:{verdict.name}" in _TF_CLASS_FACTORIES
        cls = _make_stand_in(verdict, verdict.name or verdict.module.rsplit(".", 1)[-1], factory)
        _stand_ins[key] = cls
    return cls


def is_stand_in(obj: Any) -> bool:
    """Whether `obj` is one of this module's stand-ins (or a class derived from one)."""
    return isinstance(obj, _StandInMeta)


def not_built_stand_in(module: str, name: str) -> type:
    """The stand-in of ``corral.<module>.<name>``, a name of a feature :data:`NOT_BUILT`
    lists by ``module`` (for modules outside RLlib's table, such as Ray Tune's
    ``tune.suggest.hyperopt``, which define their stand-ins with it).

    Raises:
        ValueError: no feature of :data:`NOT_BUILT` holds ``module``.
    """
    feature = _feature_of(module)
    if feature is None:
        raise ValueError(f"corral.{module} belongs to no feature of corral/_surface/not_built.py")
    return _stand_in(Verdict("unbuilt", module, name, feature.name))


def stand_in_verdict(obj: Any) -> Verdict:
    """The :class:`Verdict` a stand-in was made for."""
    return _verdict_of(obj)[0]


# --------------------------------------------------------------------------------------
# The import mechanism
# --------------------------------------------------------------------------------------


def resolve(module: str, name: str) -> Any:
    """The object corral serves for ``corral.<module>.<name>`` when the module lacks it."""
    verdict = classify(module, name)
    elsewhere = (verdict.module, verdict.name) != (module, name)
    if verdict.kind != "real":
        return _stand_in(verdict)
    if verdict.detail == "external":
        target = importlib.import_module(verdict.module)
        return getattr(target, verdict.name) if verdict.name else target
    if not elsewhere:
        raise AttributeError(
            f"module {_corral_path(module)!r} has no attribute {name!r} (RLlib 1.13's "
            f"`{_rllib_path(module, name)}`, which corral/_surface/snapshot.py lists)"
        )
    target = importlib.import_module(_corral_path(verdict.module))
    return getattr(target, verdict.name) if verdict.name else target


def _module_getattr(module_obj: Any, module: str, name: str) -> Any:
    # The table's names, and the names an alias adds to a module (what RLlib's module
    # imported and user code imports from it, e.g. `tf_action_dist.ActionDistribution`).
    known = name in surface().get(module, ()) or f"{module}:{name}" in _ALIASES
    if name.startswith("__") or not known:
        raise AttributeError(f"module {_corral_path(module)!r} has no attribute {name!r}")
    value = resolve(module, name)
    # Cache it: later lookups are plain attribute reads, and identity holds.
    setattr(module_obj, name, value)
    return value


def _attach(module_obj: Any, module: str) -> None:
    """Gives a corral module the table's names it lacks (its own names always win)."""
    own = module_obj.__dict__.get("__getattr__")

    def __getattr__(name: str) -> Any:
        if own is not None:
            try:
                return own(name)
            except AttributeError:
                pass
        return _module_getattr(module_obj, module, name)

    module_obj.__getattr__ = __getattr__
    if "__path__" not in module_obj.__dict__ and any(
        m.startswith(module + ".") for m in _modules()
    ):
        # A plain-module file where RLlib has a package: let its table submodules be made.
        module_obj.__path__ = []


def _module_dir(module: str) -> Any:
    def __dir__() -> list[str]:
        return sorted(surface().get(module, ()))

    return __dir__


class _TableLoader:
    """Creates a module that has no file: an empty package served from the table."""

    @staticmethod
    def create_module(spec: Any) -> None:
        return None

    @staticmethod
    def exec_module(module_obj: Any) -> None:
        module = module_obj.__name__[7:]
        names = surface().get(module, ())
        module_obj.__doc__ = (
            f"RLlib 1.13's `{_rllib_path(module, '')}` in corral: its names are served from "
            "corral/_surface/ (corral code where corral builds them, stand-ins otherwise)."
        )
        module_obj.__all__ = list(names)
        module_obj.__dir__ = _module_dir(module)
        _attach(module_obj, module)


class _Loader:
    """Wraps a real module's loader: loads as usual, then attaches the table's names."""

    def __init__(self, loader: Any, module: str) -> None:
        self._loader = loader
        self._module = module

    def __getattr__(self, attr: str) -> Any:
        return getattr(self._loader, attr)

    def create_module(self, spec: Any) -> Any:
        return self._loader.create_module(spec)

    def exec_module(self, module_obj: Any) -> None:
        self._loader.exec_module(module_obj)
        _attach(module_obj, self._module)


class SurfaceFinder:
    """The ``sys.meta_path`` finder for ``corral.*`` modules of the table."""

    @classmethod
    def find_spec(cls, fullname: str, path: Any = None, target: Any = None) -> Any:
        if not fullname.startswith("corral.") or fullname.startswith("corral._surface"):
            return None
        module = fullname[7:]
        if module not in _modules():
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None:
            return importlib.machinery.ModuleSpec(fullname, _TableLoader, is_package=True)
        if spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _Loader(spec.loader, module)
        return spec

    @classmethod
    def invalidate_caches(cls) -> None:
        return None


def install() -> None:
    """Puts :class:`SurfaceFinder` first on ``sys.meta_path`` (once), and serves the root's
    names (``corral.SampleBatch``...) through ``corral.__getattr__``."""
    if not any(f is SurfaceFinder for f in sys.meta_path):
        sys.meta_path.insert(0, SurfaceFinder)


def root_getattr(name: str) -> Any:
    """``corral.__getattr__``: RLlib's root names (``corral.SampleBatch``, ...), lazily."""
    root = sys.modules["corral"]
    return _module_getattr(root, "", name)
