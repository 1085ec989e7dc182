"""Batched vector envs: all sub-envs stepped by one call (Gymnasium's native vector envs).

corral's own `VectorEnv` is a list of `gymnasium.Env` objects stepped one after the
other. A *batched* vector env is a `gymnasium.vector.VectorEnv` whose `step` takes
the stacked actions of all its sub-envs and returns stacked arrays: Gymnasium's
numpy-vectorised envs (`gymnasium.make_vec(id, n, vectorization_mode=
"vector_entry_point")`, e.g. CartPole) or EnvPool's C++ thread pool
(`corral.env.envpool_env`). `BatchedVectorEnv` adapts one to the sampler, which
then steps it once per vector step (`SingleAgentSampler` checks for `step_batched`).

Autoreset. Such envs reset a sub-env themselves, and Gymnasium 1.x's default
(`AutoresetMode.NEXT_STEP`, EnvPool's behaviour too) does it one step late: the
step that ends an episode returns its last observation, and the *next* step of
that sub-env ignores its action and returns the first observation of the new
episode with reward 0 and both flags False. That step is no transition: the
sampler ends the episode at the step the env ended it (metrics, callbacks, the
last row's `next_obs`, `terminateds`/`truncateds`), drops the row of the reset
step from the batch, and starts the new episode from the observation it
returned. No episode is lost or merged; a fragment then holds `T * num_envs`
rows minus one per episode start in it (the trainers count the steps they get).

What follows from one call resetting the sub-envs: corral cannot reset one
sub-env at a moment of its choosing, so a hard `horizon`, restarting failed
sub-envs and `remote_worker_envs` are refused (`check_batched_config`), and
exact resumes of unfinished episodes are not offered (a resumed run starts new
episodes).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import gymnasium as gym
import numpy as np

from corral.env.base_env import BaseEnv, sub_environments
from corral.utils.error import EnvError

# The values of the `vectorize_mode` config key.
VECTORIZE_MODES = ("sequential", "native", "envpool")


class SubEnvView:
    """Sub-env `index` of a batched vector env, where corral needs one env object.

    It carries what the sampler, callbacks and error messages read of a sub-env
    (the single spaces, `spec`, `metadata`, `render_mode`); it cannot be reset or
    stepped alone (the vector env resets its sub-envs itself).
    """

    def __init__(self, vector: BatchedVectorEnv, index: int) -> None:
        self.vector = vector
        self.index = index
        self.observation_space: gym.Space = vector.observation_space
        self.action_space: gym.Space = vector.action_space
        self.spec = getattr(vector.vector_env, "spec", None)
        self.metadata: dict = dict(getattr(vector.vector_env, "metadata", {}) or {})
        self.render_mode: str | None = None

    @property
    def unwrapped(self) -> SubEnvView:
        return self

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> Any:
        raise EnvError(
            f"Sub-env {self.index} of the batched vector env {self.vector.name} cannot be reset "
            "alone: the vector env resets its sub-envs itself (autoreset)."
        )

    def step(self, action: Any) -> Any:
        raise EnvError(
            f"Sub-env {self.index} of the batched vector env {self.vector.name} cannot be "
            "stepped alone: step the vector env with the actions of all its sub-envs."
        )

    def render(self) -> None:
        return None

    def close(self) -> None:
        """Nothing to close: `BatchedVectorEnv.stop` closes the vector env."""

    def __repr__(self) -> str:
        return f"SubEnvView({self.vector.name}, index={self.index})"


class InfoRows(Sequence):
    """The per-sub-env info dicts of a vector step, built only for the rows asked for.

    Gymnasium's vector envs return one dict of arrays (`info[key][i]`, with a
    boolean mask `info["_" + key]` saying which sub-envs have the key); EnvPool
    returns plain arrays (and nested dicts of them). Row `i` is sub-env `i`'s dict.
    """

    def __init__(self, info: Mapping[str, Any], num_envs: int) -> None:
        self.info = info
        self.num_envs = num_envs

    def __len__(self) -> int:
        return self.num_envs

    def __getitem__(self, i: Any) -> Any:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(self.num_envs))]
        return _info_row(self.info, int(i))


def _info_row(info: Mapping[str, Any], i: int) -> dict:
    row = {}
    for key, value in info.items():
        if isinstance(key, str) and key.startswith("_"):
            continue
        mask = info.get(f"_{key}")
        if mask is not None and not mask[i]:
            continue
        if isinstance(value, Mapping):
            row[key] = _info_row(value, i)
        else:
            try:
                row[key] = value[i]
            except (TypeError, IndexError):  # a scalar shared by all sub-envs
                row[key] = value
    return row


class BatchedVectorEnv(BaseEnv):
    """A `gymnasium.vector.VectorEnv` (one call steps all sub-envs) for the sampler.

    Args:
        vector_env: the vector env; its `metadata["autoreset_mode"]` must be
            `NEXT_STEP` (Gymnasium 1.x's default, and EnvPool's behaviour).
        name: what error messages call it (default: its spec's id).
        reset_takes_seed: whether `vector_env.reset(seed=...)` seeds it (default:
            yes, but not for EnvPool pools: they take their seed when made).
        channels_last: image observations come channels first (`[C, H, W]`, EnvPool's
            Atari frames) and are handed on channels last (`[H, W, C]`, what corral's
            vision nets and Gymnasium's Atari envs use), as views (no copy).

    Raises:
        ValueError: `vector_env` is not a vector env, or resets in another mode.
    """

    # Read by the sampler: step with `step_batched`, reset with `vector_reset`.
    batched = True
    sub_envs_replayable = False

    def __init__(
        self,
        vector_env: Any,
        name: str | None = None,
        reset_takes_seed: bool | None = None,
        channels_last: bool = False,
    ) -> None:
        if not isinstance(vector_env, gym.vector.VectorEnv):
            raise ValueError(
                f"BatchedVectorEnv needs a gymnasium.vector.VectorEnv, got "
                f"{type(vector_env).__name__}."
            )
        mode = _autoreset_mode(vector_env)
        if mode != "NextStep":
            raise ValueError(
                f"The vector env {type(vector_env).__name__} resets its sub-envs in autoreset mode "
                f"{mode!r}; corral maps Gymnasium's default, AutoresetMode.NEXT_STEP (make it with "
                "autoreset_mode=gymnasium.vector.AutoresetMode.NEXT_STEP)."
            )
        self.vector_env = vector_env
        spec = getattr(vector_env, "spec", None)
        self.name = name or str(getattr(spec, "id", None) or type(vector_env).__name__)
        self.num_envs = int(vector_env.num_envs)
        self.observation_space = _single_space(vector_env, "observation_space")
        self.channels_last = channels_last
        if channels_last:
            self.observation_space = _channels_last_space(self.observation_space)
        self.action_space = _single_space(vector_env, "action_space")
        if reset_takes_seed is None:
            reset_takes_seed = not is_envpool_env(vector_env)
        self.reset_takes_seed = reset_takes_seed
        self.envs = [SubEnvView(self, i) for i in range(self.num_envs)]

    def vector_reset(self, seed: int | None = None) -> np.ndarray:
        """Resets every sub-env; returns the stacked first observations."""
        if self.reset_takes_seed:
            obs, _ = self.vector_env.reset(seed=seed)
        else:
            obs, _ = self.vector_env.reset()
        return self.frames(obs)

    def step_batched(
        self, actions: Any
    ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, InfoRows]:
        """One step of every sub-env: stacked observations, rewards, terminated and
        truncated flags, and the infos (`InfoRows`)."""
        obs, rewards, terminated, truncated, info = self.vector_env.step(actions)
        return self.frames(obs), rewards, terminated, truncated, InfoRows(info, self.num_envs)

    def frames(self, obs: np.ndarray) -> np.ndarray:
        """Stacked observations as handed on: channels last (a view) with `channels_last`."""
        return np.moveaxis(obs, 1, -1) if self.channels_last else obs

    def step_all(self, actions: Sequence[Any]) -> list[tuple]:
        """`step_batched` as one 5-tuple per sub-env (for code written for `VectorEnv`)."""
        obs, rewards, terminated, truncated, infos = self.step_batched(np.asarray(actions))
        return [
            (obs[i], rewards[i], bool(terminated[i]), bool(truncated[i]), infos[i])
            for i in range(self.num_envs)
        ]

    def get_sub_environments(self, as_dict: bool = False) -> Any:
        """One `SubEnvView` per sub-env (`{env_id: view}` with `as_dict`)."""
        return sub_environments(self.envs, as_dict)

    def try_render(self, env_id: int | None = None) -> Any:
        return None

    def stop(self) -> None:
        """Closes the vector env."""
        self.vector_env.close()


def is_envpool_env(env: Any) -> bool:
    """Whether `env` is an EnvPool pool (its `reset` ignores a seed)."""
    return any(c.__module__.startswith("envpool") for c in type(env).__mro__)


def has_image_frames(vector_env: Any) -> bool:
    """Whether a vector env's observations are `[C, H, W]` images (EnvPool's Atari
    frames, handed on channels last)."""
    return len(_single_space(vector_env, "observation_space").shape or ()) == 3


def _channels_last_space(space: gym.Space) -> gym.Space:
    if not isinstance(space, gym.spaces.Box) or len(space.shape) != 3:
        raise ValueError(f"channels_last needs [C, H, W] image observations, got {space}.")
    return gym.spaces.Box(
        np.moveaxis(space.low, 0, -1), np.moveaxis(space.high, 0, -1), dtype=space.dtype
    )


def _autoreset_mode(vector_env: Any) -> str:
    mode = (getattr(vector_env, "metadata", None) or {}).get("autoreset_mode", "NextStep")
    return str(getattr(mode, "value", mode))


def _single_space(vector_env: Any, name: str) -> gym.Space:
    """A sub-env's space (Gymnasium's vector envs call it `single_<name>`)."""
    space = getattr(vector_env, f"single_{name}", None)
    return space if space is not None else getattr(vector_env, name)


def make_native_vector_env(env_id: Any, num_envs: int, env_config: Mapping[str, Any]) -> Any:
    """`gymnasium.make_vec(env_id, num_envs, vectorization_mode="vector_entry_point")`,
    with `env_config` as keyword arguments (as `gym.make` gets them).

    Raises:
        ValueError: `env_id` is not a Gymnasium id, or has no vector entry point.
    """
    if not isinstance(env_id, str) or env_id not in gym.registry:
        raise ValueError(
            f"vectorize_mode='native' needs `env` to be a registered Gymnasium id with a "
            f"vector entry point (e.g. 'CartPole-v1'), got {env_id!r}; or let the env creator "
            "return a gymnasium.vector.VectorEnv."
        )
    if gym.registry[env_id].vector_entry_point is None:
        raise ValueError(
            f"vectorize_mode='native': Gymnasium's {env_id!r} has no vector entry point (no "
            "numpy-batched implementation); use vectorize_mode='sequential' or 'envpool'."
        )
    return gym.make_vec(
        env_id, num_envs=num_envs, vectorization_mode="vector_entry_point", **dict(env_config)
    )


def check_batched_config(config: Mapping[str, Any], what: str, resets_one: bool = False) -> None:
    """Refuses the settings a vector env that steps its sub-envs itself cannot honour
    (see the module doc).

    Args:
        config: the worker's config.
        what: how the error names the env (e.g. "vectorize_mode='native'").
        resets_one: the vector env resets one sub-env on request (RLlib's `VectorEnv`:
            `reset_at`), so a hard horizon works.
    """
    problems = []
    if config.get("horizon") and not config.get("soft_horizon") and not resets_one:
        problems.append(
            f"horizon={config['horizon']!r} (a hard horizon resets one sub-env; use the env's "
            "own time limit, or soft_horizon=True)"
        )
    if config.get("restart_failed_sub_environments"):
        problems.append("restart_failed_sub_environments=True (sub-envs cannot be rebuilt alone)")
    if config.get("remote_worker_envs"):
        problems.append("remote_worker_envs=True (the vector env steps its sub-envs itself)")
    if config.get("record_env"):
        problems.append("record_env (no sub-env renders alone)")
    if problems:
        raise ValueError(
            f"{what}: a vector env stepping its sub-envs itself does not support "
            + "; ".join(problems)
        )


def vectorize_mode(config: Mapping[str, Any]) -> str:
    """The config's `vectorize_mode`, checked."""
    mode = config.get("vectorize_mode") or "sequential"
    if mode not in VECTORIZE_MODES:
        raise ValueError(f"vectorize_mode={mode!r}: expected one of {VECTORIZE_MODES}.")
    return str(mode)


