"""Observations are checked as the env gives them (issue 11, items 9 and 10): NaN/inf
from reset() or step() and values outside a Box's bounds are named errors (the env,
the call, the sub-env, the agent), never trained on."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from corral.agents.ppo import PPOTrainer
from corral.env import MultiAgentEnv
from corral.utils.error import EnvError

SMALL = {
    "num_workers": 0,
    "rollout_fragment_length": 10,
    "train_batch_size": 40,
    "sgd_minibatch_size": 20,
    "num_sgd_iter": 1,
    "model": {"fcnet_hiddens": [8]},
}


class BoxEnv(gym.Env):
    """Box(-1, 1) observations; `bad` is returned by reset() (at=0) or at step `at`."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    action_space = gym.spaces.Discrete(2)
    bad = np.array([0.0, np.nan, 0.0], np.float32)
    at = 0

    def __init__(self, config=None):
        self.t = 0

    def _obs(self):
        return self.bad.copy() if self.t == self.at else np.zeros(3, np.float32)

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), 1.0, self.t >= 20, False, {}


class NanResetEnv(BoxEnv):
    at = 0


class NanStepEnv(BoxEnv):
    at = 5


class InfStepEnv(BoxEnv):
    at = 3
    bad = np.array([np.inf, 0.0, 0.0], np.float32)


class OutOfBoundsEnv(BoxEnv):
    at = 4
    bad = np.array([0.0, 0.0, 2.5], np.float32)


def _train_once(env, **overrides):
    trainer = PPOTrainer(config={**SMALL, **overrides}, env=env)
    try:
        return trainer.train(), trainer
    finally:
        trainer.stop()


def test_nan_from_reset_names_env_call_and_sub_env():
    with pytest.raises(
        EnvError,
        match=r"Env 'NanResetEnv' \(sub-env 0 of worker 0\) returned "
        r"from reset\(\) an observation that is not finite: element \[1\] is nan",
    ):
        _train_once(NanResetEnv)


def test_nan_from_step_is_an_error_before_the_policy_sees_it():
    with pytest.raises(EnvError, match=r"'NanStepEnv'.*from step\(\).*not finite"):
        _train_once(NanStepEnv)


def test_inf_from_step_is_an_error_even_without_env_checking():
    with pytest.raises(EnvError, match=r"'InfStepEnv'.*from step\(\).*element \[0\] is inf"):
        _train_once(InfStepEnv, disable_env_checking=True)


def test_nan_in_second_sub_env_names_it():
    class SecondBad(NanStepEnv):
        def __init__(self, config=None):
            super().__init__(config)
            self.at = 5 if config.vector_index == 1 else -1

    with pytest.raises(EnvError, match=r"sub-env 1 of worker 0"):
        _train_once(SecondBad, num_envs_per_worker=2)


def test_out_of_bounds_observation_is_an_error():
    with pytest.raises(
        EnvError,
        match=r"'OutOfBoundsEnv'.*outside its observation space.*"
        r"element \[2\] is 2.5, not in \[-1.0, 1.0\].*disable_env_checking",
    ):
        _train_once(OutOfBoundsEnv)


def test_disable_env_checking_accepts_out_of_bounds_observations():
    result, _ = _train_once(OutOfBoundsEnv, disable_env_checking=True)
    assert result["timesteps_total"] >= 40


def test_infinite_bounds_are_not_out_of_bounds():
    class Unbounded(BoxEnv):
        observation_space = gym.spaces.Box(-np.inf, np.inf, (3,), np.float32)
        at = 2
        bad = np.array([1e30, -1e30, 0.0], np.float32)

    result, _ = _train_once(Unbounded)
    assert result["timesteps_total"] >= 40


class NanAgentEnv(MultiAgentEnv):
    """Two agents; "b" observes NaN at step 3."""

    possible_agents = ["a", "b"]
    observation_space = gym.spaces.Box(-10.0, 10.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        super().__init__()
        self.t = 0

    def _obs(self):
        bad = np.array([np.nan, 0.0], np.float32)
        ok = np.zeros(2, np.float32)
        return {"a": ok, "b": bad if self.t == 3 else ok}

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return self._obs(), {}

    def step(self, action_dict):
        self.t += 1
        rewards = {a: 1.0 for a in action_dict}
        return self._obs(), rewards, {"__all__": self.t >= 10}, {"__all__": False}, {}


def test_multi_agent_nan_names_the_agent():
    config = {
        **SMALL,
        "multiagent": {"policies": {"p"}, "policy_mapping_fn": lambda agent, *a, **k: "p"},
    }
    with pytest.raises(
        EnvError,
        match=r"'NanAgentEnv' \(agent 'b' of sub-env 0 of worker 0\) "
        r"returned from step\(\) an observation that is not finite",
    ):
        _train_once(NanAgentEnv, **config)


def test_multi_agent_out_of_bounds_and_switch():
    class Far(NanAgentEnv):
        def _obs(self):
            return {
                "a": np.array([0.0, 50.0 if self.t == 2 else 0.0], np.float32),
                "b": np.zeros(2, np.float32),
            }

    config = {
        **SMALL,
        "multiagent": {"policies": {"p"}, "policy_mapping_fn": lambda agent, *a, **k: "p"},
    }
    with pytest.raises(EnvError, match=r"agent 'a' of sub-env 0.*outside its observation space"):
        _train_once(Far, **config)
    result, _ = _train_once(Far, disable_env_checking=True, **config)
    assert result["timesteps_total"] > 0


def test_bounds_are_checked_on_the_env_observation_not_the_filtered_one():
    # A filter's output may leave the Box (Pendulum's cos/sin standardised): no error...
    result, _ = _train_once("Pendulum-v1", observation_filter="MeanStdFilter")
    assert result["timesteps_total"] >= 40
    # ...but the env's own observation out of bounds still is one.
    with pytest.raises(EnvError, match=r"element \[2\] is 2.5"):
        _train_once(OutOfBoundsEnv, observation_filter="MeanStdFilter")


def test_integer_boxes_skip_only_bounds_their_dtype_cannot_break():
    """uint8 frames in [0, 255] need no bounds pass (no uint8 value is outside);
    a narrower integer Box is still checked."""
    from corral.evaluation.obs_check import ObservationCheck

    frames = gym.spaces.Box(0, 255, (4, 4, 2), np.uint8)
    assert not ObservationCheck(frames, frames.shape).bounded
    narrow = gym.spaces.Box(0, 100, (3,), np.uint8)
    check = ObservationCheck(narrow, narrow.shape)
    assert check.bounded
    assert not check.ok(np.array([0, 150, 3], np.float32))
    assert check.ok(np.array([0, 100, 3], np.float32))
