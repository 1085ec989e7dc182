"""PG and A2C: postprocessing and losses against hand computations, training end to end."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.agents.a3c import A2C_DEFAULT_CONFIG, A2CTrainer, A3CTorchPolicy
from corral.agents.config import deep_update
from corral.agents.pg import DEFAULT_CONFIG as PG_DEFAULT_CONFIG
from corral.agents.pg import PGTorchPolicy, PGTrainer
from corral.agents.registry import get_trainer_class
from corral.policy.sample_batch import SampleBatch

OBS = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
ACT = gym.spaces.Discrete(2)
SMALL = {"train_batch_size": 64, "rollout_fragment_length": 32, "seed": 0, "log_level": "ERROR"}


def policy(cls, defaults, **overrides):
    config = deep_update(
        {**defaults, "model": dict(defaults["model"])},
        {"model": {"fcnet_hiddens": [8]}, **overrides},
    )
    return cls(OBS, ACT, config)


def episode_batch(rewards, terminated_last=True):
    n = len(rewards)
    terminateds = np.zeros(n, bool)
    terminateds[-1] = terminated_last
    rng = np.random.default_rng(0)
    return SampleBatch(
        {
            SampleBatch.OBS: rng.uniform(-1, 1, (n, 3)).astype(np.float32),
            SampleBatch.NEXT_OBS: rng.uniform(-1, 1, (n, 3)).astype(np.float32),
            SampleBatch.ACTIONS: rng.integers(0, 2, n),
            SampleBatch.REWARDS: np.array(rewards, np.float32),
            SampleBatch.EPS_ID: np.zeros(n, np.int64),
            SampleBatch.TERMINATEDS: terminateds,
            SampleBatch.TRUNCATEDS: np.zeros(n, bool),
            SampleBatch.VF_PREDS: np.array([0.5] * n, np.float32),
        }
    )


def tensors(batch, columns):
    return {c: torch.as_tensor(batch[c]) for c in columns}


def test_pg_advantages_are_discounted_returns_and_loss_is_minus_mean_logp_return():
    pol = policy(PGTorchPolicy, PG_DEFAULT_CONFIG, gamma=0.5)
    batch = pol.postprocess_trajectory(episode_batch([1.0, 2.0, 4.0]))
    np.testing.assert_allclose(batch[SampleBatch.ADVANTAGES], [1 + 0.5 * (2 + 0.5 * 4), 4, 4])
    train = tensors(batch, PGTorchPolicy.train_columns)
    loss, stats = pol.loss(pol.model, pol.dist_class, train)
    logits, _ = pol.model.forward_inference(train[SampleBatch.OBS])
    logp = torch.log_softmax(logits, -1).gather(1, train[SampleBatch.ACTIONS][:, None])[:, 0]
    expected = -(logp * train[SampleBatch.ADVANTAGES]).mean()
    torch.testing.assert_close(loss, expected)
    assert stats["cur_lr"] == PG_DEFAULT_CONFIG["lr"]


def test_a2c_loss_is_rllibs_summed_actor_critic_loss():
    pol = policy(
        A3CTorchPolicy, A2C_DEFAULT_CONFIG, gamma=0.9, vf_loss_coeff=0.25, entropy_coeff=0.1
    )
    batch = pol.postprocess_trajectory(episode_batch([1.0, 0.0, 2.0, 1.0]))
    train = tensors(batch, A3CTorchPolicy.train_columns)
    loss, stats = pol.loss(pol.model, pol.dist_class, train)
    logits, values = pol.model.forward_inference(train[SampleBatch.OBS])
    logp_all = torch.log_softmax(logits, -1)
    logp = logp_all.gather(1, train[SampleBatch.ACTIONS][:, None])[:, 0]
    entropy = -(logp_all.exp() * logp_all).sum(-1)
    pi_err = -(logp * train[SampleBatch.ADVANTAGES]).sum()
    vf_err = 0.5 * ((values - train[SampleBatch.VALUE_TARGETS]) ** 2).sum()
    torch.testing.assert_close(loss, pi_err + 0.25 * vf_err - 0.1 * entropy.sum())
    torch.testing.assert_close(stats["policy_entropy"], entropy.sum())
    torch.testing.assert_close(stats["vf_loss"], vf_err)


def test_registry_and_rllib_defaults():
    assert get_trainer_class("PG") is PGTrainer
    assert get_trainer_class("A2C") is A2CTrainer
    assert (PG_DEFAULT_CONFIG["num_workers"], PG_DEFAULT_CONFIG["lr"]) == (0, 0.0004)
    assert A2C_DEFAULT_CONFIG["rollout_fragment_length"] == 20
    assert A2C_DEFAULT_CONFIG["min_iter_time_s"] == 10
    assert (A2C_DEFAULT_CONFIG["lr"], A2C_DEFAULT_CONFIG["grad_clip"]) == (0.0001, 40.0)
    assert get_trainer_class("A3C").__name__ == "A3CTrainer"  # built (asynchronous)


def test_a2c_refuses_gae_without_critic_and_microbatches_with_learners():
    with pytest.raises(ValueError, match="use_gae=True"):
        A2CTrainer(config={**SMALL, "use_critic": False}, env="CartPole-v1")
    with pytest.raises(ValueError, match="microbatch_size=16 .* num_learners=0"):
        A2CTrainer(config={**SMALL, "microbatch_size": 16, "num_learners": 1}, env="CartPole-v1")


def test_a2c_microbatches_sum_to_the_whole_batch_update():
    # A3C's loss is a sum over the batch, so summing the gradients of the microbatches
    # gives the gradient of the 64-step batch made of the same 4 fragments: the same
    # weights after one step. (microbatch_size 16 with A2C's 2 workers: each sampling
    # round brings one 16-step fragment from each, 32 steps, as in RLlib.)
    config = {
        **SMALL,
        "rollout_fragment_length": 16,
        "min_iter_time_s": 0,
        "grad_clip": None,
    }
    whole = A2CTrainer(config=config, env="CartPole-v1")
    micro = A2CTrainer(config={**config, "microbatch_size": 16}, env="CartPole-v1")
    try:
        start = whole.get_policy().get_weights()
        for name, value in micro.get_policy().get_weights().items():
            np.testing.assert_array_equal(value, start[name])
        learner = micro.learner_group.local_learner
        calls = []
        compute = learner.compute_gradients
        learner.compute_gradients = lambda pid, b: calls.append(b.count) or compute(pid, b)
        whole_result, micro_result = whole.train(), micro.train()
        assert calls == [32, 32]
        assert whole_result["timesteps_total"] == micro_result["timesteps_total"] == 64
        assert micro_result["info"]["num_env_steps_trained"] == 64
        after = micro.get_policy().get_weights()
        moved = 0.0
        for name, value in whole.get_policy().get_weights().items():
            np.testing.assert_allclose(after[name], value, rtol=0, atol=1e-6)
            moved = max(moved, float(np.abs(value - start[name]).max()))
        assert moved > 1e-5  # the step did happen
    finally:
        whole.stop()
        micro.stop()


@pytest.mark.parametrize("cls", [PGTrainer, A2CTrainer])
def test_trains_with_remote_workers_and_syncs_weights(cls):
    config = {**SMALL, "num_workers": 2, "min_iter_time_s": 0}
    trainer = cls(config=config, env="CartPole-v1")
    try:
        before = trainer.get_policy().get_weights()
        result = trainer.train()
        after = trainer.get_policy().get_weights()
        assert result["timesteps_total"] >= 64
        assert "policy_loss" in result["info"]["learner"]["default_policy"]["learner_stats"]
        assert any(not np.array_equal(before[k], after[k]) for k in before)
        remote = trainer.workers.remote_workers()[0]
        synced = remote.apply(lambda w: w.get_policy().get_weights()).result(timeout=60)
        assert all(np.array_equal(after[k], synced[k]) for k in after)
    finally:
        trainer.stop()


@pytest.mark.parametrize("cls", [PGTrainer, A2CTrainer])
def test_checkpoint_round_trip(cls, tmp_path):
    config = {**SMALL, "min_iter_time_s": 0}
    trainer = cls(config=config, env="CartPole-v1")
    restored = cls(config=config, env="CartPole-v1")
    try:
        trainer.train()
        restored.restore(trainer.save(str(tmp_path)))
        assert restored.iteration == 1
        saved, loaded = trainer.get_policy().get_weights(), restored.get_policy().get_weights()
        assert all(np.array_equal(saved[k], loaded[k]) for k in saved)
    finally:
        trainer.stop()
        restored.stop()
