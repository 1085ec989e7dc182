"""RLlib's `VectorEnv` (n sub-envs whose step is one call), and corral's list of Gymnasium envs.

Three classes, as in RLlib 1.x:

- `VectorEnv`: the interface a user subclasses (`vector_reset`, `reset_at`,
  `vector_step`) when the sub-envs step together (one simulator for all of them, say).
  An env creator may return one; the rollout worker then samples from it as it is
  (`num_envs_per_worker` is its `num_envs`).
- `VectorizedGymEnv` (RLlib's `_VectorizedGymEnv`): `num_envs_per_worker` Gymnasium
  envs in a list, what `VectorEnv.vectorize_gym_envs` makes. The sampler resets and
  steps each sub-env itself.
- `VectorEnvWrapper`: a user's `VectorEnv` as the `BaseEnv` the sampler talks to.

`vector_step` returns RLlib 1.x's four lists `(obs, rewards, dones, infos)`: a done whose
info holds `"TimeLimit.truncated": True` ended by a time limit (gym's convention), any
other done ended the episode. A subclass may also return Gymnasium's five lists
`(obs, rewards, terminateds, truncateds, infos)`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

import gymnasium as gym

from corral.env.base_env import BaseEnv, sub_environments
from corral.utils.deprecation import deprecation_warning
from corral.utils.error import EnvError

# The info key that marks an old-API done as a truncation (gym's TimeLimit wrapper).
TRUNCATED_INFO_KEY = "TimeLimit.truncated"


class VectorEnv:
    """`num_envs` sub-envs with the same spaces, reset and stepped by the subclass.

    Args:
        observation_space: one sub-env's observation space.
        action_space: one sub-env's action space.
        num_envs: how many sub-envs it steps.
    """

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, num_envs: int):
        self.observation_space = observation_space
        self.action_space = action_space
        self.num_envs = num_envs

    @staticmethod
    def vectorize_gym_envs(
        make_env: Callable[[int], gym.Env] | None = None,
        existing_envs: Sequence[gym.Env] | None = None,
        num_envs: int = 1,
        action_space: gym.Space | None = None,
        observation_space: gym.Space | None = None,
        restart_failed_sub_environments: bool = False,
        env_config: Any = None,
        policy_config: Any = None,
    ) -> VectorizedGymEnv:
        """`existing_envs` plus `make_env(vector_index)` for the rest, up to `num_envs`.

        `restart_failed_sub_environments`, `env_config` and `policy_config` are accepted
        for RLlib 1.x's signature: restarting failed sub-envs is the sampler's job in
        corral (the config key of the same name).
        """
        envs = list(existing_envs or ())
        if len(envs) < num_envs and make_env is None:
            raise ValueError(
                f"vectorize_gym_envs: {len(envs)} existing envs for num_envs={num_envs} and no "
                "make_env to build the rest."
            )
        while len(envs) < num_envs:
            envs.append(make_env(len(envs)))  # type: ignore[misc]
        return VectorizedGymEnv(envs, observation_space, action_space)

    @staticmethod
    def wrap(*args: Any, **kwargs: Any) -> VectorizedGymEnv:
        """RLlib's older name of `vectorize_gym_envs` (deprecated in 1.13)."""
        deprecation_warning("VectorEnv.wrap()", "VectorEnv.vectorize_gym_envs()")
        return VectorEnv.vectorize_gym_envs(*args, **kwargs)

    def get_unwrapped(self) -> list[Any]:
        """RLlib's older name of `get_sub_environments` (deprecated in 1.13)."""
        return self.get_sub_environments()

    def vector_reset(self) -> list[Any]:
        """Resets every sub-env; returns their first observations."""
        raise NotImplementedError

    def reset_at(self, index: int | None = None) -> Any:
        """Resets sub-env `index`; returns its first observation."""
        raise NotImplementedError

    def restart_at(self, index: int | None = None) -> None:
        """Closes and rebuilds sub-env `index` (optional)."""
        raise NotImplementedError

    def vector_step(self, actions: Sequence[Any]) -> tuple[list, ...]:
        """Steps every sub-env with its action: `(obs, rewards, dones, infos)` lists."""
        raise NotImplementedError

    def get_sub_environments(self) -> list[Any]:
        """The sub-env objects, where there are such (default: none)."""
        return []

    def try_render_at(self, index: int | None = None) -> Any:
        """Renders sub-env `index` if it can (default: nothing)."""
        return None

    def to_base_env(
        self,
        make_env: Callable[[int], Any] | None = None,
        num_envs: int = 1,
        remote_envs: bool = False,
        remote_env_batch_wait_ms: int = 0,
        restart_failed_sub_environments: bool = False,
    ) -> BaseEnv:
        """This vector env as a `BaseEnv` (the arguments are RLlib's and unused here: the
        vector env already holds its sub-envs)."""
        return VectorEnvWrapper(self)


