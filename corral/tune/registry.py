"""A process-wide registry of named env creators and trainables.

RLlib 1.x looks env names up here before trying Gymnasium ids or class paths
(``_global_registry.contains(ENV_CREATOR, name)``), so ``register_env`` must be
the one place both user code and the Trainer consult. Unlike Ray's, this
registry is a plain in-process dict: no object store, nothing pickled.
Worker processes started with ``spawn`` do not inherit registrations made
after import; code that starts them ships the creator itself.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable
from typing import Any

from corral.tune.function_trainable import wrap_function
from corral.tune.trainable import Trainable

ENV_CREATOR = "env_creator"
TRAINABLE_CLASS = "trainable_class"
RLLIB_MODEL = "rllib_model"
RLLIB_PREPROCESSOR = "rllib_preprocessor"
RLLIB_ACTION_DIST = "rllib_action_dist"
RLLIB_INPUT = "rllib_input"
TEST = "__test__"

KNOWN_CATEGORIES = (
    ENV_CREATOR,
    TRAINABLE_CLASS,
    RLLIB_MODEL,
    RLLIB_PREPROCESSOR,
    RLLIB_ACTION_DIST,
    RLLIB_INPUT,
    TEST,
)


class Registry:
    """Values stored by ``(category, name)``; categories are Ray's constants above."""

    def __init__(self) -> None:
        self._values: dict[tuple[str, str], Any] = {}

    def register(self, category: str, name: str, value: Any) -> None:
        """Store ``value`` under ``name``; a later registration of the same name replaces it."""
        _check_category(category)
        _check_name(name)
        self._values[(category, name)] = value

    def contains(self, category: str, name: str) -> bool:
        """Whether ``name`` was registered in ``category``."""
        _check_category(category)
        return (category, name) in self._values

    def get(self, category: str, name: str) -> Any:
        """The value registered under ``name``; ``ValueError`` with close names if absent."""
        _check_category(category)
        try:
            return self._values[(category, name)]
        except KeyError:
            known = self.names(category)
            close = difflib.get_close_matches(str(name), known, n=3)
            hint = f" Did you mean {close}?" if close else ""
            raise ValueError(
                f"No {category!r} registered under {name!r}; registered: {known}.{hint}"
            ) from None

    def names(self, category: str) -> list[str]:
        """The names registered in ``category``, sorted."""
        _check_category(category)
        return sorted(name for cat, name in self._values if cat == category)


def _check_category(category: str) -> None:
    if category not in KNOWN_CATEGORIES:
        raise ValueError(
            f"Unknown registry category {category!r}; expected one of {KNOWN_CATEGORIES}"
        )


def _check_name(name: object) -> None:
    if not isinstance(name, str):
        raise TypeError(f"A registered name must be a str, got {type(name).__name__}: {name!r}")


def _check_callable(what: str, value: object) -> None:
    if not callable(value):
        raise TypeError(f"{what} must be callable, got {type(value).__name__}: {value!r}")


global_registry = Registry()
# Ray's spelling, so ported code that imports it keeps working.
_global_registry = global_registry


def register_env(name: str, env_creator: Callable[[Any], Any]) -> None:
    """Make ``name`` usable as ``config["env"]``.

    Args:
        name: the id trainers are given, e.g. ``"my_env"``.
        env_creator: called with an ``EnvContext`` (a dict of ``env_config``
            plus worker/vector indices) and returns the env.
    """
    _check_name(name)
    _check_callable("env_creator", env_creator)
    global_registry.register(ENV_CREATOR, name, env_creator)


def register_trainable(name: str, trainable: type) -> None:
    """Make ``name`` usable in ``tune.run(name)``.

    Args:
        name: the name to run it by.
        trainable: a subclass of ``corral.tune.Trainable`` (e.g. a Trainer), or a
            function trainable ``train_fn(config)`` (see ``corral.tune.function_trainable``).
    """
    _check_name(name)
    if not isinstance(trainable, type) and callable(trainable):
        trainable = wrap_function(trainable)
    if not (isinstance(trainable, type) and issubclass(trainable, Trainable)):
        raise TypeError(
            "trainable must be a subclass of corral.tune.Trainable or a function, "
            f"got {trainable!r}"
        )
    global_registry.register(TRAINABLE_CLASS, name, trainable)


def get_trainable_cls(name: str) -> type[Trainable]:
    """The trainable class ``tune.run(name)`` runs: one given to ``register_trainable``,
    else the built-in algorithm of that name (``"PPO"`` -> ``PPOTrainer``), as in Ray
    Tune 1.13 (where RLlib registers its algorithms).

    Raises:
        ValueError: no trainable of that name (naming the registered ones).
    """
    _check_name(name)
    if global_registry.contains(TRAINABLE_CLASS, name):
        return global_registry.get(TRAINABLE_CLASS, name)
    from corral.tune.tune import _algorithm_class

    return _algorithm_class(name)


def register_input(name: str, input_creator: Callable[[Any], Any]) -> None:
    """Make ``name`` usable as ``config["input"]`` (and as a source of a mixed input).

    Args:
        name: the name to give as ``input``, e.g. ``"my_input"``.
        input_creator: called with the rollout worker's ``corral.offline.IOContext``;
            returns the ``InputReader`` (an object with ``next()``) the worker samples from.
    """
    _check_name(name)
    _check_callable("input_creator", input_creator)
    global_registry.register(RLLIB_INPUT, name, input_creator)


def registry_contains_input(name: str) -> bool:
    """Whether ``register_input`` registered an input under ``name`` (Ray Tune 1.13's)."""
    return global_registry.contains(RLLIB_INPUT, name)


def registry_get_input(name: str) -> Callable[[Any], Any]:
    """The input creator ``register_input`` registered under ``name`` (Ray Tune 1.13's).

    Raises:
        ValueError: nothing is registered under ``name`` (the message lists what is).
    """
    return global_registry.get(RLLIB_INPUT, name)


# corral's own named envs: name -> "module:Class" (imported when an env is made; a user's
# `register_env` of the same name replaces it).
BUILTIN_ENVS: dict[str, str] = {
    "Navigation2D": "corral.env.navigation_2d:Navigation2DEnv",
    "CartPoleWithReward": "corral.env.mbmpo_env:CartPoleWrapper",
    "PendulumWithReward": "corral.env.mbmpo_env:PendulumWrapper",
}


def _builtin_env_creator(path: str) -> Callable[[Any], Any]:
    def create(env_context: Any) -> Any:
        module, _, name = path.partition(":")
        return getattr(importlib.import_module(module), name)(env_context)

    return create


for _name, _path in BUILTIN_ENVS.items():
    register_env(_name, _builtin_env_creator(_path))
