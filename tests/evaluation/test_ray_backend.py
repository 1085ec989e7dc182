"""backend="ray": rollout workers as Ray actors behind the same handle interface.

Runs on a local Ray instance (`ray.init(num_cpus=2)`); skipped only when the
`ray` extra is not installed.
"""

import numpy as np
import pytest

ray = pytest.importorskip("ray", reason="the `ray` extra is not installed (pip install ray)")

from corral.agents.ppo import PPOTrainer  # noqa: E402
from corral.evaluation.backend import RemoteWorkerError, WorkerFailure  # noqa: E402
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
