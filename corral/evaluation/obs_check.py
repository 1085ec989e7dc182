"""Checks of the observations an env returns: finite, and inside a Box's bounds.

The samplers check every observation, from `reset()` and from `step()`, before
it reaches a policy, a filter or a batch: a NaN that gets into a train batch
turns the weights into NaN a few updates later, far from its cause. The check
costs two vectorised comparisons per step on the whole `[num_envs, ...]` row
block: NaN fails both (every comparison with NaN is False) and infinities
fail them too, because infinite bounds are replaced by float32's finite
extremes. `disable_env_checking` (RLlib 1.13's key) turns the bounds off but
keeps the finite check.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np

from corral.env.gym_compat import env_name
from corral.utils.error import EnvError

_F32_MAX = float(np.finfo(np.float32).max)
# Called as ufunc methods: numpy's `np.all` / `ndarray.all` wrappers cost more than
# the comparison itself on the few elements of a step's observations.
_and_reduce = np.logical_and.reduce
_add_reduce = np.add.reduce


def all_finite(values: np.ndarray) -> bool:
    """Whether every element of a float array is finite.

    A sum is finite only if every term is (NaN and inf propagate): one reduction
    instead of `isfinite` plus `all`. It accumulates in float64, where float32
    terms cannot overflow; the exact element-wise test backs up any other dtype.
    """
    return math.isfinite(_add_reduce(values, axis=None, dtype=np.float64)) or bool(
        _and_reduce(np.isfinite(values), axis=None)
    )


def spaces_match(a: Any, b: Any) -> bool:
    """Whether two spaces describe the same data: same kind, same shape (and the same
    number of choices for discrete spaces, the same parts for Tuple/Dict). Box bounds
    may differ: a config may state tighter or looser ones than the env."""
    if type(a) is not type(b):
        return False
    spaces = gym.spaces
    if isinstance(a, spaces.Box):
        return a.shape == b.shape
    if isinstance(a, spaces.Discrete):
        return int(a.n) == int(b.n) and int(a.start) == int(b.start)
    if isinstance(a, spaces.MultiDiscrete):
        return a.shape == b.shape and bool(np.all(a.nvec == b.nvec))
    if isinstance(a, spaces.MultiBinary):
        return a.shape == b.shape
    if isinstance(a, spaces.Tuple):
        return len(a) == len(b) and all(spaces_match(x, y) for x, y in zip(a, b))
    if isinstance(a, spaces.Dict):
        return a.keys() == b.keys() and all(spaces_match(a[k], b[k]) for k in a)
    return a == b


def batch_obs_dtype(space: Any, model: Any, *, unprocessed: bool) -> np.dtype:
    """The dtype of a sampler's observation columns.

    float32, except for an integer `Box` (e.g. Atari's uint8 frames) whose observations
    reach the batch as the env gives them (`unprocessed`: no preprocessor, no filter)
    and a model that says it casts integer observations itself (its class attribute
    `accepts_integer_obs`, True for the default vision net, as RLlib's torch models
    call `.float()` on `obs`): then the env's dtype.
    """
    if (
        unprocessed
        and isinstance(space, gym.spaces.Box)
        and np.dtype(space.dtype).kind in "ui"
        and getattr(model, "accepts_integer_obs", False)
    ):
        return np.dtype(space.dtype)
    return np.dtype(np.float32)


def _spans_its_dtype(space: gym.spaces.Box) -> bool:
    """Whether an integer Box's bounds are its dtype's whole range (no value can be out)."""
    dtype = np.dtype(space.dtype)
    if dtype.kind not in "ui":
        return False
    info = np.iinfo(dtype)  # type: ignore[type-var]  # an integer dtype, checked above
    return bool(np.all(space.low <= info.min) and np.all(space.high >= info.max))


class ObservationCheck:
    """Bounds that preprocessed float32 observations (one or a batch) must lie in.

    Args:
        original_space: the env's observation space (before preprocessing).
        shape: the preprocessed observation's shape.
        bounds: check a Box's bounds (only where the preprocessed observation is
            the Box observation itself); False checks finiteness only.
    """

    def __init__(self, original_space: Any, shape: tuple[int, ...], bounds: bool = True) -> None:
        self.space = original_space
        is_box = isinstance(original_space, gym.spaces.Box)
        self.bounded = bool(bounds and is_box and tuple(original_space.shape) == tuple(shape))
        # Arrays of the Box's shape, or float32 scalars when only finiteness is checked.
        self.low: np.ndarray | np.float32
        self.high: np.ndarray | np.float32
        if self.bounded:
            low = np.asarray(original_space.low, np.float64)
            high = np.asarray(original_space.high, np.float64)
            self.low = np.maximum(low, -_F32_MAX).astype(np.float32)
            self.high = np.minimum(high, _F32_MAX).astype(np.float32)
            if not (np.isfinite(low).any() or np.isfinite(high).any()):
                self.bounded = False  # (-inf, inf): nothing but finiteness to check
            elif _spans_its_dtype(original_space):
                # e.g. Atari's uint8 frames in [0, 255]: any value of the dtype is inside.
                self.bounded = False
        if not self.bounded:
            self.low = np.float32(-_F32_MAX)
            self.high = np.float32(_F32_MAX)

    def ok(self, obs: np.ndarray) -> bool:
        """True when every element is finite (and within the bounds)."""
        return bool(_and_reduce((obs >= self.low) & (obs <= self.high), axis=None))

    def error(
        self,
        obs: np.ndarray,
        *,
        env: Any,
        call: str,
        worker_index: int,
        env_index: int | None = None,
        agent: Any = None,
        batched: bool = False,
    ) -> EnvError:
        """The error for `obs` that failed `ok` (which rows/elements, and why).

        Args:
            obs: the observation, or a `[num_envs, ...]` batch when `batched`.
            env: the (sub-)env, to name it (for a batch: the first one at fault is
                named via `env_index`, which must then be None; see `envs`).
            call: "reset" or "step".
            worker_index: the worker sampling.
            env_index: the sub-env's index (None: found from the batch).
            agent: the agent id (multi-agent envs).
            batched: `obs` has a leading sub-env dimension.
        """
        if batched:
            bad_rows = [i for i in range(len(obs)) if not self.ok(obs[i])]
            env_index = bad_rows[0] if bad_rows else 0
            obs = obs[env_index]
            if isinstance(env, list | tuple):
                env = env[env_index]
        flat = np.asarray(obs, np.float64).reshape(-1)
        where = f"sub-env {env_index} of worker {worker_index}"
        who = f"agent {agent!r} of " if agent is not None else ""
        head = f"Env '{env_name(env, short=True)}' ({who}{where}) returned from {call}()"
        bad = np.flatnonzero(~np.isfinite(flat))
        if bad.size:
            idx = [int(x) for x in np.unravel_index(int(bad[0]), np.shape(obs))]
            return EnvError(
                f"{head} an observation that is not finite: element {idx} is "
                f"{flat[bad[0]]} ({bad.size} of {flat.size} elements are NaN or inf). NaN or "
                "inf in observations would train into NaN weights; fix the env (or wrap it "
                "to clean its observations)."
            )
        low = np.broadcast_to(self.low, np.shape(obs)).reshape(-1)
        high = np.broadcast_to(self.high, np.shape(obs)).reshape(-1)
        out = np.flatnonzero((flat < low) | (flat > high))
        k = int(out[0]) if out.size else 0
        idx = [int(x) for x in np.unravel_index(k, np.shape(obs))]
        return EnvError(
            f"{head} an observation outside its observation space {self.space}: element "
            f"{idx} is {flat[k]}, not in [{float(low[k])}, {float(high[k])}] ({out.size} of "
            f"{flat.size} elements out of bounds). Fix the env's observation space, or set "
            "`disable_env_checking: True` to accept observations outside the bounds."
        )
