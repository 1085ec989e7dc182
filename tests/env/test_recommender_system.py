"""The interest-evolution recommender env: RecSim's observation/action layout, determinism
under a seed, bounded episodes, its user model, and its registered name."""

import math

import gymnasium as gym
import numpy as np
import pytest

from corral.env.env_context import EnvContext
from corral.env.recommender_system import ENV_NAME, InterestEvolutionEnv
from corral.env.utils import make_env_creator


def _random_slates(env, n, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.choice(env.num_candidates, env.slate_size, replace=False) for _ in range(n)]


def _rollout(env, seed, slates):
    obs, _ = env.reset(seed=seed)
    trajectory = [obs]
    for slate in slates:
        obs, reward, terminated, truncated, info = env.step(slate)
        trajectory.append((obs, reward, terminated, truncated, info["clicked_slot"]))
        if terminated:
            break
    return trajectory


def _flat(trajectory, env):
    rows = [gym.spaces.flatten(env.observation_space, trajectory[0])]
    rows += [
        np.append(gym.spaces.flatten(env.observation_space, o), [r, t, tr, c])
        for o, r, t, tr, c in trajectory[1:]
    ]
    return np.concatenate(rows)


def test_spaces_are_recsims_layout():
    env = InterestEvolutionEnv({"num_candidates": 5, "slate_size": 3, "num_topics": 4})
    space = env.observation_space
    assert set(space) == {"user", "doc", "response"}
    assert space["user"].shape == (4,)
    assert set(space["doc"]) == {"0", "1", "2", "3", "4"}
    assert all(d.shape == (4,) for d in space["doc"].values())
    assert len(space["response"]) == 3
    assert set(space["response"][0]) == {"click", "watch_time"}
    assert space["response"][0]["click"] == gym.spaces.Discrete(2)
    assert env.action_space == gym.spaces.MultiDiscrete([5, 5, 5])

    obs, _ = env.reset(seed=0)
    assert space.contains(obs)
    # At reset, no slate was shown yet: no clicks, nothing watched.
    assert all(r["click"] == 0 and r["watch_time"] == 0 for r in obs["response"])
    for slate in _random_slates(env, 20):
        obs, reward, terminated, truncated, _ = env.step(slate)
        assert space.contains(obs)
        assert not truncated
        if terminated:
            break


def test_reward_is_the_clicked_documents_watch_time():
    env = InterestEvolutionEnv()
    env.reset(seed=3)
    clicks = 0
    for slate in _random_slates(env, 40, seed=1):
        obs, reward, terminated, _, info = env.step(slate)
        watched = [float(r["watch_time"]) for r in obs["response"]]
        clicked = [r["click"] for r in obs["response"]]
        assert sum(clicked) <= 1
        if info["clicked_slot"] >= 0:
            clicks += 1
            assert clicked[info["clicked_slot"]] == 1
            assert reward == pytest.approx(watched[info["clicked_slot"]], rel=1e-6)
            assert 0 < reward <= env.video_length
        else:
            assert reward == 0.0 and sum(watched) == 0
        if terminated:
            break
    assert clicks > 0


def test_same_seed_same_episode_and_other_seeds_differ():
    env = InterestEvolutionEnv()
    slates = _random_slates(env, 100)
    first = _flat(_rollout(env, 7, slates), env)
    again = _flat(_rollout(InterestEvolutionEnv(), 7, slates), env)
    other = _flat(_rollout(env, 8, slates), env)
    np.testing.assert_array_equal(first, again)
    assert first.shape != other.shape or not np.array_equal(first, other)


def test_config_seed_seeds_the_first_reset():
    a = InterestEvolutionEnv({"seed": 11}).reset()[0]
    b = InterestEvolutionEnv({"seed": 11}).reset()[0]
    np.testing.assert_array_equal(a["user"], b["user"])
    np.testing.assert_array_equal(a["user"], InterestEvolutionEnv().reset(seed=11)[0]["user"])


@pytest.mark.parametrize("config", [{}, {"time_budget": 20.0, "step_penalty": 2.0}])
def test_episodes_end_within_the_time_budget(config):
    env = InterestEvolutionEnv(config)
    bound = math.ceil(env.time_budget / env.step_penalty)
    assert env.max_episode_steps == bound
    rng = np.random.default_rng(0)
    lengths = []
    for episode in range(20):
        env.reset(seed=episode)
        steps, terminated = 0, False
        while not terminated and steps < bound:
            slate = rng.choice(env.num_candidates, env.slate_size, replace=False)
            _, _, terminated, _, info = env.step(slate)
            steps += 1
        assert terminated, "the budget shrinks by at least step_penalty per step"
        assert info["time_budget"] <= 0
        lengths.append(steps)
    # Clicks use up budget too: episodes are usually shorter than the bound.
    assert min(lengths) < bound


def test_a_click_moves_only_the_clicked_topics_interest():
    env = InterestEvolutionEnv({"choice_beta": 8.0, "no_click_score": -10.0})
    env.reset(seed=0)
    for slate in _random_slates(env, 30):
        before = env.interests.copy()
        topics = env.doc_topics[slate]
        _, _, terminated, _, info = env.step(slate)
        changed = np.flatnonzero(before != env.interests)
        assert info["clicked_slot"] >= 0  # (no-click logit -10: always a click)
        assert set(changed) <= {topics[info["clicked_slot"]]}
        if terminated:
            break


def test_duplicate_candidates_are_shown_in_each_slot_and_bad_slates_are_refused():
    env = InterestEvolutionEnv()
    env.reset(seed=0)
    env.step([1, 1])  # a repeated candidate is allowed
    for bad in ([0], [0, 10], [-1, 2], [[0, 1], [2, 3]]):
        with pytest.raises(ValueError, match="slate"):
            env.step(bad)


def test_bad_config_is_refused_naming_the_key():
    with pytest.raises(ValueError, match="num_candidate"):
        InterestEvolutionEnv({"num_candidate": 5})
    with pytest.raises(ValueError, match="slate_size"):
        InterestEvolutionEnv({"num_candidates": 2, "slate_size": 3})
    with pytest.raises(ValueError, match="step_penalty"):
        InterestEvolutionEnv({"step_penalty": 0})


@pytest.mark.parametrize(
    ("bad", "match"),
    [
        ({"num_candidates": 2.5}, r"num_candidates must be an int, got 2\.5"),
        ({"slate_size": True}, r"slate_size must be an int, got True"),
        ({"resample_documents": "no"}, r"resample_documents must be a bool, got 'no'"),
        ({"time_budget": "60"}, r"time_budget must be a finite number, got '60'"),
        ({"choice_beta": float("nan")}, r"choice_beta must be a finite number, got nan"),
        ({"seed": 1.5}, r"seed must be an int or None, got 1\.5"),
    ],
)
def test_config_values_of_the_wrong_type_are_refused_naming_the_key(bad, match):
    with pytest.raises(ValueError, match=match):
        InterestEvolutionEnv(bad)


def test_registered_name_builds_the_env_with_its_env_config():
    creator = make_env_creator(ENV_NAME)
    env = creator(EnvContext({"num_candidates": 4, "slate_size": 2}, worker_index=0))
    assert isinstance(env, InterestEvolutionEnv)
    assert env.action_space == gym.spaces.MultiDiscrete([4, 4])
