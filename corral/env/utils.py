"""Turning the user's `env` setting into a function that builds envs.

`env` may be a name given to `register_env`, a Gymnasium id, a dotted class
path, or an env class; all of them end up as `creator(env_context) -> env`.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.util
import inspect
import os
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from corral.env.env_context import EnvContext
from corral.utils.error import EnvError

if TYPE_CHECKING:  # gymnasium is imported where an env is built (start-up time)
    import gymnasium as gym

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


def make_env_creator(
    env: Any, preprocessor_pref: str | None = None, model_config: dict | None = None
) -> EnvCreator:
    """Returns a creator for `env`; raises `EnvError` for unknown ids at once.

    With `preprocessor_pref="deepmind"` (and no `custom_preprocessor`), Atari games get
    DeepMind's frame processing (see `wrap_deepmind`), with frames of
    `model_config["dim"]` pixels, stacked by 4 unless `model_config["framestack"]` is
    False (RLlib 1.13's rule): Atari ids (`ALE/...`, and RLlib 1.x's
    `PongNoFrameskip-v4` and the like), and the Atari envs that an env creator or class
    returns with raw frames.
    """
    from corral.tune.registry import ENV_CREATOR, _global_registry

    if preprocessor_pref not in (None, "deepmind", "rllib"):
        raise ValueError(
            f"preprocessor_pref={preprocessor_pref!r}: expected 'deepmind' (DeepMind's Atari "
            "frame processing for ALE envs), 'rllib' (RLlib's generic pixel preprocessing "
            "of raw frames) or None."
        )
    model = model_config or {}
    deepmind = preprocessor_pref == "deepmind" and not model.get("custom_preprocessor")
    frames = {
        "dim": int(model.get("dim") or 84),
        "framestack": 4 if model.get("framestack", True) else 1,
    }
    if env is None:
        return lambda ctx: None
    if isinstance(env, type):
        return _atari_processed(_class_creator(env), deepmind, frames)
    env_id_of(env)
    if _global_registry.contains(ENV_CREATOR, env):
        return _atari_processed(_global_registry.get(ENV_CREATOR, env), deepmind, frames)
    if "." in env and "/" not in env and ":" not in env:
        return _atari_processed(_class_creator(_import_class(env)), deepmind, frames)
    if env.startswith("ALE/"):
        _register_ale(env)
        if deepmind:
            return lambda ctx: wrap_deepmind(_make_gym_env(env, ctx, frameskip=1), **frames)
    elif _is_unregistered_ale_id(env) and deepmind:
        # RLlib 1.x's Atari ids ("PongNoFrameskip-v4"), which the check registers.
        return lambda ctx: wrap_deepmind(_make_gym_env(env, ctx), **frames)
    _check_gym_id(env)
    return lambda ctx: _make_gym_env(env, ctx)


def _atari_processed(creator: EnvCreator, deepmind: bool, frames: dict) -> EnvCreator:
    """`creator`, whose Atari envs with raw frames get DeepMind's processing when
    `deepmind` (RLlib 1.13 wrapped every Atari env a worker made, whatever made it).

    An env that skips frames itself (`ALE/...-v5`, `Pong-v4`: `frameskip` other than 1)
    keeps its own skip (no second one on top, which Gymnasium's wrapper refuses), with a
    warning once: DeepMind's processing skips 4 frames, max-pooling the last two.
    """
    if not deepmind:
        return creator

    def create(ctx: EnvContext) -> Any:
        made = creator(ctx)
        if not _has_raw_atari_frames(made):
            return made
        skip = getattr(made.unwrapped, "_frameskip", 1)
        if skip != 1:
            from corral.utils.deprecation import log_once

            if log_once("atari_env_skips_frames"):
                import logging

                logging.getLogger(__name__).warning(
                    "The env creator's Atari env skips frames itself (frameskip=%r): "
                    "DeepMind's processing (preprocessor_pref='deepmind') keeps that skip "
                    "instead of its own 4 frames with max-pooling; make the env with "
                    "frameskip=1 (e.g. a 'NoFrameskip-v4' id) for DeepMind's.",
                    skip,
                )
            return wrap_deepmind(made, frame_skip=1, **frames)
        return wrap_deepmind(made, **frames)

    return create


def _has_raw_atari_frames(env: Any) -> bool:
    """Whether `env` is an Atari game whose observations are its raw frames (not
    wrapped into other observations already, e.g. by `wrap_deepmind`, nor RAM)."""
    if not is_atari(env):
        return False
    shape = getattr(getattr(env, "observation_space", None), "shape", None)
    raw = getattr(getattr(env.unwrapped, "observation_space", None), "shape", None)
    return shape is not None and len(shape) == 3 and shape == raw


def _class_creator(cls: type) -> EnvCreator:
    """The creator of an env class: `cls(env_config)`, as RLlib builds one; a class
    whose constructor takes no argument (Gymnasium's style, e.g. `MyEnv()`) is built
    without one while `env_config` is empty, and an `env_config` it cannot take is
    named."""
    try:
        signature = inspect.signature(cls)
    except (TypeError, ValueError):  # (a signature Python cannot read: RLlib's call)
        return lambda ctx: cls(ctx)
    positional = (
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
        inspect.Parameter.VAR_POSITIONAL,
    )
    if any(p.kind in positional for p in signature.parameters.values()):
        return lambda ctx: cls(ctx)

    def create(ctx: EnvContext) -> Any:
        if ctx:
            raise EnvError(
                f"Env class {cls.__qualname__} takes no env config (its constructor is "
                f"{cls.__name__}{signature}), but `env_config` is {dict(ctx)!r}. "
                "corral builds an env class as RLlib does, `EnvClass(env_config)`: give "
                "its `__init__` a config argument, or register a creator "
                "(`register_env(name, lambda config: ...)`) that passes the values on."
            )
        return cls()

    return create


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
    current = _current_version(env_id)
    if current is not None:
        # An id of gym's time (RLlib 1.x's): the env lives on under a newer version.
        hint = (
            f" Gymnasium has this env as '{current}' (its versions change when the env's "
            "dynamics or rewards do): ask for that id."
        )
    else:
        close = difflib.get_close_matches(env_id, list(gym.registry) + registered, n=3)
        hint = f" Did you mean: {', '.join(repr(c) for c in close)}?" if close else ""
    raise EnvError(
        f"Unknown env '{env_id}': it is not registered with corral's `register_env`, not a "
        f"Gymnasium id, and not a dotted class path.{hint}"
    )


def _current_version(env_id: str) -> str | None:
    """The Gymnasium id of `env_id`'s env at its highest registered version when
    `env_id` asks for another version of it (e.g. 'Pendulum-v0' -> 'Pendulum-v1'), else None."""
    from gymnasium.envs.registration import find_highest_version, get_env_id, parse_env_id
    from gymnasium.error import Error

    try:
        namespace, name, version = parse_env_id(env_id)
    except Error:  # not of an id's form: nothing to name
        return None
    highest = find_highest_version(namespace, name)
    if highest is None or highest == version:
        return None
    return get_env_id(namespace, name, highest)


def _registered_names() -> list[str]:
    from corral.tune.registry import ENV_CREATOR, _global_registry

    return list(_global_registry.names(ENV_CREATOR))


def gym_env_creator(env_context: EnvContext, env_descriptor: str) -> Any:
    """RLlib 1.13's: the Gymnasium env `env_descriptor` (an id), made with the
    `env_context`'s items as keyword arguments (an old-gym id's env is converted).

    Raises:
        EnvError: `env_descriptor` is no Gymnasium id.
    """
    from corral.env.gym_compat import ensure_gymnasium_env

    _check_gym_id(env_descriptor)
    return ensure_gymnasium_env(_make_gym_env(env_descriptor, env_context))


def record_env_wrapper(env: Any, record_env: Any, log_dir: str | None, policy_config: Any) -> Any:
    """RLlib 1.13's: `env` recording a video of each episode when `record_env` is set (True:
    `<log_dir>/videos`; a path), as `record_env` in a trainer config does; else `env`."""
    if not record_env:
        return env
    return wrap_record_video(env, record_env, log_dir, prefix="rl-video")


def render_in_mode(env: Any, mode: str | None) -> Any:
    """`env.render()` for RLlib 1.x's `render(mode)`: Gymnasium and PettingZoo envs take
    their mode when they are created (`render_mode`), so `mode` must be None or that one.

    Raises:
        ValueError: `mode` is not the env's `render_mode`.
    """
    own = getattr(env, "render_mode", None)
    if mode is not None and mode != own:
        raise ValueError(
            f"render(mode={mode!r}): {type(env).__name__} was created with "
            f"render_mode={own!r}, and a Gymnasium/PettingZoo env cannot switch modes; "
            f"create it with render_mode={mode!r}."
        )
    return env.render()


def __getattr__(name: str) -> Any:
    # `VideoMonitor` subclasses a Gymnasium wrapper: imported on first use (start-up time).
    if name == "VideoMonitor":
        from corral.env.wrappers.video_monitor import VideoMonitor

        return VideoMonitor
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _make_gym_env(env_id: str, ctx: EnvContext, **overrides: Any) -> Any:
    import gymnasium as gym

    # RLlib passed the env_config to gym.make as keyword arguments.
    kwargs = {**overrides, **dict(ctx)}
    wanted = getattr(ctx, "_render_mode", None)  # set for `render_env` / `record_env`
    if wanted and "render_mode" not in kwargs:
        mode = _supported_render_mode(env_id, wanted)
        if mode is not None:
            kwargs["render_mode"] = mode
    return gym.make(env_id, **kwargs)


def _supported_render_mode(env_id: str, wanted: str) -> str | None:
    """`wanted` if the env lists it in `metadata["render_modes"]`; for "human", else
    "rgb_array" (render() then returns frames instead of opening a window); else None."""
    import gymnasium as gym
    from gymnasium.envs.registration import load_env_creator

    try:
        entry_point = gym.spec(env_id).entry_point
        creator = load_env_creator(entry_point) if isinstance(entry_point, str) else entry_point
        modes = list((getattr(creator, "metadata", None) or {}).get("render_modes", []))
    except Exception:  # noqa: BLE001 - unknown modes: let the env decide without one
        return None
    if wanted in modes:
        return wanted
    if wanted == "human" and "rgb_array" in modes:
        return "rgb_array"
    return None


def _is_unregistered_ale_id(env_id: str) -> bool:
    """Whether `env_id` is not registered yet but is one of the ids ale-py registers (the
    older `<Game>-v0/v4`, `<Game>NoFrameskip-v4`, ...), when ale-py is installed."""
    import gymnasium as gym

    if env_id in gym.registry or importlib.util.find_spec("ale_py") is None:
        return False
    _register_ale(env_id)
    spec = gym.registry.get(env_id)
    return spec is not None and str(spec.entry_point).startswith("ale_py")


def _register_ale(env_id: str) -> None:
    """Atari ids exist once ale-py registered them; say how to get it when it is missing."""
    try:
        import ale_py
    except ImportError as err:
        raise EnvError(
            f"Env '{env_id}' is an Atari game, which needs ale-py: pip install "
            "'gymnasium[atari]' (the ROMs ship with ale-py >= 0.9)."
        ) from err
    import gymnasium as gym

    gym.register_envs(ale_py)


def is_atari(env: Any) -> bool:
    """Whether `env` is an Arcade Learning Environment game (possibly wrapped)."""
    spec = getattr(env, "spec", None)
    if spec is not None and str(getattr(spec, "id", "")).startswith("ALE/"):
        return True
    unwrapped = getattr(env, "unwrapped", env)
    return type(unwrapped).__module__.startswith("ale_py")


def wrap_deepmind(env: Any, dim: int = 84, framestack: int | bool = 4, frame_skip: int = 4) -> Any:
    """DeepMind's Atari frame processing; see `corral.env.wrappers.atari_wrappers`."""
    from corral.env.wrappers.atari_wrappers import wrap_deepmind as wrap

    return wrap(env, dim=dim, framestack=framestack, frame_skip=frame_skip)


