"""Envs whose task can be changed from outside (curriculum learning)."""

from __future__ import annotations

from typing import Any

import gymnasium as gym

# What a task is depends on the env (an int, a dict of parameters, ...): RLlib's alias.
TaskType = Any


class TaskSettableEnv(gym.Env):
    """An env with a task that the trainer's `env_task_fn` can change.

    Subclasses implement `sample_tasks`, `set_task` and `get_task`.
    """

    def sample_tasks(self, n_tasks: int) -> list[Any]:
        """Returns `n_tasks` tasks drawn from this env's task distribution."""
        raise NotImplementedError

    def set_task(self, task: Any) -> None:
        """Switches the env to `task` (takes effect at the next reset)."""
        raise NotImplementedError

    def get_task(self) -> Any:
        """Returns the task the env is currently set to."""
        raise NotImplementedError
