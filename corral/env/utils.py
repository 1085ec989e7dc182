"""Turning the user's `env` setting into a function that builds envs.

`env` may be a name given to `register_env`, a Gymnasium id, a dotted class
path, or an env class; all of them end up as `creator(env_context) -> env`.
"""

from __future__ import annotations

import difflib
import importlib
from collections.abc import Callable
from typing import Any

from corral.env.env_context import EnvContext
from corral.utils.error import EnvError

EnvCreator = Callable[[EnvContext], Any]


def env_id_of(env: Any) -> str | None:
    """A short name for an env specification (used in logdir names)."""
    if env is None or isinstance(env, str):
        return env
    if isinstance(env, type):
        return env.__name__
    raise ValueError(
        f"{env!r} is an invalid env specification: expected a registered env name, a "
        "Gymnasium id, a dotted class path ('pkg.module.EnvClass') or an env class."
    )


def make_env_creator(env: Any) -> EnvCreator:
    """Returns a creator for `env`; raises `EnvError` for unknown ids at once."""
    from corral.tune.registry import ENV_CREATOR, _global_registry

    if env is None:
        return lambda ctx: None
    if isinstance(env, type):
        return lambda ctx: env(ctx)
    env_id_of(env)
    if _global_registry.contains(ENV_CREATOR, env):
        return _global_registry.get(ENV_CREATOR, env)
    if "." in env and "/" not in env and ":" not in env:
        cls = _import_class(env)
        return lambda ctx: cls(ctx)
    _check_gym_id(env)
    return lambda ctx: _make_gym_env(env, ctx)


def _import_class(path: str) -> type:
    module_name, _, name = path.rpartition(".")
    try:
        module = importlib.import_module(module_name)
        return getattr(module, name)
    except (ImportError, AttributeError) as e:
        raise EnvError(
            f"Env '{path}' looks like a class path, but it cannot be imported: {e}"
        ) from e


def _check_gym_id(env_id: str) -> None:
    import gymnasium as gym

    if ":" in env_id:  # "module:EnvId" imports the module that registers it.
        return
    if env_id in gym.registry:
        return
    registered = _registered_names()
    close = difflib.get_close_matches(env_id, list(gym.registry) + registered, n=3)
    hint = f" Did you mean: {', '.join(repr(c) for c in close)}?" if close else ""
    raise EnvError(
        f"Unknown env '{env_id}': it is not registered with corral's `register_env`, not a "
        f"Gymnasium id, and not a dotted class path.{hint}"
    )


def _registered_names() -> list[str]:
    from corral.tune.registry import ENV_CREATOR, _global_registry

    return list(_global_registry.names(ENV_CREATOR))


def _make_gym_env(env_id: str, ctx: EnvContext) -> Any:
    import gymnasium as gym

    # RLlib passed the env_config to gym.make as keyword arguments.
    return gym.make(env_id, **dict(ctx))
