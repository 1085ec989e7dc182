"""Envs and spaces written for the old gym API (gym <= 0.25), as Gymnasium ones.

RLlib 1.x users wrote envs against gym: `reset() -> obs`, `step() -> (obs, reward, done,
info)`, `render(mode)`, `gym.spaces`. corral runs on Gymnasium, so every env it builds goes
through :func:`ensure_gymnasium_env`:

- a `gym.Env` (any class whose MRO reaches the `gym` package, including what `gym.make`
  returns) is converted with Farama's Shimmy (`GymV21CompatibilityV0` for gym < 0.26,
  `GymV26CompatibilityV0` for gym 0.26, whose API is already Gymnasium's);
- a `MultiAgentEnv` written for the old API (its `reset` takes no `seed`) is wrapped in
  :class:`OldAPIMultiAgentEnv` (Shimmy has no multi-agent converter for RLlib's API);
- an env of neither kind whose `reset` takes no `seed` is wrapped in :class:`OldAPIEnv`.

Each converted env class is named in one warning per process. corral never imports `gym`:
old objects are recognised by the module of their class, and Shimmy (which imports gym) is
imported only when such an object is already in hand, i.e. when gym is already loaded.

:func:`convert_space` turns old `gym.spaces` objects (in env spaces, policy specs or config
keys) into the equal Gymnasium spaces.
"""

from __future__ import annotations

import contextlib
import inspect
import logging
import sys
import warnings
from typing import Any

import gymnasium as gym
import numpy as np

from corral.env.multi_agent_env import MultiAgentEnv
from corral.utils import numpy_compat
from corral.utils.error import EnvError

logger = logging.getLogger(__name__)

_warned: set[str] = set()


def _is_from_gym(obj: Any) -> bool:
    """Whether `obj`'s class (or a base of it) lives in the old `gym` package."""
    return any(
        (getattr(c, "__module__", "") or "").split(".")[0] == "gym" for c in type(obj).__mro__
    )


def is_old_gym_space(space: Any) -> bool:
    """Whether `space` is an old `gym.spaces` object (not a Gymnasium space)."""
    return not isinstance(space, gym.Space) and _is_from_gym(space)


def convert_space(space: Any) -> Any:
    """`space` as a Gymnasium space: old `gym.spaces` objects are rebuilt equal (nested
    Tuple/Dict too); Gymnasium spaces and None pass through unchanged.

    Raises:
        TypeError: for an old gym space type that has no Gymnasium counterpart.
    """
    if _is_repeated_of_old(space):
        cached = _linked(space, "_gymnasium_space")
        if cached is None:
            from corral.utils.spaces.repeated import Repeated

            cached = Repeated(convert_space(space.child_space), space.max_len)
            with contextlib.suppress(AttributeError):
                space._gymnasium_space = _Link(cached)
                cached._gym_space = _Link(space)
        return cached
    if space is None or isinstance(space, gym.Space) or not is_old_gym_space(space):
        return space
    cached = _linked(space, "_gymnasium_space")
    if cached is not None:
        return cached
    new = _convert(space)
    # RLlib's preprocessed observation spaces name the env's space they flatten.
    original = getattr(space, "original_space", None)
    if original is not None:
        new.original_space = convert_space(original)
    link_spaces(space, new)
    return new


def _is_repeated_of_old(space: Any) -> bool:
    """Whether `space` is a `Repeated` of an old gym space (see `Repeated.__new__`)."""
    return hasattr(space, "child_space") and is_old_gym_space(space.child_space)


class _Link:
    """A reference that is not pickled (it unpickles as None): an old gym space must
    not travel to or from worker processes with the Gymnasium space it was converted
    to (old gym's random generators do not unpickle under NumPy 2)."""

    __slots__ = ("target",)

    def __init__(self, target: Any = None) -> None:
        self.target = target

    def __reduce__(self) -> tuple:
        return (_Link, ())


