"""The rest of the Trainer surface: resources, log_result, collect_metrics, validate_env,
env_task_fn curricula, legacy callbacks, cleanup, repr."""

import logging
import os

import gymnasium as gym
import numpy as np
import pytest

from corral.agents.callbacks import DefaultCallbacks
from corral.agents.ppo import PPOTrainer
from corral.env.apis.task_settable_env import TaskSettableEnv

SMALL = {
    "num_workers": 0,
    "rollout_fragment_length": 50,
    "train_batch_size": 100,
    "sgd_minibatch_size": 50,
    "num_sgd_iter": 1,
    "model": {"fcnet_hiddens": [16]},
    "seed": 0,
}


class LevelEnv(TaskSettableEnv):
    """Episodes last `2 + level` steps, so the level shows in episode lengths."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config):
        self.level = 0
        self.t = 0

    def sample_tasks(self, n_tasks):
        return list(range(n_tasks))

    def set_task(self, task):
        self.level = task

    def get_task(self):
        return self.level

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        self.t += 1
        return np.zeros(1, np.float32), 1.0, self.t >= 2 + self.level, False, {}


def test_default_resource_request():
    config = {
        "num_workers": 2,
        "num_cpus_per_worker": 2,
        "num_cpus_for_driver": 3,
        "evaluation_interval": 1,
        "evaluation_num_workers": 1,
        "evaluation_config": {"num_cpus_per_worker": 5},
        "placement_strategy": "SPREAD",
    }
    request = PPOTrainer.default_resource_request(config)
    # A Ray PlacementGroupFactory with Ray installed, else a look-alike: same fields;
    # zero amounts are left out.
    assert request.bundles == [{"CPU": 3}, {"CPU": 2}, {"CPU": 2}, {"CPU": 5}]
    assert request.strategy == "SPREAD"
    assert request.required_resources == {"CPU": 12}
    no_eval = PPOTrainer.default_resource_request({**config, "evaluation_interval": None})
    assert len(no_eval.bundles) == 3 and no_eval.strategy == "SPREAD"
    fake = PPOTrainer.default_resource_request(
        {"num_workers": 1, "num_gpus": 2, "num_gpus_per_worker": 1, "_fake_gpus": True}
    )
    assert fake.bundles == [{"CPU": 1}, {"CPU": 1}] and fake.strategy == "PACK"
    real = PPOTrainer.default_resource_request({"num_gpus": 1, "num_gpus_per_worker": 0.5})
    assert real.bundles[0]["GPU"] == 1 and real.bundles[1]["GPU"] == 0.5
    learners = PPOTrainer.default_resource_request(
        {"num_workers": 0, "num_learners": 2, "num_cpus_per_learner": 2}
    )
    assert learners.bundles == [{"CPU": 1}, {"CPU": 2}, {"CPU": 2}]


def test_resource_request_without_ray(monkeypatch):
    import importlib.util

    from corral.tune import resources

    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "ray" else real_find_spec(name, *a),
    )
    request = resources.resource_request([{"CPU": 1, "GPU": 0}, {"CPU": 2, "GPU": 0.5}], "SPREAD")
    assert isinstance(request, resources.ResourceRequest)
    assert request.bundles == [{"CPU": 1}, {"CPU": 2, "GPU": 0.5}]
    assert request.required_resources == {"CPU": 3, "GPU": 0.5}
    assert request["strategy"] == "SPREAD"
    with pytest.raises(ValueError, match="at least one bundle"):
        resources.ResourceRequest([])


def test_resource_help_mentions_the_config():
    text = PPOTrainer.resource_help({"num_workers": 7})
    assert "num_workers" in text and "'num_workers': 7" in text


class _Tagging(DefaultCallbacks):
    def on_train_result(self, *, trainer, result, **kwargs):
        result["tag"] = "set by callback"


def test_log_result_lets_callbacks_change_the_result():
    t = PPOTrainer(config={**SMALL, "callbacks": _Tagging}, env="CartPole-v1")
    try:
        assert t.train()["tag"] == "set by callback"
        with open(os.path.join(t.logdir, "result.json")) as f:
            assert "set by callback" in f.read()
    finally:
        t.stop()


def test_collect_metrics_of_selected_workers():
    t = PPOTrainer(config={**SMALL, "num_workers": 2}, env="CartPole-v1")
    try:
        workers = t.workers.remote_workers()
        for w in workers:
            w.call("sample").result(30)
        only_first = t.collect_metrics(selected_workers=workers[:1])
        rest = t.collect_metrics()
        assert only_first["episodes_this_iter"] > 0 and rest["episodes_this_iter"] > 0
        assert t.collect_metrics()["episodes_this_iter"] == 0  # drained
    finally:
        t.stop()


def test_validate_env_sees_every_sub_env():
    seen = []

    class Checked(PPOTrainer):
        @staticmethod
        def validate_env(env, env_context):
            seen.append(env_context.vector_index)

    t = Checked(config={**SMALL, "num_envs_per_worker": 3}, env="CartPole-v1")
    t.stop()
    assert seen == [0, 1, 2]


def test_validate_env_can_refuse():
    class Refusing(PPOTrainer):
        @staticmethod
        def validate_env(env, env_context):
            raise ValueError("not this env")

    with pytest.raises(ValueError, match="not this env"):
        Refusing(config=SMALL, env="CartPole-v1")


def _raise_level(results, env, env_ctx):
    return env.get_task() + 1


def test_env_task_fn_sets_the_task_on_every_worker():
    config = {**SMALL, "num_workers": 2, "num_envs_per_worker": 2, "env_task_fn": _raise_level}
    t = PPOTrainer(config=config, env=LevelEnv)
    try:
        t.train()
        assert t.workers.foreach_env(lambda env: env.get_task()) == [[], [1, 1], [1, 1]]
        t.train()
        assert t.workers.foreach_env(lambda env: env.get_task()) == [[], [2, 2], [2, 2]]
        assert t.train()["episode_len_mean"] > 3  # longer episodes at the higher level
    finally:
        t.stop()


def test_env_task_fn_must_be_callable():
    # Rejected when the trainer is built (by the config's type check), not at train().
    with pytest.raises(TypeError, match="`env_task_fn` must be None or a callable"):
        PPOTrainer(config={**SMALL, "env_task_fn": "nope"}, env=LevelEnv)


def test_legacy_callbacks_dict_through_a_trainer(caplog):
    calls = []
    legacy = {"on_train_result": lambda info: calls.append(info["result"]["training_iteration"])}
    with caplog.at_level(logging.WARNING):
        t = PPOTrainer(config={**SMALL, "callbacks": legacy}, env="CartPole-v1")
    try:
        t.train()
        assert calls == [1]
        assert "deprecated" in caplog.text
    finally:
        t.stop()


def test_cleanup_stops_all_worker_processes_and_repr():
    config = {**SMALL, "num_workers": 1, "evaluation_num_workers": 1}
    t = PPOTrainer(config=config, env="CartPole-v1")
    assert repr(t) == "PPO"
    pids = [w.pid for w in t.workers.remote_workers() + t.evaluation_workers.remote_workers()]
    t.stop()
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)
