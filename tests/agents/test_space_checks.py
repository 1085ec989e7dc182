"""Spaces are checked where they meet (issue 11, item 10): a config
`observation_space`/`action_space` that does not describe the env's data is a named
error at construction, and `compute_single_action` says which observation shape it
expected instead of failing inside the model."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from corral.agents.ppo import PPOTrainer
from corral.evaluation.obs_check import spaces_match

BASE = {"num_workers": 0, "model": {"fcnet_hiddens": [8]}}
CARTPOLE_OBS = gym.spaces.Box(-np.inf, np.inf, (4,), np.float32)


@pytest.mark.parametrize(
    ("key", "space"),
    [
        ("observation_space", gym.spaces.Box(-1.0, 1.0, (3,), np.float32)),
        ("observation_space", gym.spaces.Discrete(4)),
        ("action_space", gym.spaces.Discrete(3)),
        ("action_space", gym.spaces.Box(-1.0, 1.0, (1,), np.float32)),
    ],
)
def test_config_space_not_matching_the_env_is_named(key, space):
    with pytest.raises(ValueError, match=rf"`{key}` in the config is .*env 'CartPole-v1' has"):
        PPOTrainer(config={**BASE, key: space}, env="CartPole-v1")


def test_matching_config_spaces_are_used():
    trainer = PPOTrainer(
        config={**BASE, "observation_space": CARTPOLE_OBS, "action_space": gym.spaces.Discrete(2)},
        env="CartPole-v1",
    )
    try:
        assert trainer.get_policy().observation_space == CARTPOLE_OBS
    finally:
        trainer.stop()


def test_disable_env_checking_skips_the_space_comparison():
    # The config's space is then taken as it is (the user vouches for it).
    trainer = PPOTrainer(
        config={**BASE, "action_space": gym.spaces.Discrete(3), "disable_env_checking": True},
        env="CartPole-v1",
    )
    try:
        assert trainer.get_policy().action_space == gym.spaces.Discrete(3)
    finally:
        trainer.stop()


def test_spaces_match():
    box = gym.spaces.Box(0.0, 1.0, (2, 3), np.float32)
    assert spaces_match(box, gym.spaces.Box(-5.0, 5.0, (2, 3), np.float32))
    assert not spaces_match(box, gym.spaces.Box(0.0, 1.0, (6,), np.float32))
    assert not spaces_match(gym.spaces.Discrete(2), gym.spaces.Discrete(3))
    assert spaces_match(
        gym.spaces.Dict({"a": gym.spaces.Discrete(2)}),
        gym.spaces.Dict({"a": gym.spaces.Discrete(2)}),
    )


@pytest.mark.parametrize("obs", [np.zeros(3), np.zeros((2, 4)), [0.0] * 5])
def test_compute_single_action_names_the_expected_shape(obs):
    trainer = PPOTrainer(config=BASE, env="CartPole-v1")
    try:
        with pytest.raises(
            ValueError, match=r"expects observations of shape \(4,\).*got one of shape"
        ):
            trainer.compute_single_action(obs)
        assert trainer.compute_single_action(np.zeros(4, np.float32)) in (0, 1)
    finally:
        trainer.stop()


def test_compute_single_action_non_numeric_observation():
    trainer = PPOTrainer(config=BASE, env="CartPole-v1")
    try:
        with pytest.raises(ValueError, match=r"'abc' does not fit policy 'default_policy'"):
            trainer.compute_single_action("abc")
    finally:
        trainer.stop()


def test_compute_single_action_of_a_reset_pair_says_to_pass_the_observation():
    # RLlib 1.x code that steps the worker's env itself (`obs = env.reset()`) gets
    # Gymnasium's (obs, info) pair: the error says so.
    trainer = PPOTrainer(config=BASE, env="CartPole-v1")
    try:
        pair = trainer.workers.local_worker().env.reset(seed=0)
        with pytest.raises(ValueError, match=r"\(obs, info\) pair .* pass its first item"):
            trainer.compute_single_action(pair)
        assert trainer.compute_single_action(pair[0]) in (0, 1)
        with pytest.raises(ValueError) as not_a_pair:  # a plain wrong shape: no such hint
            trainer.compute_single_action(np.zeros(3))
        assert "(obs, info)" not in str(not_a_pair.value)
    finally:
        trainer.stop()
