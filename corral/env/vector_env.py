"""`VectorEnv`: n Gymnasium envs stepped as one."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import gymnasium as gym

from corral.env.base_env import BaseEnv


class VectorEnv(BaseEnv):
    """A fixed list of sub-envs with the same spaces, stepped in lockstep.

    Unlike `gymnasium.vector`, there is no auto-reset: the sampler decides when
    a sub-env is reset (horizons, soft horizons), so this class stays a thin
    list wrapper.
    """

    def __init__(
        self,
        envs: Sequence[gym.Env],
        observation_space: gym.Space | None = None,
        action_space: gym.Space | None = None,
    ) -> None:
        if not envs:
            raise ValueError("VectorEnv needs at least one sub-environment, got none.")
        self.envs = list(envs)
        self.num_envs = len(self.envs)
        self.observation_space = observation_space or self.envs[0].observation_space
        self.action_space = action_space or self.envs[0].action_space

    @classmethod
    def vectorize_gym_envs(
        cls,
        make_env: Callable[[int], gym.Env],
        num_envs: int,
        existing_envs: Sequence[gym.Env] = (),
    ) -> VectorEnv:
        """Builds a vector from `existing_envs` plus `make_env(i)` for the rest."""
        envs = list(existing_envs)
        while len(envs) < num_envs:
            envs.append(make_env(len(envs)))
        return cls(envs)

    def vector_reset(self, *, seeds: Sequence[int | None] | None = None) -> list[Any]:
        seeds = seeds or [None] * self.num_envs
        return [env.reset(seed=s)[0] for env, s in zip(self.envs, seeds)]

    def reset_at(self, index: int, *, seed: int | None = None) -> tuple[Any, dict]:
        return self.envs[index].reset(seed=seed)

    def vector_step(self, actions: Sequence[Any]) -> tuple[list, list, list, list, list]:
        obs, rewards, terminateds, truncateds, infos = [], [], [], [], []
        for env, action in zip(self.envs, actions):
            o, r, te, tr, i = env.step(action)
            obs.append(o)
            rewards.append(r)
            terminateds.append(te)
            truncateds.append(tr)
            infos.append(i)
        return obs, rewards, terminateds, truncateds, infos

    def step_all(self, actions: Sequence[Any]) -> list[tuple]:
        """One `env.step` per sub-env: a list of `(obs, reward, terminated, truncated,
        info)`. In-process sub-envs step one after the other (the sampler's fast path);
        `RemoteVectorEnv` steps its processes in parallel."""
        return [env.step(a) for env, a in zip(self.envs, actions)]

    def get_sub_environments(self) -> list[gym.Env]:
        return self.envs
