"""IMPALA, APPO and A3C as the synchronous algorithms: multi-agent, failed and hung
workers (`ignore_worker_failures`, `recreate_failed_workers`, `sample_timeout_s`),
evaluation and callbacks."""

import os
import signal
import time

import pytest

from corral.agents.a3c import A3CTrainer
from corral.agents.callbacks import DefaultCallbacks
from corral.agents.impala import ImpalaTrainer
from corral.agents.ppo import APPOTrainer
from corral.env.multi_agent_env import make_multi_agent
from corral.evaluation.backend import WorkerFailure

TRAINERS = {"IMPALA": ImpalaTrainer, "APPO": APPOTrainer, "A3C": A3CTrainer}
BASE = {
    "env": "CartPole-v1",
    "num_workers": 2,
    "rollout_fragment_length": 20,
    "train_batch_size": 40,
    "min_time_s_per_reporting": 0,
    "min_sample_timesteps_per_reporting": 200,
    "seed": 0,
}
TwoCartPoles = make_multi_agent("CartPole-v1")


def _build(name, **overrides):
    config = {**BASE, **overrides}
    if name == "A3C":
        config.pop("train_batch_size")
    return TRAINERS[name](config=config)


@pytest.mark.parametrize("name", sorted(TRAINERS))
def test_multi_agent_trains_each_policy(name):
    trainer = _build(
        name,
        env=TwoCartPoles,
        env_config={"num_agents": 2},
        multiagent={
            "policies": {"p0", "p1"},
            "policy_mapping_fn": lambda agent_id, episode, worker, **kw: f"p{agent_id}",
        },
    )
    try:
        before = {pid: trainer.get_policy(pid).get_weights() for pid in ("p0", "p1")}
        learned = set()
        for _ in range(4):
            result = trainer.train()
            learned |= set(result["info"]["learner"])
        assert learned == {"p0", "p1"}
        for pid in ("p0", "p1"):
            after = trainer.get_policy(pid).get_weights()
            assert any((before[pid][k] != after[k]).any() for k in after)
    finally:
        trainer.stop()


def _kill_one(trainer):
    handle = trainer.workers.remote_workers()[0]
    os.kill(handle.pid, signal.SIGKILL)
    time.sleep(0.3)


@pytest.mark.parametrize("name", sorted(TRAINERS))
def test_recreate_failed_workers(name):
    trainer = _build(name, recreate_failed_workers=True)
    try:
        trainer.train()
        _kill_one(trainer)
        for _ in range(2):
            result = trainer.train()
        assert result["num_healthy_workers"] == 2
        assert result["num_env_steps_trained"] > 0
    finally:
        trainer.stop()


@pytest.mark.parametrize("name", ["IMPALA", "A3C"])
def test_ignore_worker_failures_drops_the_dead_worker(name):
    trainer = _build(name, ignore_worker_failures=True)
    try:
        trainer.train()
        _kill_one(trainer)
        for _ in range(2):
            result = trainer.train()
        assert result["num_healthy_workers"] == 1
    finally:
        trainer.stop()


def test_without_flags_a_dead_worker_fails_training():
    trainer = _build("IMPALA")
    try:
        trainer.train()
        _kill_one(trainer)
        with pytest.raises(WorkerFailure):
            for _ in range(3):
                trainer.train()
    finally:
        trainer.stop()


def test_hung_worker_times_out_and_is_recreated():
    # The recovery's health probe waits `worker_health_probe_timeout_s` (30 s by default)
    # for the stopped worker before recreating it: keep it as short as the sample timeout.
    trainer = _build(
        "APPO",
        recreate_failed_workers=True,
        sample_timeout_s=2.0,
        worker_health_probe_timeout_s=2.0,
    )
    try:
        trainer.train()
        stopped = trainer.workers.remote_workers()[0]
        os.kill(stopped.pid, signal.SIGSTOP)
        start = time.monotonic()
        result = trainer.train()
        while stopped in trainer.workers.remote_workers() and time.monotonic() - start < 60:
            result = trainer.train()
        assert stopped not in trainer.workers.remote_workers()
        assert result["num_healthy_workers"] == 2
    finally:
        trainer.stop()


class _Counting(DefaultCallbacks):
    learned = 0
    results = 0

    def on_learn_on_batch(self, *, policy, train_batch, result, **kwargs):
        type(self).learned += 1

    def on_train_result(self, *, trainer, result, **kwargs):
        type(self).results += 1


@pytest.mark.parametrize("name", ["IMPALA", "APPO"])
def test_evaluation_and_callbacks(name):
    _Counting.learned = _Counting.results = 0
    trainer = _build(
        name,
        callbacks=_Counting,
        evaluation_interval=1,
        evaluation_duration=2,
        evaluation_config={"explore": False},
    )
    try:
        result = trainer.train()
        assert result["evaluation"]["episodes_this_iter"] >= 2
        assert _Counting.learned > 0 and _Counting.results == 1
    finally:
        trainer.stop()
