"""Old-API envs (gym <= 0.25's `reset() -> obs`, 4-tuple steps) converted by corral, in
tests that need no `gym` installed: the adapters themselves, and old-API subclasses of
corral's Gymnasium-based classes."""

from __future__ import annotations

import warnings

import gymnasium
import numpy as np
import pytest

from corral.env.apis.task_settable_env import TaskSettableEnv
from corral.env.gym_compat import OldAPIEnv, OldAPIMultiAgentEnv, ensure_gymnasium_env


@pytest.mark.parametrize("adapter", [OldAPIEnv, OldAPIMultiAgentEnv])
def test_old_api_adapters_seed_close_and_reach_the_old_env(adapter):
    class Recording:
        observation_space = gymnasium.spaces.Discrete(2)
        action_space = gymnasium.spaces.Discrete(2)
        level = 7

        def __init__(self):
            self.calls = []

        def seed(self, seed):
            self.calls.append(("seed", seed))

        def reset(self):
            self.calls.append(("reset",))
            return {0: 0} if adapter is OldAPIMultiAgentEnv else 0

        def close(self):
            self.calls.append(("close",))

    old = Recording()
    env = adapter(old)
    env.reset(seed=3)
    env.reset()  # no seed: the old env is not re-seeded
    env.close()
    assert old.calls == [("seed", 3), ("reset",), ("reset",), ("close",)]
    assert env.unwrapped is old and env.level == 7
    with pytest.raises(AttributeError):
        env.no_such_attribute  # noqa: B018


class OldLevels(TaskSettableEnv):
    """RLlib 1.x's curriculum env shape: a `TaskSettableEnv` subclass (a Gymnasium env
    class here) that kept the old API: `reset() -> obs`, 4-tuple steps."""

    def __init__(self, config=None):
        self.level = 1
        self.observation_space = gymnasium.spaces.Box(-1.0, 1.0, (1,), np.float32)
        self.action_space = gymnasium.spaces.Discrete(2)
        self.t = 0

    def reset(self):
        self.t = 0
        return np.zeros(1, np.float32)

    def step(self, action):
        self.t += 1
        return np.zeros(1, np.float32), 1.0, self.t >= 2 * self.level, {}

    def sample_tasks(self, n_tasks):
        return [1] * n_tasks

    def get_task(self):
        return self.level

    def set_task(self, task):
        self.level = task


def test_old_api_subclass_of_a_gymnasium_based_class_is_converted_and_trains():
    with pytest.warns(UserWarning, match="OldLevels"):
        env = ensure_gymnasium_env(OldLevels())
    assert isinstance(env, OldAPIEnv)
    assert env.step(0) == (np.zeros(1, np.float32), 1.0, False, False, {})
    from corral.agents.pg import PGTrainer

    config = {"num_workers": 0, "rollout_fragment_length": 12, "train_batch_size": 12}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        trainer = PGTrainer(
            config={**config, "env_task_fn": lambda result, env, ctx: 3}, env=OldLevels
        )
    try:
        # Level 1's episodes last 2 steps; env_task_fn moves every env to level 3 (6 steps).
        assert trainer.train()["episode_len_mean"] == 2
        assert trainer.workers.foreach_env(lambda env: env.get_task()) == [[3]]
        result = trainer.train()
        assert result["episodes_this_iter"] == 2
        assert result["hist_stats"]["episode_lengths"][-2:] == [6, 6]
    finally:
        trainer.stop()
