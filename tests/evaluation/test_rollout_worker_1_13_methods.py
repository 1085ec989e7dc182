"""RLlib 1.13's `RolloutWorker` methods and attributes: `as_remote`, `creation_args`,
the export/import calls, `sample_and_learn`, `set_is_policy_to_train`, and the
attributes 1.13 sets in `__init__` (`batch_mode`, `rollout_fragment_length`, ...)."""

from __future__ import annotations

import os

import gymnasium as gym
import numpy as np
import pytest

from corral.agents.pg.pg_torch_policy import PGTorchPolicy
from corral.evaluation import ray_backend
from corral.evaluation.rollout_worker import RolloutWorker
from corral.policy.policy import PolicySpec
from corral.policy.sample_batch import SampleBatch


def cartpole(ctx):
    return gym.make("CartPole-v1")


def small_worker(**kwargs):
    kwargs.setdefault("policy_config", {"lr": 0.01, "model": {"fcnet_hiddens": [8]}})
    return RolloutWorker(
        env_creator=cartpole,
        policy_spec=kwargs.pop("policy_spec", PGTorchPolicy),
        rollout_fragment_length=kwargs.pop("rollout_fragment_length", 20),
        seed=0,
        **kwargs,
    )


def test_attributes_read_from_the_config():
    worker = small_worker(
        num_envs=2,
        batch_mode="complete_episodes",
        count_steps_by="agent_steps",
        policy_config={"_disable_preprocessor_api": True, "model": {"fcnet_hiddens": [8]}},
    )
    try:
        assert worker.batch_mode == "complete_episodes"
        assert worker.count_steps_by == "agent_steps"
        assert worker.rollout_fragment_length == 40  # 20 per sub-env x 2 (RLlib 1.13's)
        assert worker.preprocessing_enabled is False
        assert worker.recreated_worker is False and worker.env_context.recreated_worker is False
        assert worker.spaces is None
        assert worker.last_batch is None  # no fake_sampler
        assert worker.reward_estimators == []  # sampling its env: no estimators
    finally:
        worker.stop()
    plain = small_worker()
    try:
        assert plain.batch_mode == "truncate_episodes" and plain.count_steps_by == "env_steps"
        assert plain.preprocessing_enabled is True
    finally:
        plain.stop()


def test_policy_dict_holds_classes_resolved_spaces_and_own_configs():
    worker = small_worker(
        policy_spec={"default_policy": PolicySpec(PGTorchPolicy, None, None, {"gamma": 0.5})}
    )
    try:
        spec = worker.policy_dict["default_policy"]
        assert spec.policy_class is PGTorchPolicy
        assert spec.observation_space.shape == (4,) and spec.action_space.n == 2
        assert spec.config == {"gamma": 0.5}
        worker.add_policy("extra", PGTorchPolicy, config={"lr": 0.5})
        assert worker.policy_dict["extra"].config == {"lr": 0.5}
        worker.remove_policy("extra")
        assert set(worker.policy_dict) == {"default_policy"}
    finally:
        worker.stop()


def test_creation_args_build_a_like_worker():
    worker = small_worker(num_envs=2)
    try:
        args = worker.creation_args()
        assert args["policy_spec"] is PGTorchPolicy and args["num_envs"] == 2
        assert args["rollout_fragment_length"] == 20 and args["recreated_worker"] is False
        twin = RolloutWorker(**args)
        try:
            assert twin.rollout_fragment_length == worker.rollout_fragment_length == 40
            assert twin.sample().count == 40
        finally:
            twin.stop()
    finally:
        worker.stop()


def test_recreated_worker_is_seen_by_its_envs():
    seen = []

    def creator(ctx):
        seen.append(ctx.recreated_worker)
        return gym.make("CartPole-v1")

    worker = RolloutWorker(env_creator=creator, policy_spec=PGTorchPolicy, recreated_worker=True)
    try:
        assert worker.recreated_worker is True and seen == [True]
    finally:
        worker.stop()


def test_sample_and_learn_trains_on_one_batch():
    worker = small_worker()
    try:
        policy = worker.get_policy()
        before = {k: v.copy() for k, v in policy.get_weights().items()}
        info, count = worker.sample_and_learn(20, 2, 10, ["advantages"])
        assert count == 20 and "learner_stats" in info["default_policy"]
        after = policy.get_weights()
        assert any(not np.array_equal(before[k], after[k]) for k in before)
        with pytest.raises(ValueError, match="expected a batch of 7 rows, sampled 20"):
            worker.sample_and_learn(7, 1, 10, [])
    finally:
        worker.stop()


def test_set_is_policy_to_train_takes_a_container_or_a_callable():
    worker = small_worker()
    try:
        worker.set_is_policy_to_train(set())
        assert not worker.is_policy_to_train("default_policy")
        assert worker.learn_on_batch(worker.sample()) == {}
        worker.set_is_policy_to_train(lambda pid, batch=None: pid == "default_policy")
        assert worker.is_policy_to_train("default_policy")
        with pytest.raises(TypeError, match="container of policy ids or a callable"):
            worker.set_is_policy_to_train(3)
    finally:
        worker.stop()


def test_export_and_import_delegate_to_the_policy(tmp_path):
    worker = small_worker()
    try:
        worker.export_policy_model(str(tmp_path / "model"))
        assert os.path.exists(tmp_path / "model" / "model.pt")
        worker.export_policy_checkpoint(str(tmp_path / "ckpt"), filename_prefix="p")
        assert any(name.startswith("p") for name in os.listdir(tmp_path / "ckpt"))
        with pytest.raises(KeyError):
            worker.export_policy_model(str(tmp_path / "x"), policy_id="nope")
    finally:
        worker.stop()


def test_import_policy_model_from_h5_loads_the_weights(tmp_path):
    h5py = pytest.importorskip("h5py", reason="HDF5 import needs h5py")
    worker = small_worker()
    try:
        policy = worker.get_policy()
        new = {k: np.full_like(v, 0.25) for k, v in policy.get_weights().items()}
        path = str(tmp_path / "w.h5")
        with h5py.File(path, "w") as f:
            for key, value in new.items():
                layer, _, param = key.rpartition(".")
                f.create_dataset(f"{layer}/{param}", data=value)
        worker.import_policy_model_from_h5(path)
        for k, v in policy.get_weights().items():
            np.testing.assert_array_equal(v, new[k], err_msg=k)
    finally:
        worker.stop()


def test_as_remote_is_a_ray_actor_class_or_names_the_extra(monkeypatch):
    if ray_backend.ray_available():
        import ray

        actor_cls = RolloutWorker.as_remote(num_cpus=1, num_gpus=0)
        assert isinstance(actor_cls, ray.actor.ActorClass)
        # No options at all (RLlib's rollout_worker_custom_workflow example).
        assert isinstance(RolloutWorker.as_remote(), ray.actor.ActorClass)
    monkeypatch.setattr(ray_backend, "ray_available", lambda: False)
    with pytest.raises(ImportError, match=r"corral\[ray\]"):
        RolloutWorker.as_remote()


def test_fake_sampler_last_batch():
    worker = small_worker(fake_sampler=True)
    try:
        batch = worker.sample()
        assert isinstance(worker.last_batch, SampleBatch)
        assert worker.last_batch.count == batch.count
    finally:
        worker.stop()
