"""Navigation2D: a point moves by its (clipped) action towards a hidden goal, the task."""

from __future__ import annotations

import numpy as np
import pytest

from corral.env.apis.task_settable_env import TaskSettableEnv
from corral.env.env_context import EnvContext
from corral.env.navigation_2d import Navigation2DEnv
from corral.env.utils import make_env_creator


def test_moves_rewards_and_ends():
    env = Navigation2DEnv({"horizon": 5, "max_step": 0.1, "goal": (0.3, 0.0)})
    obs, info = env.reset(seed=0)
    assert env.observation_space.contains(obs) and np.all(obs == 0) and info == {}
    obs, reward, terminated, truncated, _ = env.step(np.array([1.0, 0.0], np.float32))
    np.testing.assert_allclose(obs, [0.1, 0.0], atol=1e-7)
    assert reward == pytest.approx(-0.2)
    assert not (terminated or truncated)
    # Actions are clipped to [-1, 1]: at most max_step per axis.
    obs, reward, *_ = env.step(np.array([5.0, -3.0]))
    np.testing.assert_allclose(obs, [0.2, -0.1], atol=1e-7)
    assert reward == pytest.approx(-np.hypot(0.1, 0.1))
    _, _, terminated, truncated, _ = env.step(np.array([1.0, 1.0]))
    assert terminated and not truncated  # at the goal (within goal_radius)
    env.reset()
    for _ in range(4):
        assert not any(env.step(np.zeros(2))[2:4])
    assert env.step(np.zeros(2))[2:4] == (False, True)  # the horizon


def test_tasks_are_goals():
    env = Navigation2DEnv(EnvContext({"goal_range": 0.2}, worker_index=1))
    assert isinstance(env, TaskSettableEnv)
    assert env.get_task() == (0.25, 0.25)
    env.reset(seed=3)
    tasks = env.sample_tasks(50)
    assert len(set(tasks)) == 50
    assert all(isinstance(t, tuple) and max(map(abs, t)) <= 0.2 for t in tasks)
    env.reset(seed=3)
    assert env.sample_tasks(50) == tasks  # seeded by reset(seed=...)
    env.set_task(tasks[0])
    assert env.get_task() == tasks[0]
    env.reset()
    reward = env.step(np.zeros(2))[1]
    assert reward == pytest.approx(-np.hypot(*tasks[0]))
    with pytest.raises(ValueError, match=r"finite \(x, y\) goal, got \(1.0, nan\)"):
        env.set_task((1.0, float("nan")))


@pytest.mark.parametrize(
    ("config", "match"),
    [
        ({"horizon": 0}, "`horizon` must be a positive integer, got 0"),
        ({"horizon": 2.5}, "`horizon` must be a positive integer, got 2.5"),
        ({"max_step": -0.1}, "`max_step` must be a positive number, got -0.1"),
        ({"goal_range": "big"}, "`goal_range` must be a positive number, got 'big'"),
    ],
)
def test_bad_config_names_the_value(config, match):
    with pytest.raises(ValueError, match=match):
        Navigation2DEnv(config)


def test_registered_by_name():
    env = make_env_creator("Navigation2D")(EnvContext({"horizon": 7}, worker_index=0))
    assert isinstance(env, Navigation2DEnv) and env.horizon == 7


def test_batched_reward_and_done_match_the_steps():
    env = Navigation2DEnv({"goal": (0.15, -0.05), "goal_radius": 0.02})
    obs, _ = env.reset(seed=0)
    rows = []
    for action in ([1.0, -0.5], [0.5, 0.0], [-1.0, 1.0]):
        next_obs, reward, terminated, _, _ = env.step(np.array(action, np.float32))
        rows.append((obs, action, next_obs, reward, terminated))
        obs = next_obs
    before, actions, after, rewards, ends = (np.array(column) for column in zip(*rows))
    np.testing.assert_allclose(env.reward(before, actions, after), rewards, atol=1e-6)
    np.testing.assert_array_equal(env.done(after), ends)
    assert ends.tolist() == [False, True, False]
