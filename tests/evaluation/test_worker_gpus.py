"""num_gpus_per_worker: rollout workers' inference on a device (`TorchPolicy.to_device`);
`_fake_gpus` runs that code path on the CPU. Local processes and Ray actors."""

from types import SimpleNamespace

import numpy as np
import pytest
import torch

from corral.agents.ppo import PPOTrainer
from corral.agents.sac import SACTrainer
from corral.evaluation.policy_setup import rollout_device
from corral.evaluation.worker_set import WorkerSet
from corral.policy.torch_policy import TorchPolicy

CONFIG = {
    "num_workers": 2,
    "num_gpus_per_worker": 0.5,
    "_fake_gpus": True,
    "rollout_fragment_length": 64,
    "train_batch_size": 128,
    "sgd_minibatch_size": 64,
    "num_sgd_iter": 1,
    "model": {"fcnet_hiddens": [16]},
    "seed": 0,
}


def _device_state(worker):
    policy = worker.get_policy()
    return (
        str(policy.device),
        policy._device_inference,
        {str(p.device) for p in policy.model.parameters()},
        policy.get_weights(),
    )


def _check_trains_on_fake_gpu_workers(trainer):
    before = trainer.get_policy().get_weights()
    for _ in range(2):
        result = trainer.train()
    assert result["timesteps_total"] == 2 * CONFIG["train_batch_size"]
    assert np.isfinite(result["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"])
    # The driver's worker acts on the CPU as built; the rollout workers went through
    # `to_device` (the fake GPU: the CPU).
    assert not trainer.get_policy()._device_inference
    local = trainer.get_policy().get_weights()
    assert any(not np.array_equal(before[k], local[k]) for k in local)
    for handle in trainer.workers.remote_workers():
        device, moved, param_devices, weights = handle.apply(_device_state).result(timeout=60)
        assert (device, moved, param_devices) == ("cpu", True, {"cpu"})
        # Synced weights landed on the workers' device.
        assert all(np.array_equal(local[k], weights[k]) for k in local)


def test_ppo_trains_with_fake_gpu_workers_on_local_processes():
    trainer = PPOTrainer(config=CONFIG, env="CartPole-v1")
    try:
        _check_trains_on_fake_gpu_workers(trainer)
    finally:
        trainer.stop()


def test_a_spilled_policy_comes_back_onto_the_device(tmp_path):
    config = {
        **CONFIG,
        "num_workers": 1,
        "multiagent": {
            "policies": {"default_policy", "b"},
            "policy_mapping_fn": lambda agent_id, *args, **kwargs: "default_policy",
            "policy_map_capacity": 1,
            "policy_map_cache": str(tmp_path),
        },
    }
    trainer = PPOTrainer(config=config, env="CartPole-v1")
    try:

        def reload_both(worker):
            # Each lookup spills the other policy (capacity 1) and reloads this one.
            return [
                worker.policy_map[pid]._device_inference for pid in ("b", "default_policy", "b")
            ]

        moved = trainer.workers.remote_workers()[0].apply(reload_both).result(timeout=60)
        assert moved == [True, True, True]
    finally:
        trainer.stop()


def test_rollout_device_of_each_worker():
    assert rollout_device(CONFIG, 0) is None  # the driver's worker: `num_gpus` decides
    assert rollout_device(CONFIG, 1) == "cpu"
    assert rollout_device({**CONFIG, "num_gpus_per_worker": 0}, 1) is None
    if torch.cuda.is_available():
        assert rollout_device({**CONFIG, "_fake_gpus": False}, 1) == "cuda"


def test_a_policy_on_its_device_exports(tmp_path):
    trainer = PPOTrainer(config={**CONFIG, "num_workers": 0}, env="CartPole-v1")
    try:
        policy = trainer.get_policy()
        policy.to_device("cpu")
        policy.export_model(str(tmp_path))
        loaded = torch.jit.load(str(tmp_path / "model.pt"))
        out, value = loaded(torch.zeros(3, 4))
        assert out.shape == (3, 2) and value.shape == (3,)
    finally:
        trainer.stop()


def test_to_device_acts_there_and_loads_weights_there():
    trainer = PPOTrainer(config={**CONFIG, "num_workers": 0}, env="CartPole-v1")
    try:
        policy = trainer.get_policy()
        obs = np.zeros((3, 4), np.float32)
        expected = policy.compute_actions_from_obs(obs, explore=False)
        policy.to_device("cpu")
        assert policy._device_inference
        actions, extra = policy.compute_actions_from_obs(obs, explore=False)
        np.testing.assert_array_equal(actions, expected[0])
        np.testing.assert_array_equal(extra["vf_preds"], expected[1]["vf_preds"])
        weights = {k: np.zeros_like(v) for k, v in policy.get_weights().items()}
        policy.set_weights(weights)
        assert all(float(p.detach().abs().sum()) == 0.0 for p in policy.model.parameters())
        assert isinstance(policy, TorchPolicy)
    finally:
        trainer.stop()


def test_policies_with_their_own_acting_are_refused():
    config = {"num_workers": 1, "num_gpus_per_worker": 1, "_fake_gpus": True}
    with pytest.raises(Exception, match="SACTorchPolicy acts through its own"):
        SACTrainer(config={**config, "learning_starts": 10}, env="Pendulum-v1")


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")
def test_worker_gpus_without_cuda_say_what_to_do():
    with pytest.raises(ValueError, match=r"num_gpus_per_worker=0.5, but torch sees no CUDA"):
        PPOTrainer(config={**CONFIG, "_fake_gpus": False}, env="CartPole-v1")
    with pytest.raises(ValueError, match=r"num_gpus_per_worker=1, but torch sees no CUDA.*_fake"):
        rollout_device({"num_gpus_per_worker": 1}, 2)
    with pytest.raises(RuntimeError, match=r"num_gpus_per_worker=1"):  # RLlib 1.13's type
        rollout_device({"num_gpus_per_worker": 1}, 2)


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray", reason="the `ray` extra is not installed")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def test_ppo_trains_with_fake_gpu_workers_on_ray_actors(local_ray):
    trainer = PPOTrainer(config={**CONFIG, "backend": "ray"}, env="CartPole-v1")
    try:
        # Fake GPUs reserve no GPU: the actors' bundles hold CPUs alone.
        table = local_ray.util.placement_group_table().values()
        groups = [g for g in table if g["state"] == "CREATED"]
        assert [list(g["bundles"].values()) for g in groups] == [[{"CPU": 1.0}] * 2]
        _check_trains_on_fake_gpu_workers(trainer)
    finally:
        trainer.stop()


def test_resource_request_asks_for_worker_gpus():
    request = PPOTrainer.default_resource_request(
        {"num_workers": 2, "num_gpus_per_worker": 0.25, "num_gpus": 0}
    )
    assert request.bundles == [{"CPU": 1}, {"CPU": 1, "GPU": 0.25}, {"CPU": 1, "GPU": 0.25}]
    fake = PPOTrainer.default_resource_request(
        {"num_workers": 2, "num_gpus_per_worker": 0.25, "_fake_gpus": True}
    )
    assert fake.bundles == [{"CPU": 1}] * 3
    # The actors' own options (the placement group bundles are made from them).
    real = SimpleNamespace(_config={"num_gpus_per_worker": 0.25})
    assert WorkerSet._ray_resources(real) == {"num_cpus": 1, "num_gpus": 0.25}
    fake_set = SimpleNamespace(_config={"num_gpus_per_worker": 0.25, "_fake_gpus": True})
    assert WorkerSet._ray_resources(fake_set) == {"num_cpus": 1}