class _OldSpaceLink(_Link):
    """The link from a converted Gymnasium space to its old gym space. Pickled (a
    worker's spaces reach the driver), it travels as nothing but a mark and is rebuilt
    from the Gymnasium space on first use, with the `gym` module the receiving process
    has already loaded (None where it has none)."""

    __slots__ = ("source",)

    def __init__(self, target: Any = None, source: Any = None) -> None:
        super().__init__(target)
        self.source = source

    def __reduce__(self) -> tuple:
        return (_OldSpaceLink, (None, self.source))

    def resolve(self) -> Any:
        if self.target is None and self.source is not None:
            self.target = _to_old_gym(self.source)
        return self.target


def link_spaces(old: Any, new: Any) -> None:
    """Remembers that `new` was converted from `old`, both ways: models of RLlib 1.x code
    see the old space they declared (`gym_space_of`), converting again is free."""
    if old is None or new is None or not is_old_gym_space(old):
        return
    with contextlib.suppress(AttributeError):
        old._gymnasium_space = _Link(new)
        new._gym_space = _OldSpaceLink(old, new)


def _linked(space: Any, attr: str) -> Any:
    link = getattr(space, attr, None)
    if isinstance(link, _OldSpaceLink):
        return link.resolve()
    return link.target if isinstance(link, _Link) else None


def _to_old_gym(space: Any) -> Any:
    """`space` rebuilt as an old gym space, with the already loaded `gym` (else None)."""
    old_gym = sys.modules.get("gym")
    spaces = getattr(old_gym, "spaces", None)
    if spaces is None:
        return None
    kind = type(space).__name__
    if kind == "Discrete":
        return spaces.Discrete(int(space.n))
    if kind == "Box":
        return spaces.Box(low=space.low, high=space.high, shape=space.shape, dtype=space.dtype)
    if kind == "MultiDiscrete":
        return spaces.MultiDiscrete(space.nvec)
    if kind == "MultiBinary":
        return spaces.MultiBinary(space.n)
    if kind == "Tuple":
        parts = [_to_old_gym(s) for s in space.spaces]
        return None if any(p is None for p in parts) else spaces.Tuple(parts)
    if kind == "Dict":
        parts = {k: _to_old_gym(s) for k, s in space.spaces.items()}
        if any(p is None for p in parts.values()):
            return None
        import collections

        return spaces.Dict(collections.OrderedDict(parts))
    return None


def gym_space_of(space: Any) -> Any:
    """The old gym space `space` was converted from in this process, else `space`."""
    old = _linked(space, "_gym_space")
    return space if old is None else old


def _convert(space: Any) -> Any:
    kind = type(space).__name__
    spaces = gym.spaces
    if kind == "Discrete":
        return spaces.Discrete(int(space.n), start=int(getattr(space, "start", 0)))
    if kind == "Box":
        return spaces.Box(low=space.low, high=space.high, shape=space.shape, dtype=space.dtype)
    if kind == "MultiDiscrete":
        return spaces.MultiDiscrete(np.asarray(space.nvec))
    if kind == "MultiBinary":
        return spaces.MultiBinary(space.n)
    if kind == "Tuple":
        return spaces.Tuple([convert_space(s) for s in space.spaces])
    if kind == "Dict":
        # Keep the old space's key order (gym sorted plain-dict keys, as Gymnasium does).
        return spaces.Dict({k: convert_space(s) for k, s in space.spaces.items()})
    if kind == "Repeated" or hasattr(space, "child_space"):
        return space
    raise TypeError(
        f"Cannot convert the old gym space {space!r} ({type(space).__module__}.{kind}) to a "
        "Gymnasium space: expected Discrete, Box, MultiDiscrete, MultiBinary, Tuple or Dict."
    )


def convert_spaces_in(value: Any) -> Any:
    """`value` with old gym spaces converted, looking into dicts, lists and tuples (for
    `observation_space`/`action_space` config keys and policy spec tuples)."""
    if is_old_gym_space(value):
        return convert_space(value)
    if isinstance(value, dict):
        return {k: convert_spaces_in(v) for k, v in value.items()}
    return value


