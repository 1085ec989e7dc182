"""The classic-control envs with a batched reward function (`corral.env.mbmpo_env`): their
`reward` gives the rewards their steps give, they keep Gymnasium's time limits, and they
are registered by name."""

from __future__ import annotations

import numpy as np
import pytest

from corral.env.env_context import EnvContext
from corral.env.mbmpo_env import CartPoleWrapper, PendulumWrapper
from corral.env.utils import make_env_creator


def rollout(env, steps: int, seed: int):
    obs, _ = env.reset(seed=seed)
    rows = []
    for _ in range(steps):
        action = env.action_space.sample()
        next_obs, reward, terminated, truncated, _ = env.step(action)
        rows.append((obs, action, next_obs, reward, terminated, truncated))
        if terminated or truncated:
            break
        obs = next_obs
    return [np.array(column) for column in zip(*rows)]


def test_pendulum_reward_is_the_steps_reward():
    env = PendulumWrapper()
    env.action_space.seed(0)
    obs, actions, next_obs, rewards, _, truncated = rollout(env, 200, seed=0)
    np.testing.assert_allclose(env.reward(obs, actions, next_obs), rewards, rtol=1e-5, atol=1e-6)
    # Actions beyond the torque bound cost as the bound (as the env clips them).
    big = env.reward(obs[:3], actions[:3] * 0 + 10.0, next_obs[:3])
    np.testing.assert_allclose(big, env.reward(obs[:3], actions[:3] * 0 + 2.0, next_obs[:3]))
    assert len(rewards) == 200 and truncated[-1]  # Pendulum-v1's time limit


def test_cartpole_reward_and_done_follow_the_bounds():
    env = CartPoleWrapper()
    env.action_space.seed(1)
    obs, actions, next_obs, rewards, terminated, _ = rollout(env, 500, seed=1)
    assert terminated[-1] and not terminated[:-1].any()
    np.testing.assert_array_equal(env.done(next_obs), terminated)
    # 1 within bounds, 0 for the step that leaves them (RLlib's rule).
    expected = np.ones(len(obs))
    expected[-1] = 0.0
    np.testing.assert_array_equal(env.reward(obs, actions, next_obs), expected)


def test_time_limit_from_env_config():
    env = PendulumWrapper({"max_episode_steps": 3})
    env.action_space.seed(0)
    *_, truncated = rollout(env, 10, seed=0)
    assert truncated.tolist() == [False, False, True]
    with pytest.raises(ValueError, match="`max_episode_steps` must be an int >= 1, got 0"):
        CartPoleWrapper({"max_episode_steps": 0})


@pytest.mark.parametrize(
    ("name", "cls"),
    [("CartPoleWithReward", CartPoleWrapper), ("PendulumWithReward", PendulumWrapper)],
)
def test_registered_by_name(name, cls):
    env = make_env_creator(name)(EnvContext({"max_episode_steps": 9}, worker_index=0))
    assert isinstance(env, cls) and env.max_episode_steps == 9
