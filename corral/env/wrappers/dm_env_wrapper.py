"""`DMEnv`: a DeepMind `dm_env.Environment` as a Gymnasium env.

Needs the `dm_env` package (the `dm-control` extra brings it). The env's specs become
Gymnasium spaces (`spec_to_space`) and its `TimeStep`s Gymnasium's 5-tuples
(`timestep_flags`): a LAST step whose discount is 0 ends the episode in a terminal state
(`terminated`), a LAST step with a discount above 0 cuts it where the value of the next
state still counts, e.g. a time limit (`truncated`). The step's discount is in the info
under `"discount"`.

`dm_env` has no seeding API: `reset(seed=...)` reseeds envs that draw from a task's
`numpy.random.RandomState` (dm_control's `control.Environment`, as `env.task.random`) and
warns once for others, whose randomness the wrapper cannot reach.
"""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

import gymnasium as gym
import numpy as np

INSTALL_HINT = "pip install corral[dm-control]"


def import_dm_env_specs() -> Any:
    """`dm_env.specs`, or an ImportError saying how to install it."""
    try:
        from dm_env import specs
    except ImportError as e:
        raise ImportError(f"DeepMind env wrappers need the dm_env package ({INSTALL_HINT}).") from e
    return specs


def spec_to_space(spec: Any) -> gym.Space:
    """The Gymnasium space of a `dm_env` spec (or a dict, list or tuple of specs).

    `DiscreteArray` -> `Discrete(num_values)`; `BoundedArray` -> `Box` with the spec's
    bounds; `Array` -> an unbounded `Box` (integer dtypes: the dtype's range; bool: 0..1);
    a mapping -> `Dict`, a list or tuple -> `Tuple`.

    Raises:
        NotImplementedError: a spec with no Gymnasium counterpart (e.g. `StringArray`).
    """
    specs = import_dm_env_specs()
    if isinstance(spec, Mapping):
        return gym.spaces.Dict({k: spec_to_space(v) for k, v in spec.items()})
    if isinstance(spec, (list, tuple)):
        return gym.spaces.Tuple(tuple(spec_to_space(s) for s in spec))
    if isinstance(spec, specs.DiscreteArray):
        return gym.spaces.Discrete(int(spec.num_values))
    if isinstance(spec, specs.StringArray):
        raise NotImplementedError(f"A dm_env StringArray spec has no Gymnasium space: {spec}.")
    if isinstance(spec, specs.BoundedArray):
        low = np.broadcast_to(spec.minimum, spec.shape).astype(spec.dtype)
        high = np.broadcast_to(spec.maximum, spec.shape).astype(spec.dtype)
        return gym.spaces.Box(low=low, high=high, shape=spec.shape, dtype=spec.dtype)
    if isinstance(spec, specs.Array):
        dtype = np.dtype(spec.dtype)
        if dtype == np.bool_:
            return gym.spaces.Box(low=0, high=1, shape=spec.shape, dtype=dtype)
        if np.issubdtype(dtype, np.integer):
            info = np.iinfo(dtype)
            return gym.spaces.Box(low=info.min, high=info.max, shape=spec.shape, dtype=dtype)
        return gym.spaces.Box(low=-np.inf, high=np.inf, shape=spec.shape, dtype=dtype)
    raise NotImplementedError(
        f"Cannot convert the dm_env spec {spec!r} (a {type(spec).__name__}) to a Gymnasium space."
    )


def conform(value: Any, spec: Any) -> Any:
    """`value` (an observation or action) cast to the dtypes of `spec`'s structure.

    A `DiscreteArray` gives a Python int, other arrays a numpy array of the spec's dtype
    and shape, mappings and sequences are walked.
    """
    specs = import_dm_env_specs()
    if isinstance(spec, Mapping):
        return {k: conform(value[k], s) for k, s in spec.items()}
    if isinstance(spec, (list, tuple)):
        return tuple(conform(v, s) for v, s in zip(value, spec, strict=True))
    if isinstance(spec, specs.DiscreteArray) and spec.shape == ():
        return int(np.asarray(value))
    return np.asarray(value, dtype=spec.dtype).reshape(spec.shape)


def timestep_flags(time_step: Any) -> tuple[bool, bool]:
    """`(terminated, truncated)` of a `dm_env.TimeStep`.

    A LAST step with discount 0 (or None) is terminated; one with a discount above 0
    (dm_env's `truncation()`) is truncated; other steps are neither.
    """
    if not time_step.last():
        return False, False
    discount = time_step.discount
    terminated = discount is None or bool(np.all(np.asarray(discount) == 0))
    return terminated, not terminated


