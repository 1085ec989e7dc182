"""`ModelVectorEnv`: episodes start at the real envs' resets, then the model steps them and the
env's `reward` / `done` reward and end them; `model_vector_env` gives it to remote rollout
workers only."""

from __future__ import annotations

import numpy as np
import pytest

from corral.env.mbmpo_env import CartPoleWrapper
from corral.env.navigation_2d import Navigation2DEnv
from corral.env.wrappers.model_vector_env import ModelVectorEnv, find_env_method, model_vector_env


class ShiftModel:
    """A 'dynamics model' that moves every observation by its action (and records calls)."""

    def __init__(self) -> None:
        self.calls: list[tuple[np.ndarray, np.ndarray]] = []

    def predict_model_batches(self, obs, actions, device=None):
        self.calls.append((np.array(obs), np.array(actions)))
        return np.asarray(obs) + np.asarray(actions)


def make_env(num_envs: int = 3, **kwargs) -> tuple[ModelVectorEnv, ShiftModel]:
    model = ShiftModel()
    env = ModelVectorEnv(
        make_env=lambda i: Navigation2DEnv({"goal": (1.0, 0.0)}),
        num_envs=num_envs,
        model=model,
        **kwargs,
    )
    return env, model


def test_steps_with_the_model_and_the_env_reward():
    env, model = make_env()
    first = env.vector_reset()
    np.testing.assert_array_equal(np.stack(first), np.zeros((3, 2)))  # the real resets
    actions = [np.array([0.5, 0.0]), np.array([0.0, 1.0]), np.array([1.0, 0.0])]
    obs, rewards, dones, infos = env.vector_step(actions)
    np.testing.assert_allclose(np.stack(obs), np.stack(actions))  # the model's prediction
    # The env's reward: minus the distance of the next position to the goal (1, 0).
    np.testing.assert_allclose(rewards, [-0.5, -np.sqrt(2.0), 0.0])
    # The env's done: within goal_radius of the goal.
    assert dones == [False, False, True]
    assert infos == [{}, {}, {}]
    # The next step starts from the predicted observations.
    env.vector_step([np.array([0.1, 0.1])] * 3)
    np.testing.assert_allclose(model.calls[-1][0], np.stack(actions))
    # The real sub-envs were never stepped.
    assert all(e.steps == 0 for e in env.get_sub_environments())


def test_reset_at_restarts_one_sub_env_from_a_real_reset():
    env, _ = make_env()
    env.vector_reset()
    env.vector_step([np.array([0.3, 0.3])] * 3)
    assert np.allclose(env.reset_at(1), 0.0)
    obs, *_ = env.vector_step([np.array([0.1, 0.0])] * 3)
    np.testing.assert_allclose(np.stack(obs), [[0.4, 0.3], [0.1, 0.0], [0.4, 0.3]])


def test_step_before_reset_is_refused():
    env, _ = make_env()
    with pytest.raises(ValueError, match="reset every sub-env"):
        env.vector_step([np.zeros(2)] * 3)
    env.reset_at(0)
    with pytest.raises(ValueError, match="reset every sub-env"):
        env.vector_step([np.zeros(2)] * 3)


def test_first_resets_are_seeded():
    class RandomStart(Navigation2DEnv):
        def reset(self, *, seed=None, options=None):
            obs, info = super().reset(seed=seed)
            return self.np_random.uniform(-1, 1, 2).astype(np.float32), info

    def build(seed):
        env = ModelVectorEnv(
            make_env=lambda i: RandomStart(), num_envs=2, model=ShiftModel(), seed=seed
        )
        return [env.vector_reset(), env.vector_reset()]

    a, b = build(7), build(7)
    np.testing.assert_array_equal(np.stack(a[0]), np.stack(b[0]))
    np.testing.assert_array_equal(np.stack(a[1]), np.stack(b[1]))
    assert not np.allclose(a[0][0], a[0][1])  # sub-env i is seeded with seed + i
    assert not np.allclose(np.stack(build(8)[0]), np.stack(a[0]))


def test_without_done_episodes_do_not_end():
    env = ModelVectorEnv(existing_envs=[CartPoleWrapper()], num_envs=1, model=ShiftModel(), seed=0)
    env.done_fn = None
    env.vector_reset()
    _, rewards, dones, _ = env.vector_step([np.array([100.0, 0.0, 0.0, 0.0])])
    assert dones == [False] and rewards == [0.0]  # out of bounds: CartPole's reward is 0


def test_discrete_actions_reach_the_model_and_reward_as_the_env_takes_them():
    seen = []

    class Recorder(CartPoleWrapper):
        def reward(self, obs, action, obs_next):
            seen.append(np.array(action))
            return super().reward(obs, action, obs_next)

    class Model:
        def predict_model_batches(self, obs, actions, device=None):
            seen.append(np.array(actions))
            return np.asarray(obs)

    env = ModelVectorEnv(make_env=lambda i: Recorder(), num_envs=2, model=Model())
    env.vector_reset()
    env.vector_step([0, 1])
    np.testing.assert_array_equal(seen[0], [0, 1])
    np.testing.assert_array_equal(seen[1], [0, 1])


def test_an_env_without_reward_is_refused():
    class NoReward(Navigation2DEnv):
        reward = None  # type: ignore[assignment]

    with pytest.raises(ValueError, match="`reward.*NoReward does not have"):
        ModelVectorEnv(make_env=lambda i: NoReward(), num_envs=1, model=ShiftModel())
    with pytest.raises(ValueError, match="no make_env"):
        ModelVectorEnv(existing_envs=[Navigation2DEnv()], num_envs=2, model=ShiftModel())


def test_finds_methods_inside_wrappers():
    import gymnasium as gym

    env = gym.wrappers.TimeLimit(Navigation2DEnv(), 5)
    assert find_env_method(env, "reward") == env.unwrapped.reward
    assert find_env_method(env, "no_such_method") is None


def test_model_vector_env_needs_a_worker(monkeypatch):
    import corral.evaluation.rollout_worker as rollout_worker

    monkeypatch.setattr(rollout_worker, "_global_worker", None)
    with pytest.raises(RuntimeError, match="get_global_worker"):
        model_vector_env(Navigation2DEnv())