class VectorizedGymEnv(VectorEnv, BaseEnv):
    """A list of `gymnasium.Env` sub-envs with the same spaces (old gym API envs given
    to it are converted, as the workers convert them: `ensure_gymnasium_env`).

    The sampler resets and steps each sub-env itself (`get_sub_environments`, `step_all`);
    there is no auto-reset, so the sampler decides when a sub-env starts a new episode
    (horizons, soft horizons). The `VectorEnv` methods serve code written for RLlib.
    """

    def __init__(
        self,
        envs: Sequence[gym.Env],
        observation_space: gym.Space | None = None,
        action_space: gym.Space | None = None,
    ) -> None:
        from corral.env.gym_compat import ensure_gymnasium_env

        if not envs:
            raise ValueError("A vector env needs at least one sub-environment, got none.")
        self.envs = [ensure_gymnasium_env(env) for env in envs]
        super().__init__(
            observation_space or self.envs[0].observation_space,
            action_space or self.envs[0].action_space,
            len(self.envs),
        )

    def vector_reset(self, *, seeds: Sequence[int | None] | None = None) -> list[Any]:
        seeds = seeds or [None] * self.num_envs
        return [env.reset(seed=s)[0] for env, s in zip(self.envs, seeds)]

    def reset_at(self, index: int | None = None, *, seed: int | None = None) -> Any:
        return self.envs[index or 0].reset(seed=seed)[0]

    def vector_step(self, actions: Sequence[Any]) -> tuple[list, list, list, list]:
        """RLlib's four lists; a truncated episode's info gets `"TimeLimit.truncated"`."""
        obs, rewards, dones, infos = [], [], [], []
        for o, r, terminated, truncated, info in self.step_all(actions):
            obs.append(o)
            rewards.append(r)
            dones.append(bool(terminated or truncated))
            infos.append(
                {**info, TRUNCATED_INFO_KEY: True} if truncated and not terminated else info
            )
        return obs, rewards, dones, infos

    def step_all(self, actions: Sequence[Any]) -> list[tuple]:
        """One `env.step` per sub-env: a list of `(obs, reward, terminated, truncated,
        info)`. In-process sub-envs step one after the other (the sampler's fast path);
        `RemoteVectorEnv` steps its processes in parallel."""
        return [env.step(a) for env, a in zip(self.envs, actions)]

    def get_sub_environments(self, as_dict: bool = False) -> Any:
        return sub_environments(self.envs, as_dict)

    def try_render_at(self, index: int | None = None) -> Any:
        return self.try_render(index)

    def to_base_env(self, *args: Any, **kwargs: Any) -> BaseEnv:
        return self

    @property
    def vector_env(self) -> VectorizedGymEnv:
        """RLlib 1.13's `async_env.vector_env` (the `VectorEnv` inside the worker's
        `BaseEnv`): this env itself, which is both."""
        return self


class VectorSubEnv:
    """Sub-env `index` of a user's `VectorEnv`, where corral needs one env object.

    `reset()` is the vector env's `reset_at(index)`; a sub-env does not step alone
    (`VectorEnvWrapper.step_all` steps them together). Other attributes are read from
    the vector env's own sub-env object at `index`, where it has one.
    """

    def __init__(self, wrapper: VectorEnvWrapper, index: int) -> None:
        self.wrapper = wrapper
        self.index = index
        self.observation_space: gym.Space = wrapper.observation_space
        self.action_space: gym.Space = wrapper.action_space
        self.render_mode: str | None = None

    def reset(self, *, seed: int | None = None, options: dict | None = None) -> tuple[Any, dict]:
        """`reset_at(index)`; RLlib's `VectorEnv` takes no seed (it seeds itself)."""
        return self.wrapper.vector_env.reset_at(self.index), {}

    def step(self, action: Any) -> tuple:
        raise EnvError(
            f"Sub-env {self.index} of {self.wrapper.name} steps only together with the others "
            "(its vector_step); step the VectorEnv."
        )

    def render(self) -> Any:
        return self.wrapper.vector_env.try_render_at(self.index)

    def close(self) -> None:
        """Nothing: the vector env closes its sub-envs (`VectorEnvWrapper.stop`)."""

    def __getattr__(self, name: str) -> Any:
        # Only called for attributes this view lacks: the vector env's own sub-env's.
        if name.startswith("__"):
            raise AttributeError(name)
        subs = self.wrapper.vector_env.get_sub_environments()
        if len(subs) == self.wrapper.num_envs:
            return getattr(subs[self.index], name)
        raise AttributeError(
            f"{name!r}: sub-env {self.index} of {self.wrapper.name} is a view (the VectorEnv "
            "lists no sub-env objects in get_sub_environments())"
        )

    def __repr__(self) -> str:
        return f"VectorSubEnv({self.wrapper.name}, index={self.index})"


