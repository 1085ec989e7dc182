"""2-D point navigation to a hidden goal: a small meta-learning env (a `TaskSettableEnv`).

The 2-D navigation task of Finn, Abbeel & Levine 2017 (MAML, arXiv:1703.03400, sec. 5.3):
a point starts at the origin and moves by its action each step; the task is the goal
position, which the observation does not show, so a policy can only find the goal from
the rewards it gets: what an inner adaptation step learns. Registered as
``"Navigation2D"``; numpy only.
"""

from __future__ import annotations

import math
from typing import Any

import gymnasium as gym
import numpy as np

from corral.env.apis.task_settable_env import TaskSettableEnv

# A task: the goal's (x, y) (a tuple, so that tasks compare with == and travel as JSON).
Goal = tuple[float, float]


class Navigation2DEnv(TaskSettableEnv):
    """A point in the plane that must reach a goal it cannot see.

    Observation: the point's position ``(x, y)`` (float32). Action: ``Box(-1, 1, (2,))``;
    the point moves by ``max_step`` times the action (clipped to the box) per axis.
    Reward: minus the distance to the goal after the move. An episode starts at the origin
    and terminates within ``goal_radius`` of the goal, or is truncated after ``horizon``
    steps. Tasks (`sample_tasks`) are goals drawn uniformly from the square
    ``[-goal_range, goal_range]^2`` with the env's ``np_random`` (seeded by
    ``reset(seed=...)``). `reward` and `done` give the rewards and ends of a batch of
    transitions, for model-based algorithms (MB-MPO).

    Args:
        config: the env config (an `EnvContext` or dict), keys (defaults in brackets):
            ``horizon`` [100] steps per episode (the paper's), ``max_step`` [0.1] largest
            move per axis, ``goal_range`` [0.5] half-width of the goal square,
            ``goal_radius`` [0.01] distance that counts as arrived, ``goal`` [(0.25, 0.25)]
            the first task.

    Raises:
        ValueError: a config value out of range (named with the value).
    """

    metadata = {"render_modes": []}

    def __init__(self, config: dict | None = None) -> None:
        config = dict(config or {})
        self.horizon = _positive(config, "horizon", 100, integer=True)
        self.max_step = _positive(config, "max_step", 0.1)
        self.goal_range = _positive(config, "goal_range", 0.5)
        self.goal_radius = _positive(config, "goal_radius", 0.01)
        self.observation_space = gym.spaces.Box(-np.inf, np.inf, (2,), np.float32)
        self.action_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.goal = np.zeros(2)
        self.set_task(config.get("goal", (0.25, 0.25)))
        self.position = np.zeros(2)
        self.steps = 0

    # -- TaskSettableEnv ----------------------------------------------------------

    def sample_tasks(self, n_tasks: int) -> list[Goal]:
        """`n_tasks` goals drawn uniformly from ``[-goal_range, goal_range]^2``."""
        goals = self.np_random.uniform(-self.goal_range, self.goal_range, size=(n_tasks, 2))
        return [(float(x), float(y)) for x, y in goals]

    def set_task(self, task: Any) -> None:
        """Sets the goal (any pair of finite numbers); rewards use it from now on."""
        goal = np.asarray(task, dtype=np.float64)
        if goal.shape != (2,) or not np.all(np.isfinite(goal)):
            raise ValueError(f"A Navigation2D task is a finite (x, y) goal, got {task!r}.")
        self.goal = goal

    def get_task(self) -> Goal:
        """The current goal."""
        return (float(self.goal[0]), float(self.goal[1]))

    # -- gymnasium.Env ------------------------------------------------------------

    def reset(
        self, *, seed: int | None = None, options: dict | None = None
    ) -> tuple[np.ndarray, dict]:
        super().reset(seed=seed)
        self.position = np.zeros(2)
        self.steps = 0
        return self.position.astype(np.float32), {}

    def step(self, action: Any) -> tuple[np.ndarray, float, bool, bool, dict]:
        move = np.clip(np.asarray(action, dtype=np.float64).reshape(2), -1.0, 1.0)
        self.position = self.position + self.max_step * move
        self.steps += 1
        distance = float(np.linalg.norm(self.position - self.goal))
        terminated = distance < self.goal_radius
        truncated = not terminated and self.steps >= self.horizon
        return self.position.astype(np.float32), -distance, terminated, truncated, {}

    # -- the batched reward function of model-based algorithms (MB-MPO) ---------------

    def reward(self, obs: np.ndarray, action: np.ndarray, obs_next: np.ndarray) -> np.ndarray:
        """Minus the distance of each next position (a row of `obs_next`) to the goal."""
        return -self._distances(obs_next)

    def done(self, obs_next: np.ndarray) -> np.ndarray:
        """Whether each next position is within ``goal_radius`` of the goal."""
        return self._distances(obs_next) < self.goal_radius

    def _distances(self, positions: np.ndarray) -> np.ndarray:
        return np.linalg.norm(np.asarray(positions, np.float64) - self.goal, axis=-1)


def _positive(config: dict, key: str, default: float, integer: bool = False) -> Any:
    value = config.get(key, default)
    valid = isinstance(value, (int, float)) and not isinstance(value, bool)
    if valid and integer:
        valid = float(value).is_integer()
    if not valid or not math.isfinite(value) or value <= 0:
        kind = "a positive integer" if integer else "a positive number"
        raise ValueError(f"Navigation2D's `{key}` must be {kind}, got {value!r}.")
    return int(value) if integer else float(value)