def _takes_seed(reset: Any) -> bool:
    """Whether a `reset` method accepts Gymnasium's `seed=` keyword."""
    try:
        params = inspect.signature(reset).parameters.values()
    except (TypeError, ValueError):  # builtins without a signature: assume Gymnasium
        return True
    return any(p.name == "seed" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


def env_name(env: Any, *, short: bool = False) -> str:
    """A name for `env` in messages.

    Args:
        env: Any env object (wrapped or not, Gymnasium, old gym, multi-agent).
        short: Only the Gymnasium/gym id when the env has one, else its class name
            (for messages repeated per sub-env); by default the class's module path,
            with the id after it when there is one.
    """
    env_id = getattr(getattr(env, "spec", None), "id", None)
    unwrapped = user_env(env)
    if short:
        return str(env_id) if env_id else type(unwrapped).__name__
    name = f"{type(unwrapped).__module__}.{type(unwrapped).__qualname__}"
    return f"{name} ('{env_id}')" if env_id else name


def user_env(env: Any) -> Any:
    """The env object the user's code made, under the wrappers: `env.unwrapped`, and
    for an old gym env converted by Shimmy (whose converter is its own `unwrapped`) the
    gym env inside it, so that messages name the user's class, not Shimmy's."""
    unwrapped = getattr(env, "unwrapped", env)
    inner = getattr(unwrapped, "gym_env", None)
    if inner is not None and type(unwrapped).__module__.startswith("shimmy."):
        return getattr(inner, "unwrapped", inner)
    return unwrapped


def _warn_once(env: Any, how: str) -> None:
    name = env_name(env)
    if name in _warned:
        return
    _warned.add(name)
    warnings.warn(
        f"Env {name} follows the old gym API (reset() -> obs, step() -> (obs, reward, done, "
        f"info)); corral converts it with {how}. Port it to Gymnasium's API to silence this.",
        UserWarning,
        stacklevel=3,
    )


def is_old_api_env(env: Any) -> bool:
    """Whether `env` must be converted before corral can step it."""
    if isinstance(env, (OldAPIEnv, OldAPIMultiAgentEnv)):
        return False
    if _is_from_gym(env) and not isinstance(env, gym.Env):
        return True
    reset = getattr(env, "reset", None)
    if reset is None or not callable(getattr(env, "step", None)):
        return False
    # Also a Gymnasium-based class whose subclass kept the old `reset()` (RLlib 1.x code
    # subclassing `MultiAgentEnv` or `TaskSettableEnv`, which derived from gym.Env).
    return not _takes_seed(reset)


def ensure_gymnasium_env(env: Any, render_mode: str | None = None) -> Any:
    """`env` as a Gymnasium-API env (single- or multi-agent), converting an old-API one.

    Args:
        env: what an env creator returned.
        render_mode: the Gymnasium render mode the converted single-agent env declares
            (old envs take the mode per `render(mode=...)` call, which the converter then
            passes): "rgb_array" for `record_env`, "human" for `render_env`.

    Returns:
        `env` itself when it already follows Gymnasium's API, else a converting wrapper.
    """
    if env is None or not is_old_api_env(env):
        _convert_own_spaces(env)
        return env
    # gym 0.23 and code of its time use NumPy 1.x names (np.bool8, np.product).
    numpy_compat.install()
    if isinstance(env, MultiAgentEnv) or _looks_multi_agent(env):
        _warn_once(env, "corral's OldAPIMultiAgentEnv")
        return OldAPIMultiAgentEnv(env)
    if _is_from_gym(env) and not _has_repeated(env):
        return _shimmy_convert(env, render_mode)
    _warn_once(env, "corral's OldAPIEnv")
    return OldAPIEnv(env, render_mode)


def _has_repeated(env: Any) -> bool:
    """Whether an env's spaces hold RLlib's `Repeated` (Shimmy cannot convert it;
    corral's `OldAPIEnv` can)."""

    def holds(space: Any) -> bool:
        if hasattr(space, "child_space"):
            return True
        inner = getattr(space, "spaces", None)
        parts = inner.values() if isinstance(inner, dict) else inner or ()
        return any(holds(p) for p in parts)

    return any(holds(getattr(env, a, None)) for a in ("observation_space", "action_space"))


def _looks_multi_agent(env: Any) -> bool:
    return hasattr(env, "_agent_ids") or type(env).__name__.startswith("MultiAgent")


def _convert_own_spaces(env: Any) -> None:
    """A Gymnasium env that declares old gym spaces gets them converted in place."""
    if env is None:
        return
    for attr in ("observation_space", "action_space"):
        space = getattr(env, attr, None)
        if is_old_gym_space(space):
            # A read-only property stays as it is: the sampler's checks report it.
            with contextlib.suppress(AttributeError):
                setattr(env, attr, convert_space(space))


def _shimmy_convert(env: Any, render_mode: str | None = None) -> gym.Env:
    try:
        from shimmy import GymV21CompatibilityV0, GymV26CompatibilityV0
    except ImportError as err:  # pragma: no cover - shimmy is a dependency
        raise EnvError(
            f"Env {env_name(env)} is an old gym env; converting it needs Shimmy: pip install shimmy"
        ) from err
    version = getattr(sys.modules.get("gym"), "__version__", "0.0")
    major_minor = tuple(int(p) for p in version.split(".")[:2] if p.isdigit())
    if major_minor >= (0, 26):
        _warn_once(env, "Shimmy's GymV26CompatibilityV0")
        converted = GymV26CompatibilityV0(env=env)  # (a gym 0.26 env has its own mode)
    else:
        _warn_once(env, "Shimmy's GymV21CompatibilityV0")
        converted = GymV21CompatibilityV0(env=env, render_mode=render_mode)
    # Remember the old spaces (see `convert_space`): models of RLlib 1.x code check them.
    for attr in ("observation_space", "action_space"):
        link_spaces(getattr(env, attr, None), getattr(converted, attr, None))
    return converted


class _OldEnvAdapter:
    """What the old-API adapters below share: the old env in `env`, which `close`,
    `unwrapped` and any attribute the adapter lacks reach; seeding through its `seed`."""

    env: Any

    def _seed_old_env(self, seed: int | None) -> None:
        """The old API's seeding (`env.seed(seed)` before `reset()`), where it has one."""
        if seed is not None and callable(getattr(self.env, "seed", None)):
            self.env.seed(seed)

    def close(self) -> None:
        if callable(getattr(self.env, "close", None)):
            self.env.close()

    @property
    def unwrapped(self) -> Any:
        return self.env

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") or name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)


class OldAPIEnv(_OldEnvAdapter, gym.Env):
    """A single-agent env with the old API that is not a `gym.Env` (duck-typed), as a
    Gymnasium env. `done` becomes `terminated`, unless the info says
    `TimeLimit.truncated` (gym's TimeLimit), which becomes `truncated`."""

    def __init__(self, env: Any, render_mode: str | None = None) -> None:
        self.env = env
        self.observation_space = convert_space(env.observation_space)
        self.action_space = convert_space(env.action_space)
        self.metadata = getattr(env, "metadata", {}) or {}
        self.render_mode = render_mode or getattr(env, "render_mode", None)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        self._seed_old_env(seed)
        return self.env.reset(), {}

    def step(self, action: Any):
        out = self.env.step(action)
        if not isinstance(out, tuple) or len(out) != 4:
            raise EnvError(
                f"Env {env_name(self.env)}: step(action) returned {_short(out)}; an old-API "
                "env must return (obs, reward, done, info)."
            )
        obs, reward, done, info = out
        truncated = bool((info or {}).get("TimeLimit.truncated", False))
        return obs, reward, bool(done) and not truncated, truncated, info or {}

    def render(self) -> Any:
        return self.env.render(mode=self.render_mode or "human")


class OldAPIMultiAgentEnv(_OldEnvAdapter, MultiAgentEnv):
    """An RLlib 1.x `MultiAgentEnv` (`reset() -> obs_dict`, `step() -> (obs, rewards,
    dones, infos)` with `dones["__all__"]`) as a Gymnasium-style one.

    `dones` become `terminateds`; `truncateds` are all False, except an agent whose info
    says `TimeLimit.truncated`. Agent ids come from the old env's `_agent_ids` (RLlib
    1.13's attribute) when it has them, else from the first observation dict. The old
    env's own attributes stay reachable through this wrapper.
    """

    def __init__(self, env: Any) -> None:
        # Not MultiAgentEnv.__init__: the old env's `agents` (often a list of sub-envs)
        # must not be taken for agent ids.
        self.env = env
        self.observation_space = convert_space(getattr(env, "observation_space", None))
        self.action_space = convert_space(getattr(env, "action_space", None))
        ids = getattr(env, "_agent_ids", None)
        self.possible_agents = sorted(ids, key=str) if ids else []
        self.agents = list(self.possible_agents)
        self.observation_spaces = _per_agent(getattr(env, "observation_spaces", None))
        self.action_spaces = _per_agent(getattr(env, "action_spaces", None))
        self.metadata = getattr(env, "metadata", {}) or {}
        self.render_mode = None

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        self._seed_old_env(seed)
        obs = self.env.reset()
        if not isinstance(obs, dict):
            raise EnvError(
                f"MultiAgentEnv {env_name(self.env)}: reset() returned {_short(obs)}; an "
                "old-API multi-agent env must return a dict of observations keyed by agent id."
            )
        if not self.possible_agents:
            self.possible_agents = list(obs)
        self.agents = list(self.possible_agents)
        return obs, {aid: {} for aid in obs}

    def step(self, action_dict: dict):
        out = self.env.step(action_dict)
        if not isinstance(out, tuple) or len(out) != 4 or not isinstance(out[2], dict):
            raise EnvError(
                f"MultiAgentEnv {env_name(self.env)}: step(action_dict) returned "
                f"{_short(out)}; an old-API multi-agent env must return (obs, rewards, "
                "dones, infos), dicts keyed by agent id with dones['__all__']."
            )
        obs, rewards, dones, infos = out
        if "__all__" not in dones:
            raise EnvError(
                f"MultiAgentEnv {env_name(self.env)}: step() returned dones {dones!r} without "
                "the '__all__' key (True when the whole episode is over)."
            )
        infos = dict(infos or {})
        terminateds, truncateds = {}, {}
        for aid, done in dones.items():
            trunc = bool((infos.get(aid) or {}).get("TimeLimit.truncated", False))
            terminateds[aid] = bool(done) and not trunc
            truncateds[aid] = trunc
        return obs, rewards, terminateds, truncateds, infos

    def render(self, mode: str = "rgb_array") -> Any:
        return self.env.render(mode=mode) if callable(getattr(self.env, "render", None)) else None


def _per_agent(spaces: Any) -> dict | None:
    if not isinstance(spaces, dict):
        return None
    return {k: convert_space(s) for k, s in spaces.items()}


def _short(value: Any, limit: int = 200) -> str:
    text = repr(value)
    kind = type(value).__name__
    if isinstance(value, tuple):
        kind = f"a {len(value)}-tuple"
    return f"{kind} {text[:limit]}{'...' if len(text) > limit else ''}"


def check_reset_output(env: Any, out: Any) -> tuple[Any, dict]:
    """`out` of `env.reset(...)` as `(obs, info)`, or an `EnvError` saying what came back."""
    if isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], dict):
        return out
    raise EnvError(
        f"Env {env_name(env)}: reset() returned {_short(out)}; expected (obs, info) "
        "(Gymnasium's API) - or an env following the old gym API (reset() -> obs, with "
        "reset taking no seed), which corral converts."
    )


def step_output_error(env: Any, out: Any) -> EnvError:
    """The error for an `env.step(action)` result that is not Gymnasium's 5-tuple."""
    return EnvError(
        f"Env {env_name(env)}: step(action) returned {_short(out)}; expected (obs, reward, "
        "terminated, truncated, info) (Gymnasium's API) - or an env following the old gym "
        "API throughout (reset() -> obs, step() -> (obs, reward, done, info)), which corral "
        "converts."
    )
