"""`BaseEnv`: the vectorised interface the sampler talks to."""

from __future__ import annotations

from typing import Any


class BaseEnv:
    """A batch of sub-environments stepped together by one rollout worker.

    Callbacks receive the worker's `BaseEnv` as `base_env`; the underlying
    Gymnasium envs are reachable with `get_sub_environments()`.
    """

    num_envs: int = 1

    def get_sub_environments(self) -> list[Any]:
        """The individual sub-environments (e.g. `gymnasium.Env` objects)."""
        raise NotImplementedError

    def step_all(self, actions: list[Any]) -> list[tuple]:
        """Steps each sub-env with its action; returns their 5-tuples in order."""
        return [env.step(a) for env, a in zip(self.get_sub_environments(), actions)]

    def try_render(self, env_id: int | None = None) -> Any:
        """Renders one sub-env if it supports rendering (else returns None)."""
        envs = self.get_sub_environments()
        if not envs:
            return None
        env = envs[env_id or 0]
        return env.render() if hasattr(env, "render") else None

    def stop(self) -> None:
        """Closes every sub-environment."""
        for env in self.get_sub_environments():
            close = getattr(env, "close", None)
            if close is not None:
                close()
