"""Curriculum learning with `env_task_fn` and a `TaskSettableEnv`.

A corridor whose length grows with the task level: the agent starts at the
left end and is rewarded for reaching the right end quickly. After every
training iteration, `env_task_fn` looks at the mean return and moves every
worker's envs to the next level once the current one is mastered.

    python examples/curriculum.py
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from corral.agents.ppo import PPOTrainer
from corral.env.apis.task_settable_env import TaskSettableEnv
from corral.env.env_context import EnvContext

MAX_LEVEL = 4
# Mean return above which a level counts as mastered (the best possible is
# just under 1.0: +1 at the goal minus a small cost per step).
MASTERED = 0.7


class CorridorCurriculum(TaskSettableEnv):
    """Walk right to the end of a corridor of length `4 + 4 * level`."""

    observation_space = gym.spaces.Box(0.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)  # 0: left, 1: right

    def __init__(self, config: EnvContext) -> None:
        self.level = int(config.get("start_level", 0))
        self.pos = 0

    @property
    def length(self) -> int:
        return 4 + 4 * self.level

    def sample_tasks(self, n_tasks: int) -> list[int]:
        return list(np.random.randint(0, MAX_LEVEL + 1, n_tasks))

    def set_task(self, task: int) -> None:
        self.level = int(task)

    def get_task(self) -> int:
        return self.level

    def _obs(self) -> np.ndarray:
        return np.array([self.pos / self.length, self.level / MAX_LEVEL], np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.pos, self.steps = 0, 0
        return self._obs(), {}

    def step(self, action: int):
        self.steps += 1
        self.pos = max(0, self.pos + (1 if action == 1 else -1))
        at_goal = self.pos >= self.length
        reward = 1.0 if at_goal else -0.01
        truncated = self.steps >= 4 * self.length
        return self._obs(), reward, at_goal, truncated, {}


def next_level(train_results: dict, env: CorridorCurriculum, env_ctx: EnvContext) -> int:
    """Raises the level by one once the mean return says the current one is mastered."""
    mastered = train_results["episode_reward_mean"] > MASTERED
    return min(env.get_task() + 1, MAX_LEVEL) if mastered else env.get_task()


def main() -> None:
    trainer = PPOTrainer(
        env=CorridorCurriculum,
        config={
            "env_config": {"start_level": 0},
            "env_task_fn": next_level,
            "num_workers": 1,
            "num_envs_per_worker": 4,
            "rollout_fragment_length": 100,
            "train_batch_size": 400,
            "sgd_minibatch_size": 100,
            "num_sgd_iter": 8,
            "lr": 3e-3,
            "metrics_smoothing_episodes": 10,
            "model": {"fcnet_hiddens": [32]},
            "seed": 0,
        },
    )
    try:
        for _ in range(25):
            result = trainer.train()
            levels = sorted(
                {
                    lvl
                    for envs in trainer.workers.foreach_env(lambda env: env.get_task())
                    for lvl in envs
                }
            )
            print(
                f"iter {result['training_iteration']:2d}  "
                f"return {result['episode_reward_mean']:6.3f}  "
                f"len {result['episode_len_mean']:5.1f}  level(s) now {levels}"
            )
            if levels == [MAX_LEVEL] and result["episode_reward_mean"] > MASTERED:
                print(f"Mastered the last level ({MAX_LEVEL}).")
                break
    finally:
        trainer.stop()


if __name__ == "__main__":
    main()