def wrap_record_video(env: gym.Env, record_env: Any, log_dir: str | None, prefix: str) -> Any:
    """`record_env`: wraps `env` in Gymnasium's `RecordVideo`, one video per episode
    (as RLlib's Monitor did), into `<logdir>/videos` (True), `<logdir>/<dir>` (a
    relative path) or an absolute path."""
    try:
        import moviepy  # noqa: F401
    except ImportError as err:
        raise ImportError(
            "record_env needs moviepy (Gymnasium's RecordVideo writes videos with it): "
            "pip install 'corral[video]'."
        ) from err
    from gymnasium.wrappers import RecordVideo

    folder = "videos" if record_env is True else str(record_env)
    if not os.path.isabs(folder):
        if log_dir is None:
            raise ValueError(
                f"record_env={record_env!r} is relative to the trainer's logdir, but this "
                "worker has none; give an absolute path."
            )
        folder = os.path.join(log_dir, folder)
    if not str(getattr(env, "render_mode", None)).startswith("rgb_array"):
        raise ValueError(
            f"record_env needs an env created with render_mode='rgb_array' (frames to "
            f"record), got render_mode={getattr(env, 'render_mode', None)!r}. Gymnasium ids "
            "get it automatically; custom envs must accept and set it."
        )
    return RecordVideo(
        env, folder, episode_trigger=lambda _: True, name_prefix=prefix, disable_logger=True
    )