def timestep_reward(time_step: Any) -> Any:
    """The step's reward: 0.0 for None (a FIRST step), a float for a scalar reward."""
    reward = time_step.reward
    if reward is None:
        return 0.0
    array = np.asarray(reward)
    return float(array) if array.ndim == 0 else array


def reseed_dm_env(env: Any, seed: int, owner: Any) -> None:
    """Reseeds a dm_env through its task's `RandomState` (dm_control envs); warns once
    on `owner` when the env has none."""
    random = getattr(getattr(env, "task", None), "random", None)
    if isinstance(random, np.random.RandomState):
        random.seed(seed)
        return
    seeder = getattr(env, "seed", None)
    if callable(seeder):
        seeder(seed)
        return
    if not getattr(owner, "_warned_unseedable", False):
        owner._warned_unseedable = True
        warnings.warn(
            f"{type(env).__name__} (a dm_env) has no seeding API (no `task.random` "
            "RandomState, no `seed()`): reset(seed=...) cannot reseed it.",
            stacklevel=3,
        )


class DMEnv(gym.Env):
    """A `dm_env.Environment` (e.g. `dm_control.suite.load("cartpole", "balance")`) as a
    Gymnasium env.

    Observations and actions keep the env's structure (a dm_control env observes an
    ordered dict of arrays: a `Dict` space); `reward_range` comes from the reward spec.

    Args:
        dm_env: the environment to wrap.
    """

    metadata = {"render_modes": ["rgb_array"]}

    def __init__(self, dm_env: Any) -> None:
        import_dm_env_specs()
        super().__init__()
        self._env = dm_env
        self._obs_spec = dm_env.observation_spec()
        self._action_spec = dm_env.action_spec()
        self._observation_space = spec_to_space(self._obs_spec)
        self._action_space = spec_to_space(self._action_spec)
        self.render_mode = "rgb_array"
        self._prev_obs: Any = None

    @property
    def observation_space(self) -> gym.Space:  # type: ignore[override]
        """The observation spec as a Gymnasium space (`spec_to_space`; RLlib 1.13's
        read-only property, converted once)."""
        return self._observation_space

    @property
    def action_space(self) -> gym.Space:  # type: ignore[override]
        """The action spec as a Gymnasium space (`spec_to_space`; RLlib 1.13's read-only
        property, converted once)."""
        return self._action_space

    @property
    def dm_env(self) -> Any:
        """The wrapped `dm_env.Environment`."""
        return self._env

    @property
    def reward_range(self) -> tuple[float, float]:
        """The reward spec's bounds (unbounded unless it is a scalar `BoundedArray`)."""
        specs = import_dm_env_specs()
        spec = self._env.reward_spec()
        if isinstance(spec, specs.BoundedArray) and np.size(spec.minimum) == 1:
            return float(np.min(spec.minimum)), float(np.max(spec.maximum))
        return -float("inf"), float("inf")

    def reset(
        self, *, seed: int | None = None, options: dict | None = None
    ) -> tuple[Any, dict[str, Any]]:
        super().reset(seed=seed)
        if seed is not None:
            reseed_dm_env(self._env, seed, self)
        time_step = self._env.reset()
        self._prev_obs = conform(time_step.observation, self._obs_spec)
        return self._prev_obs, {"discount": time_step.discount}

    def step(self, action: Any) -> tuple[Any, Any, bool, bool, dict[str, Any]]:
        if self._prev_obs is None:
            raise RuntimeError("DMEnv.step() before reset(): call reset() first.")
        time_step = self._env.step(conform(action, self._action_spec))
        self._prev_obs = conform(time_step.observation, self._obs_spec)
        terminated, truncated = timestep_flags(time_step)
        return (
            self._prev_obs,
            timestep_reward(time_step),
            terminated,
            truncated,
            {"discount": time_step.discount},
        )

    def render(self, mode: str | None = None) -> Any:
        """The latest observation (an image for envs that observe pixels), as RLlib does.

        Args:
            mode: RLlib 1.13's argument: None or "rgb_array" (the only mode).

        Raises:
            ValueError: before the first `reset()`, or a `mode` other than "rgb_array".
        """
        if mode not in (None, "rgb_array"):
            raise ValueError(f"DMEnv renders 'rgb_array' frames only, not {mode!r}.")
        if self._prev_obs is None:
            raise ValueError("Environment not started: reset() it before rendering.")
        return self._prev_obs

    def close(self) -> None:
        close = getattr(self._env, "close", None)
        if callable(close):
            close()
