"""A3C: workers' gradients applied as they arrive equal the synchronous update."""

import copy

import numpy as np
import pytest
import torch

from corral.agents.a3c import DEFAULT_CONFIG, A3CTrainer
from corral.agents.a3c.a3c import sample_and_compute_gradients

CONFIG = {
    "env": "CartPole-v1",
    "num_workers": 0,
    "rollout_fragment_length": 10,
    "min_time_s_per_reporting": 0,
    "seed": 0,
}


def test_rllib_defaults():
    assert DEFAULT_CONFIG["rollout_fragment_length"] == 10
    assert DEFAULT_CONFIG["lr"] == 0.0001
    assert DEFAULT_CONFIG["sample_async"] is True
    assert DEFAULT_CONFIG["grads_per_step"] == 1


def test_applied_gradients_equal_the_synchronous_update_on_the_same_batch():
    trainer = A3CTrainer(config=CONFIG)
    try:
        local = trainer.workers.local_worker()
        policy = trainer.get_policy()
        learner = trainer.learner_group.local_learner
        batch = local.sample()
        weights = policy.get_weights()
        optimizer_state = copy.deepcopy(learner.optimizers["default_policy"].state_dict())

        # Synchronous: one update of the learner on the whole batch (A2C's step).
        learner.update(batch=batch.as_multi_agent())
        synchronous = policy.get_weights()

        # Asynchronous: gradients as a worker computes them, applied by the driver.
        policy.set_weights(weights)
        learner.optimizers["default_policy"].load_state_dict(optimizer_state)
        grads, info = policy.compute_gradients(batch)
        assert "policy_loss" in info["learner_stats"]
        trainer._apply(
            {
                "grads": {"default_policy": grads},
                "infos": {"default_policy": info},
                "env_steps": batch.count,
                "agent_steps": batch.count,
            },
            None,
        )
        asynchronous = policy.get_weights()
        assert any(not np.allclose(weights[k], synchronous[k]) for k in weights)
        for k in weights:
            np.testing.assert_allclose(asynchronous[k], synchronous[k], rtol=1e-6, atol=1e-7)
    finally:
        trainer.stop()


def test_worker_function_computes_the_gradient_of_its_fragment():
    trainer = A3CTrainer(config=CONFIG)
    try:
        local = trainer.workers.local_worker()
        torch.manual_seed(0)
        out = sample_and_compute_gradients(local)
        assert out["env_steps"] == 10 and set(out["grads"]) == {"default_policy"}
        params = list(trainer.get_policy().model.parameters())
        assert [g.shape for g in out["grads"]["default_policy"]] == [p.shape for p in params]
    finally:
        trainer.stop()


def test_trains_asynchronously_with_remote_workers():
    trainer = A3CTrainer(config={**CONFIG, "num_workers": 2, "grads_per_step": 6})
    try:
        before = trainer.get_policy().get_weights()
        result = trainer.train()
        assert result["num_env_steps_trained"] >= 60  # 6 gradients of 10 steps
        assert result["num_healthy_workers"] == 2
        assert result["info"]["policy_lag"]["mean"] >= 0
        stats = result["info"]["learner"]["default_policy"]["learner_stats"]
        assert "vf_loss" in stats
        after = trainer.get_policy().get_weights()
        assert any(not np.allclose(before[k], after[k]) for k in before)
        # The workers got the new weights back.
        remote = trainer.workers.remote_workers()[0].call("get_weights").result()
        trainer.train()
        assert remote["default_policy"].keys() == after.keys()
    finally:
        trainer.stop()


def test_remote_learners_are_refused():
    with pytest.raises(NotImplementedError, match="num_learners"):
        A3CTrainer(config={**CONFIG, "num_learners": 1})


def test_rllib_optimizer_grads_per_step_is_a3cs_grads_per_step():
    # RLlib configs put it under `optimizer` (Adam's keyword arguments in corral).
    trainer = A3CTrainer(config={**CONFIG, "optimizer": {"grads_per_step": 3, "eps": 1e-7}})
    try:
        assert trainer.config["grads_per_step"] == 3
        assert trainer.config["optimizer"] == {"eps": 1e-7}
        assert trainer.train()["num_env_steps_trained"] >= 30  # 3 gradients of 10 steps
    finally:
        trainer.stop()
    with pytest.raises(ValueError, match="grads_per_step=2 and grads_per_step=4"):
        A3CTrainer(config={**CONFIG, "grads_per_step": 4, "optimizer": {"grads_per_step": 2}})
    with pytest.raises(ValueError, match="optimizer.grads_per_step must be an int >= 1, got 0"):
        A3CTrainer(config={**CONFIG, "optimizer": {"grads_per_step": 0}})
