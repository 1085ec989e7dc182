"""Worker-failure recovery: SIGKILLed workers are dropped, recreated or reported."""

import os
import signal

import numpy as np
import pytest

from corral.agents.ppo import PPOTrainer
from corral.agents.trainer import MAX_WORKER_FAILURE_RETRIES
from corral.evaluation.backend import WorkerCrashedError, WorkerFailure

SMALL = {
    "num_workers": 2,
    "rollout_fragment_length": 50,
    "train_batch_size": 100,
    "sgd_minibatch_size": 50,
    "num_sgd_iter": 1,
    "model": {"fcnet_hiddens": [16]},
    "seed": 0,
}


def _kill(worker):
    os.kill(worker.pid, signal.SIGKILL)


@pytest.fixture
def make():
    trainers = []

    def build(**overrides):
        t = PPOTrainer(config={**SMALL, **overrides}, env="CartPole-v1")
        trainers.append(t)
        return t

    yield build
    for t in trainers:
        t.stop()


def test_ignore_worker_failures_drops_the_dead_worker(make):
    t = make(ignore_worker_failures=True)
    assert t.train()["num_healthy_workers"] == 2
    _kill(t.workers.remote_workers()[0])
    result = t.train()
    assert result["num_healthy_workers"] == 1
    assert result["timesteps_this_iter"] == 100
    assert [w.worker_index for w in t.workers.remote_workers()] == [2]
    assert t.train()["training_iteration"] == 3


def test_recreate_failed_workers_restores_full_strength(make):
    t = make(recreate_failed_workers=True)
    t.train()
    old_pid = t.workers.remote_workers()[1].pid
    _kill(t.workers.remote_workers()[1])
    result = t.train()
    assert result["num_healthy_workers"] == 2
    new = t.workers.remote_workers()[1]
    assert new.worker_index == 2 and new.pid != old_pid
    remote = new.call("get_weights").result(30)["default_policy"]
    for k, v in t.get_weights()["default_policy"].items():
        np.testing.assert_array_equal(v, remote[k])


def test_without_recovery_the_dead_worker_is_named(make):
    t = make()
    victim = t.workers.remote_workers()[0]
    _kill(victim)
    with pytest.raises(WorkerCrashedError, match=rf"worker 1 \(pid {victim.pid}\) died.*signal 9"):
        t.train()


def test_no_healthy_worker_left_raises(make):
    t = make(num_workers=1, ignore_worker_failures=True)
    _kill(t.workers.remote_workers()[0])
    with pytest.raises(RuntimeError, match="Not enough healthy workers"):
        t.train()


def test_try_recover_health_checks_every_worker(make):
    t = make(ignore_worker_failures=True)
    _kill(t.workers.remote_workers()[1])
    t.try_recover_from_step_attempt()
    assert [w.worker_index for w in t.workers.remote_workers()] == [1]


class _AlwaysFailing(PPOTrainer):
    attempts = 0

    def step_attempt(self):
        type(self).attempts += 1
        raise WorkerFailure("worker 1 keeps failing", 1)


def test_step_gives_up_after_max_retries():
    t = _AlwaysFailing(
        config={**SMALL, "num_workers": 1, "ignore_worker_failures": True}, env="CartPole-v1"
    )
    try:
        with pytest.raises(RuntimeError, match="Failed to recover from worker crash"):
            t.train()
        assert _AlwaysFailing.attempts == 1 + MAX_WORKER_FAILURE_RETRIES
    finally:
        t.stop()
