"""RLlib 1.13's `WorkerSet` methods: `foreach_policy_to_train`, `is_policy_to_train`,
`trainable_policies`, `remove_failed_workers`, `recreate_failed_workers`."""

from __future__ import annotations

import os
import signal

import pytest

from corral.agents.pg import PGTrainer

SMALL = {
    "rollout_fragment_length": 20,
    "train_batch_size": 40,
    "model": {"fcnet_hiddens": [8]},
    "seed": 0,
}


@pytest.fixture
def make():
    trainers = []

    def build(**overrides):
        t = PGTrainer(config={**SMALL, **overrides}, env="CartPole-v1")
        trainers.append(t)
        return t

    yield build
    for t in trainers:
        t.stop()


def test_policies_to_train(make):
    workers = make(num_workers=1).workers
    assert workers.is_policy_to_train("default_policy")
    assert workers.trainable_policies() == ["default_policy"]
    ids = workers.foreach_policy_to_train(lambda policy, pid: pid)
    assert ids == ["default_policy", "default_policy"]  # local worker, then remote one
    workers.foreach_worker(lambda w: w.set_is_policy_to_train([]))
    assert not workers.is_policy_to_train("default_policy")
    assert workers.trainable_policies() == []
    assert workers.foreach_policy_to_train(lambda policy, pid: pid) == []


def test_remove_failed_workers_drops_the_dead_ones(make):
    workers = make(num_workers=2).workers
    dead = workers.remote_workers()[0]
    os.kill(dead.pid, signal.SIGKILL)
    assert workers.remove_failed_workers() is None
    assert [w.worker_index for w in workers.remote_workers()] == [2]
    last = workers.remote_workers()[0]
    os.kill(last.pid, signal.SIGKILL)
    with pytest.raises(RuntimeError, match=r"every rollout worker failed; worker indices \[2\]"):
        workers.remove_failed_workers()


def test_recreate_failed_workers_replaces_the_dead_ones(make):
    workers = make(num_workers=2).workers
    old = workers.remote_workers()
    os.kill(old[1].pid, signal.SIGKILL)
    assert workers.recreate_failed_workers() is None
    new = workers.remote_workers()
    assert [w.worker_index for w in new] == [1, 2]
    assert new[0] is old[0] and new[1].pid != old[1].pid
    recreated = workers.foreach_worker(
        lambda w: (w.recreated_worker, w.env_context.recreated_worker)
    )
    assert recreated == [(False, False), (False, False), (True, True)]
    assert new[1].call("sample").result().count == 20
