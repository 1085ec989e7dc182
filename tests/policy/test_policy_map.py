"""PolicyMap: LRU capacity, spilling to disk and back, and optimiser state across spills."""

import os

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.agents.ppo import DEFAULT_CONFIG
from corral.agents.ppo.ppo_torch_policy import PPOTorchPolicy
from corral.core.learner import Learner
from corral.policy.policy_map import PolicyMap
from corral.policy.sample_batch import MultiAgentBatch, SampleBatch

OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACT = gym.spaces.Discrete(2)


def make_policy(**overrides) -> PPOTorchPolicy:
    config = {**DEFAULT_CONFIG, "model": {**DEFAULT_CONFIG["model"], "fcnet_hiddens": [8]}}
    return PPOTorchPolicy(OBS, ACT, {**config, **overrides})


def weights_equal(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def test_capacity_must_be_positive():
    with pytest.raises(ValueError, match="policy_map_capacity"):
        PolicyMap(0)


def test_least_recently_used_policy_spills_and_comes_back(tmp_path):
    pmap = PolicyMap(capacity=2, cache_dir=str(tmp_path))
    policies = {pid: make_policy() for pid in ("a", "b", "c")}
    policies["a"].kl_coeff = 0.123  # extra (JSON) state travels too
    for pid, policy in policies.items():
        pmap[pid] = policy
    assert pmap.in_memory() == ["b", "c"]
    assert list(pmap) == ["a", "b", "c"] and len(pmap) == 3 and "a" in pmap
    restored = pmap["a"]
    assert restored is not policies["a"]  # rebuilt from disk
    assert weights_equal(restored.get_weights(), policies["a"].get_weights())
    assert restored.kl_coeff == policies["a"].kl_coeff
    assert pmap.in_memory() == ["c", "a"]  # "b" was least recently used
    # Nothing is pickled: weights are safetensors, the rest JSON and tensors.
    (folder,) = [p for p in tmp_path.iterdir()]
    files = sorted(os.listdir(folder / "a"))
    assert files == ["attached.pt", "state.json", "weights.safetensors"]


def test_spilled_policy_keeps_weights_seq_and_delete_removes_files(tmp_path):
    pmap = PolicyMap(capacity=1, cache_dir=str(tmp_path))
    first = make_policy()
    first.weights_seq = 7
    pmap["first"] = first
    pmap["second"] = make_policy()
    assert pmap.weights_seq("first") == 7  # read without loading
    assert pmap.in_memory() == ["second"]
    (folder,) = list(tmp_path.iterdir())
    assert (folder / "first").exists()
    del pmap["first"]
    assert not (folder / "first").exists()
    assert list(pmap) == ["second"]
    with pytest.raises(KeyError):
        pmap["first"]


def _train_batch(n: int = 32) -> SampleBatch:
    rng = np.random.default_rng(0)
    return SampleBatch(
        {
            SampleBatch.OBS: rng.uniform(-1, 1, (n, 3)).astype(np.float32),
            SampleBatch.ACTIONS: rng.integers(0, 2, n),
            SampleBatch.ACTION_LOGP: np.full(n, -0.69, np.float32),
            SampleBatch.ACTION_DIST_INPUTS: np.zeros((n, 2), np.float32),
            SampleBatch.VF_PREDS: np.zeros(n, np.float32),
            SampleBatch.ADVANTAGES: rng.normal(size=n).astype(np.float32),
            SampleBatch.VALUE_TARGETS: rng.normal(size=n).astype(np.float32),
        }
    )


def test_learner_optimizer_state_survives_a_spill(tmp_path):
    pmap = PolicyMap(capacity=1, cache_dir=str(tmp_path))
    pmap["learner"] = make_policy()
    learner = Learner(pmap, make_policy().config, policy_ids=["learner"])
    learner.update(batch=MultiAgentBatch({"learner": _train_batch()}, 32))
    before = learner.optimizers["learner"].state_dict()
    weights = pmap["learner"].get_weights()

    pmap["other"] = make_policy()  # capacity 1: "learner" goes to disk
    assert pmap.in_memory() == ["other"]
    assert "learner" not in learner.optimizers  # released with the old model

    restored = pmap["learner"]
    after = learner.optimizers["learner"].state_dict()
    assert weights_equal(restored.get_weights(), weights)
    assert after["state"].keys() == before["state"].keys()
    for idx, moments in before["state"].items():
        for name, value in moments.items():
            assert torch.equal(after["state"][idx][name], value), name
    # The new optimiser updates the reloaded model's parameters.
    params = {id(p) for g in learner.optimizers["learner"].param_groups for p in g["params"]}
    assert params == {id(p) for p in restored.model.parameters()}
    learner.update(batch=MultiAgentBatch({"learner": _train_batch()}, 32))
    assert not weights_equal(pmap["learner"].get_weights(), weights)


def test_learner_state_includes_spilled_policies(tmp_path):
    pmap = PolicyMap(capacity=1, cache_dir=str(tmp_path))
    pmap["a"] = make_policy()
    pmap["b"] = make_policy()
    learner = Learner(pmap, make_policy().config, policy_ids=["a", "b"])
    learner.update(batch=MultiAgentBatch({"a": _train_batch(), "b": _train_batch()}, 32))
    state = learner.get_state()  # "a" or "b" is on disk at any time
    assert set(state["optimizers"]) == {"a", "b"}
    for pid in ("a", "b"):
        assert state["optimizers"][pid]["state"], pid  # Adam moments, not a fresh optimiser
    learner.set_state(state)


def test_policy_map_is_a_dict_as_in_rllib_1():
    import pickle

    from corral.policy.policy_map import PolicyMap

    policy_map = PolicyMap(capacity=2)
    assert isinstance(policy_map, dict)
    assert not policy_map and policy_map.get("missing") is None
    assert dict(policy_map) == {} and list(policy_map.items()) == []
    assert pickle.loads(pickle.dumps(policy_map)).capacity == 2
