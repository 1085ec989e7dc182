"""backend="ray": rollout workers as Ray actors behind the same handle interface.

Runs on a local Ray instance (`ray.init(num_cpus=2)`); skipped only when the
`ray` extra is not installed.
"""

import os
import signal
import time

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="the `ray` extra is not installed (pip install ray)")

from corral.agents.ppo import PPOTrainer  # noqa: E402
from corral.evaluation.backend import (  # noqa: E402
    RemoteWorkerError,
    WorkerFailure,
    WorkerTimeoutError,
)
from corral.evaluation.ray_backend import RayWorker  # noqa: E402

CONFIG = {
    "backend": "ray",
    "num_workers": 2,
    "num_envs_per_worker": 2,
    "rollout_fragment_length": 32,
    "train_batch_size": 128,
    "sgd_minibatch_size": 64,
    "num_sgd_iter": 2,
    "model": {"fcnet_hiddens": [16]},
    "seed": 0,
    "log_level": "ERROR",
    "recreate_failed_workers": True,
}


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(scope="module")
def trainer():
    trainer = PPOTrainer(config=CONFIG, env="CartPole-v1")
    yield trainer
    trainer.stop()


def _same_weights(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_ppo_trains_on_ray_actors(trainer):
    workers = trainer.workers.remote_workers()
    assert [type(w) for w in workers] == [RayWorker, RayWorker]
    assert len({w.pid for w in workers}) == 2
    for _ in range(2):
        result = trainer.train()
    assert result["timesteps_total"] == 2 * CONFIG["train_batch_size"]
    assert result["num_healthy_workers"] == 2
    # The driver's weights reached the actors.
    local = trainer.get_policy().get_weights()
    for w in workers:
        remote = w.apply(lambda worker: worker.get_policy().get_weights()).result(timeout=60)
        assert _same_weights(local, remote)


def test_workers_sit_in_a_placement_group(trainer):
    groups = [g for g in ray.util.placement_group_table().values() if g["state"] == "CREATED"]
    assert len(groups) == 1
    group = groups[0]
    assert group["strategy"] == "PACK"
    assert list(group["bundles"].values()) == [{"CPU": 1.0}, {"CPU": 1.0}]


def test_remote_error_names_the_worker(trainer):
    worker = trainer.workers.remote_workers()[0]
    with pytest.raises(RemoteWorkerError, match="Rollout worker 1") as err:
        worker.apply(lambda w: 1 / 0).result(timeout=60)
    assert "ZeroDivisionError" in str(err.value)
    # An exception in a call does not kill the actor.
    assert worker.is_alive()
    assert worker.call("ping").result(timeout=60) == "pong"


def test_batch_refs_feed_learner_update(trainer):
    batch = trainer.workers.remote_workers()[0].call("sample").result(timeout=60)
    before = trainer.get_policy().get_weights()
    results = trainer.learner_group.update(
        batch_refs=[ray.put(batch)], num_epochs=1, minibatch_size=None
    )
    assert "default_policy" in results
    assert not _same_weights(before, trainer.get_policy().get_weights())


def test_dead_actor_is_recreated(trainer):
    old = trainer.workers.remote_workers()[1]
    ray.kill(old._actor, no_restart=True)
    with pytest.raises(WorkerFailure, match="Rollout worker 2"):
        old.call("sample").result(timeout=60)
    result = trainer.train()
    new = trainer.workers.remote_workers()[1]
    assert new is not old and new.is_alive() and new.worker_index == 2
    assert result["num_healthy_workers"] == 2
    assert _same_weights(
        trainer.get_policy().get_weights(),
        new.apply(lambda w: w.get_policy().get_weights()).result(timeout=60),
    )


def test_stopped_actor_times_out_is_killed_and_recreated(trainer):
    # A hung actor (SIGSTOP) must not hang train(): the call times out after
    # `sample_timeout_s`, the actor is killed and a new one takes its place.
    quick = {"sample_timeout_s": 2.0, "worker_health_probe_timeout_s": 1.0}
    saved = {k: trainer.config.get(k) for k in quick}
    trainer.config.update(quick)  # the worker set reads the trainer's config
    for w in trainer.workers.remote_workers():
        w.call_timeout_s = quick["sample_timeout_s"]
    try:
        old = trainer.workers.remote_workers()[0]
        os.kill(old.pid, signal.SIGSTOP)
        with pytest.raises(WorkerTimeoutError, match=rf"worker 1 \(pid {old.pid}\).*`sample`"):
            old.call("sample").result()
        result = trainer.train()
        new = trainer.workers.remote_workers()[0]
        assert new is not old and new.pid != old.pid
        assert result["num_healthy_workers"] == 2
        assert _gone(old.pid), "the hung actor's process was left behind"
    finally:
        trainer.config.update(saved)
        for w in trainer.workers.remote_workers():
            w.call_timeout_s = saved["sample_timeout_s"]


def _gone(pid: int, within: float = 10.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.1)
    return False


def test_collect_metrics_takes_workers_built_with_as_remote():
    # RLlib 1.13's rollout_worker_custom_workflow example: workers built by hand as bare
    # Ray actors, sampled with ray.get, their episodes summarised by collect_metrics.
    from corral.evaluation.metrics import collect_episodes, collect_metrics
    from corral.evaluation.rollout_worker import RolloutWorker
    from corral.policy.random_policy import RandomPolicy

    def make(_ctx):
        import gymnasium as gym

        return gym.make("CartPole-v1")

    workers = [
        RolloutWorker.as_remote().remote(
            env_creator=make, policy_spec=RandomPolicy, rollout_fragment_length=200
        )
        for _ in range(2)
    ]
    try:
        batches = ray.get([w.sample.remote() for w in workers])
        assert [b.count for b in batches] == [200, 200]
        result = collect_metrics(remote_workers=workers)
        finished = sum(int(np.sum(b["terminateds"] | b["truncateds"])) for b in batches)
        assert result["episodes_this_iter"] == finished > 0
        episodes, pending = collect_episodes(remote_workers=workers)
        assert episodes == [] and pending == []  # get_metrics empties each worker's list
    finally:
        for w in workers:
            ray.kill(w)


def test_local_workers_started_with_ray_initialised_warn_once(caplog, monkeypatch):
    # Forked workers cannot use the driver's Ray: an env that asks Ray for an actor would
    # hang there. The warning names the key that runs them as Ray actors instead.
    from corral.utils import deprecation

    monkeypatch.setattr(deprecation, "_logged_keys", set())
    config = {**CONFIG, "backend": "local", "num_workers": 1, "recreate_failed_workers": False}
    with caplog.at_level("WARNING", logger="corral.evaluation.worker_handle"):
        trainer = PPOTrainer(config=config, env="CartPole-v1")
        trainer.stop()
    warned = [r for r in caplog.records if "Ray is initialised in this process" in r.message]
    assert len(warned) == 1 and '"backend": "ray"' in warned[0].message