class VectorEnvWrapper(BaseEnv):
    """A user's `VectorEnv` as the `BaseEnv` a sampler steps.

    `get_sub_environments()` returns one `VectorSubEnv` view per sub-env (they forward
    attribute reads to the vector env's own sub-envs, where it lists them). Its sub-envs
    cannot be replayed one by one, so a checkpoint's unfinished episodes start afresh on
    restore.

    Raises:
        EnvError: the vector env declares no sub-envs.
    """

    # Read by the sampler: the sub-envs' episodes cannot be replayed one by one.
    sub_envs_replayable = False

    def __init__(self, vector_env: VectorEnv) -> None:
        from corral.env.gym_compat import convert_space

        self.vector_env = vector_env
        self.name = type(vector_env).__name__
        self.num_envs = int(getattr(vector_env, "num_envs", 0) or 0)
        if self.num_envs < 1:
            raise EnvError(
                f"VectorEnv {self.name} has num_envs={self.num_envs!r}; pass num_envs >= 1 to "
                "VectorEnv.__init__(observation_space, action_space, num_envs)."
            )
        # Old `gym.spaces` (RLlib 1.x code) become Gymnasium's.
        self.observation_space = convert_space(vector_env.observation_space)
        self.action_space = convert_space(vector_env.action_space)
        self.envs = [VectorSubEnv(self, i) for i in range(self.num_envs)]

    def step_all(self, actions: Sequence[Any]) -> list[tuple]:
        """`vector_step(actions)` as one Gymnasium 5-tuple per sub-env."""
        obs, rewards, terminateds, truncateds, infos = self._step(actions)
        return list(zip(obs, rewards, terminateds, truncateds, infos))

    def _step(self, actions: Sequence[Any]) -> tuple[list, list, list, list, list]:
        out = self.vector_env.vector_step(list(actions))
        n = self.num_envs
        if (
            not isinstance(out, (tuple, list))
            or len(out) not in (4, 5)
            or any(len(column) != n for column in out)
        ):
            raise EnvError(
                f"VectorEnv {self.name}: vector_step(actions) returned {_shape_of(out)}; "
                f"expected four lists of {n} (obs, rewards, dones, infos), or Gymnasium's five "
                "(obs, rewards, terminateds, truncateds, infos)."
            )
        if len(out) == 5:
            obs, rewards, terminateds, truncateds, infos = (list(c) for c in out)
            return (
                obs,
                rewards,
                [bool(t) for t in terminateds],
                [bool(t) for t in truncateds],
                infos,
            )
        obs, rewards, dones, infos = (list(c) for c in out)
        infos = [info if isinstance(info, dict) else {} for info in infos]
        truncateds = [bool(d) and bool(i.get(TRUNCATED_INFO_KEY)) for d, i in zip(dones, infos)]
        terminateds = [bool(d) and not t for d, t in zip(dones, truncateds)]
        return obs, rewards, terminateds, truncateds, infos

    def get_sub_environments(self, as_dict: bool = False) -> Any:
        """One `VectorSubEnv` per sub-env (`{env_id: view}` with `as_dict`)."""
        return sub_environments(self.envs, as_dict)

    def worker_env(self) -> VectorEnv:
        return self.vector_env

    def try_render(self, env_id: int | None = None) -> Any:
        return self.vector_env.try_render_at(env_id or 0)

    def stop(self) -> None:
        """Closes the vector env's own sub-envs (each once) and the vector env."""
        seen: set[int] = set()
        for env in self.vector_env.get_sub_environments():
            if id(env) not in seen and hasattr(env, "close"):
                seen.add(id(env))
                env.close()
        close = getattr(self.vector_env, "close", None)
        if callable(close):
            close()

    # `poll` (RLlib's interface): the vector env's own calls.
    def _poll_reset_all(self) -> list[Any]:
        return list(self.vector_env.vector_reset())

    def _poll_reset_at(self, index: int) -> Any:
        return self.vector_env.reset_at(index)

    def _poll_step(self, actions: list[Any]) -> tuple[list, list, list, list]:
        obs, rewards, terminateds, truncateds, infos = self._step(actions)
        return obs, rewards, [a or b for a, b in zip(terminateds, truncateds)], infos


def user_vector_worker_env(
    config: Mapping[str, Any], vector_env: VectorEnv, num_envs: int
) -> BaseEnv:
    """A rollout worker's env when its env creator returned a `VectorEnv`.

    Args:
        config: the worker's config (settings the vector env cannot honour are refused).
        vector_env: the creator's vector env.
        num_envs: `num_envs_per_worker`: 1 or the vector env's `num_envs`.
    """
    from corral.env.native_vector_env import check_batched_config

    what = f"the env creator's VectorEnv {type(vector_env).__name__}"
    check_batched_config(config, what, resets_one=True)
    if isinstance(vector_env, VectorizedGymEnv):
        return vector_env
    wrapper = VectorEnvWrapper(vector_env)
    if num_envs not in (1, wrapper.num_envs):
        raise ValueError(
            f"{what} has num_envs={wrapper.num_envs}, but num_envs_per_worker={num_envs}; set it "
            f"to {wrapper.num_envs} or 1."
        )
    return wrapper


def _shape_of(out: Any) -> str:
    if isinstance(out, (tuple, list)):
        lengths = [len(c) if hasattr(c, "__len__") else type(c).__name__ for c in out]
        return f"a {type(out).__name__} of {len(out)} (lengths {lengths})"
    return type(out).__name__