def batched_worker_env(
    worker: Any, num_envs: int, mode: str | None = None, vector: Any = None
) -> BatchedVectorEnv:
    """A rollout worker's batched vector env.

    Args:
        worker: the `RolloutWorker` (its config, seed, env context, callbacks).
        num_envs: `num_envs_per_worker` (1, or the vector env's number of sub-envs).
        mode: `vectorize_mode` "native" (`gymnasium.make_vec`) or "envpool": the vector
            env is made from the `env` id and `env_config`.
        vector: a `gymnasium.vector.VectorEnv` the env creator returned (no `mode`).
    """
    config = worker.config
    what = f"vectorize_mode={mode!r}" if mode else "an env creator returning a VectorEnv"
    check_batched_config(config, what)
    env_id, env_config = config.get("env"), config.get("env_config") or {}
    if mode == "native":
        vector = make_native_vector_env(env_id, num_envs, env_config)
    elif mode == "envpool":
        from corral.env.envpool_env import make_envpool_env, make_envpool_splits

        splits = int(config.get("env_splits") or 1)
        if splits > 1:  # double-buffered: groups step in turn (`EnvPoolSplits`)
            split = make_envpool_splits(env_id, num_envs, splits, worker.seed, env_config)
            _announce_sub_envs(worker, split)
            return split
        vector = make_envpool_env(env_id, num_envs, worker.seed, env_config)
    if num_envs not in (1, vector.num_envs):
        vector.close()
        raise ValueError(
            f"{what}: the vector env has {vector.num_envs} sub-envs, but "
            f"num_envs_per_worker={num_envs}; set it to {vector.num_envs} or 1."
        )
    if mode == "envpool":  # EnvPool's frames are [C, H, W]: corral's vision nets want [H, W, C]
        batched = BatchedVectorEnv(
            vector, name=f"envpool:{env_id}", channels_last=has_image_frames(vector)
        )
    else:
        batched = BatchedVectorEnv(vector)
    if mode is None:  # the worker reported the creator's vector env when it was made
        return batched
    _announce_sub_envs(worker, batched)
    return batched


def _announce_sub_envs(worker: Any, batched: BatchedVectorEnv) -> None:
    """`on_sub_environment_created` for each sub-env of a vector env the worker made."""
    for i, env in enumerate(batched.envs):
        ctx = worker.env_context.copy_with_overrides(vector_index=i)
        worker.callbacks.on_sub_environment_created(
            worker=worker, sub_environment=env, env_context=ctx
        )
