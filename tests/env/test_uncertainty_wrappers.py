"""`add_RewardUncertaintyEnvClassWrapper`: Gaussian reward noise on an env class."""

from __future__ import annotations

import numpy as np
import pytest
from gymnasium.envs.classic_control import CartPoleEnv

from corral.env.multi_agent_env import make_multi_agent
from corral.env.wrappers.uncertainty_wrappers import add_RewardUncertaintyEnvClassWrapper


def _rewards(env, seed, steps=20, action=0):
    env.reset(seed=seed)
    out = []
    for _ in range(steps):
        _, reward, *_ = env.step(action)
        out.append(reward)
    return out


def test_single_agent_rewards_get_seeded_noise():
    Noisy = add_RewardUncertaintyEnvClassWrapper(CartPoleEnv, 0.5, reward_uncertainty_mean=2.0)
    env = Noisy()
    assert isinstance(env, CartPoleEnv)
    a = _rewards(env, seed=0, steps=8, action=1)
    assert a == _rewards(env, seed=0, steps=8, action=1)  # the seed fixes the noise
    assert a != _rewards(env, seed=1, steps=8, action=1)
    noise = np.array(a) - 1.0  # CartPole pays 1 per step
    assert np.all(noise != 0.0) and 0.5 < noise.mean() < 3.5

    quiet = add_RewardUncertaintyEnvClassWrapper(CartPoleEnv, 0.0)()
    assert _rewards(quiet, seed=0, steps=5) == [1.0] * 5


def test_multi_agent_rewards_get_independent_noise_per_agent():
    base = make_multi_agent("CartPole-v1")
    Noisy = add_RewardUncertaintyEnvClassWrapper(base, reward_uncertainty_std=1.0)
    env = Noisy({"num_agents": 2})
    env.reset(seed=3)
    _, rewards, terminateds, truncateds, _ = env.step({0: 0, 1: 1})
    assert set(rewards) == {0, 1} and rewards[0] != rewards[1]
    assert "__all__" in terminateds and "__all__" in truncateds
    env.reset(seed=3)
    assert env.step({0: 0, 1: 1})[1] == rewards


def test_negative_std_is_refused():
    with pytest.raises(ValueError, match="reward_uncertainty_std must be >= 0, got -1"):
        add_RewardUncertaintyEnvClassWrapper(CartPoleEnv, -1)
