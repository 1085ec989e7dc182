"""Evaluation: evaluate(), evaluation inside train(), eval workers, parallel, custom fns."""

import threading

import gymnasium as gym
import numpy as np
import pytest

from corral.agents.ppo import PPOTrainer

SMALL = {
    "num_workers": 0,
    "rollout_fragment_length": 50,
    "train_batch_size": 100,
    "sgd_minibatch_size": 50,
    "num_sgd_iter": 1,
    "model": {"fcnet_hiddens": [16]},
    "seed": 0,
}


class FixedLengthEnv(gym.Env):
    """Episodes last exactly `env_config["length"]` steps; tells configs apart."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config):
        self.length = config.get("length", 10)
        self.t = 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.zeros(2, np.float32), 1.0, self.t >= self.length, False, {}


def make(**overrides):
    config = {**SMALL, "env_config": {"length": 10}, **overrides}
    return PPOTrainer(config=config, env=FixedLengthEnv)


def test_local_evaluation_runs_exactly_n_episodes_with_eval_config():
    t = make(
        evaluation_interval=1,
        evaluation_num_episodes=3,
        evaluation_config={"explore": False, "env_config": {"length": 7}},
    )
    try:
        result = t.train()
        evaluation = result["evaluation"]
        assert evaluation["episodes_this_iter"] == 3
        assert evaluation["episode_len_mean"] == 7  # eval env_config merged in
        assert result["episode_len_mean"] == 10  # training keeps its own
        eval_policy = t.evaluation_workers.local_worker().get_policy()
        assert eval_policy.config["explore"] is False
        assert t.get_policy().config["explore"] is True
        for k, v in t.get_weights()["default_policy"].items():
            np.testing.assert_array_equal(v, eval_policy.get_weights()[k])
    finally:
        t.stop()


def test_evaluation_interval():
    t = make(evaluation_interval=2, evaluation_num_episodes=1)
    try:
        assert "evaluation" not in t.train()
        assert t.train()["evaluation"]["episodes_this_iter"] == 1
    finally:
        t.stop()


def test_remote_evaluation_workers_get_weights_and_run_at_least_n():
    t = make(evaluation_num_workers=2, evaluation_num_episodes=3)
    try:
        assert t.config["evaluation_interval"] == 1  # set automatically
        result = t.train()
        assert result["evaluation"]["episodes_this_iter"] >= 3
        local = t.get_weights()["default_policy"]
        for w in t.evaluation_workers.remote_workers():
            remote = w.call("get_weights").result(30)["default_policy"]
            for k, v in local.items():
                np.testing.assert_array_equal(v, remote[k])
        calls = []

        def one_round(done):
            calls.append(done)
            return 0 if done else 1

        assert t.evaluate(episodes_left_fn=one_round)["evaluation"]["episodes_this_iter"] == 1
        assert calls == [0, 1]
    finally:
        t.stop()


def test_evaluate_on_the_local_worker_without_eval_workers():
    t = make(evaluation_num_episodes=4)
    try:
        assert t.evaluation_workers is None
        assert t.evaluate()["evaluation"]["episodes_this_iter"] == 4
    finally:
        t.stop()


def test_evaluate_without_any_env_raises_the_seed_error():
    t = make(num_workers=1)
    try:
        with pytest.raises(ValueError, match="Cannot evaluate w/o an evaluation worker set"):
            t.evaluate()
    finally:
        t.stop()


def test_custom_eval_function():
    seen = []

    def custom(trainer, eval_workers):
        seen.append((trainer, eval_workers))
        return {"my_metric": 1.5}

    t = make(evaluation_interval=1, custom_eval_function=custom)
    try:
        assert t.train()["evaluation"] == {"my_metric": 1.5}
        assert seen == [(t, t.evaluation_workers)]
    finally:
        t.stop()


def test_custom_eval_function_must_return_a_dict():
    t = make(evaluation_interval=1, custom_eval_function=lambda trainer, workers: [1])
    try:
        with pytest.raises(ValueError, match="Custom eval function must return dict of metrics"):
            t.train()
    finally:
        t.stop()


class _HandshakeTrainer(PPOTrainer):
    """Training waits for the evaluation to start: only parallel runs can finish."""

    def setup(self, config):
        super().setup(config)
        self.training_started = threading.Event()
        self.evaluation_started = threading.Event()

    def training_step(self):
        self.training_started.set()
        assert self.evaluation_started.wait(20), "evaluation did not run during training"
        return super().training_step()


def test_evaluation_parallel_to_training():
    def custom(trainer, eval_workers):
        trainer.evaluation_started.set()
        assert trainer.training_started.wait(20), "training did not run during evaluation"
        assert threading.current_thread() is threading.main_thread()
        return {"overlapped": True}

    config = {
        **SMALL,
        "env_config": {"length": 10},
        "evaluation_num_workers": 1,
        "evaluation_parallel_to_training": True,
        "custom_eval_function": custom,
    }
    t = _HandshakeTrainer(config=config, env=FixedLengthEnv)
    try:
        result = t.train()
        assert result["evaluation"] == {"overlapped": True}
        assert result["timesteps_this_iter"] == 100
    finally:
        t.stop()


def test_parallel_auto_episodes_runs_rounds_until_training_is_done():
    t = make(
        evaluation_num_workers=2,
        evaluation_parallel_to_training=True,
        evaluation_num_episodes="auto",
    )
    try:
        result = t.train()
        episodes = result["evaluation"]["episodes_this_iter"]
        assert episodes >= 2 and episodes % 2 == 0  # whole rounds of one episode per worker
        assert result["timesteps_this_iter"] == 100
    finally:
        t.stop()


def test_evaluation_does_not_warn_about_deprecated_keys_the_user_never_set(caplog):
    import logging

    from corral.agents.ppo import DEFAULT_CONFIG, PPOTrainer

    settings = {"num_workers": 0, "evaluation_interval": 1, "train_batch_size": 128}
    # Also when the config is the whole DEFAULT_CONFIG (RLlib 1.x's
    # `config = ppo.DEFAULT_CONFIG.copy()`), whose deprecated keys are DEPRECATED_VALUE.
    for config in (settings, {**DEFAULT_CONFIG, **settings}):
        with caplog.at_level(logging.WARNING, logger="corral"):
            trainer = PPOTrainer(config=config, env="CartPole-v1")
            trainer.stop()
        assert not [r for r in caplog.records if "deprecated" in r.getMessage()]


@pytest.mark.parametrize("workers", [0, 2])
def test_evaluation_in_timesteps_samples_the_steps_and_reports_finished_episodes(workers):
    t = make(
        evaluation_interval=1,
        evaluation_duration=95,
        evaluation_duration_unit="timesteps",
        evaluation_num_workers=workers,
        evaluation_config={"env_config": {"length": 7}},
    )
    try:
        evaluation = t.train()["evaluation"]
        # Fragments of ceil(95 / workers) steps: 95 steps on one worker, 2 x 48 on two.
        assert evaluation["timesteps_this_iter"] == (95 if workers == 0 else 96)
        # Episodes of 7 steps, each worker from a fresh reset: the whole ones are reported.
        assert evaluation["episodes_this_iter"] == (13 if workers == 0 else 12)
        assert evaluation["episode_len_mean"] == 7
        fragment = t.evaluation_workers.local_worker().config["rollout_fragment_length"]
        assert fragment == (95 if workers == 0 else 48)
    finally:
        t.stop()


def test_parallel_auto_timesteps_runs_rounds_until_training_is_done():
    t = make(
        evaluation_num_workers=2,
        evaluation_parallel_to_training=True,
        evaluation_duration="auto",
        evaluation_duration_unit="timesteps",
    )
    try:
        result = t.train()
        steps = result["evaluation"]["timesteps_this_iter"]
        assert steps >= 20 and steps % 20 == 0  # whole rounds of 10 steps per worker
        assert result["timesteps_this_iter"] == 100
    finally:
        t.stop()


@pytest.mark.parametrize("attach", [False, True])
def test_always_attach_evaluation_results(attach):
    t = make(
        evaluation_interval=2, evaluation_num_episodes=2, always_attach_evaluation_results=attach
    )
    try:
        first, second, third = (t.train() for _ in range(3))
        if attach:  # nothing evaluated yet: RLlib 1.13's NaN placeholder
            assert set(first["evaluation"]) == {
                "episode_reward_max",
                "episode_reward_min",
                "episode_reward_mean",
            }
            assert all(np.isnan(v) for v in first["evaluation"].values())
        else:
            assert "evaluation" not in first
        assert second["evaluation"]["episodes_this_iter"] == 2
        assert ("evaluation" in third) is attach
        if attach:
            assert third["evaluation"] == second["evaluation"]
            assert t.evaluation_metrics["evaluation"] == second["evaluation"]
    finally:
        t.stop()
