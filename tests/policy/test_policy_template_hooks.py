"""RLlib 1.13's acting and learning hooks of `build_policy_class` / `with_updates`."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from corral.agents.a3c.a3c_torch_policy import vf_preds_fetches
from corral.agents.ddpg.ddpg_torch_policy import DDPGTorchPolicy
from corral.agents.pg import PGTrainer
from corral.agents.pg.pg_torch_policy import PGTorchPolicy
from corral.models import ModelCatalog
from corral.models.torch.torch_action_dist import TorchCategorical
from corral.policy.policy_template import build_policy_class
from corral.policy.sample_batch import SampleBatch
from corral.policy.torch_policy import _directStepOptimizerSingleton
from tests.fixtures.configs import SMALL_CARTPOLE

CONFIG = SMALL_CARTPOLE


def trainer_with(policy_class, **config):
    class HookedPG(PGTrainer):
        def get_default_policy_class(self, cfg):
            return policy_class

    return HookedPG(config={**CONFIG, **config})


def sample_of(trainer) -> SampleBatch:
    return trainer.workers.local_worker().sample()


def flat_weights(policy) -> np.ndarray:
    return np.concatenate([w.ravel() for w in policy.get_weights().values()])


# -- acting -------------------------------------------------------------------------------


def test_extra_action_out_fn_adds_a_sample_batch_column():
    def extra(policy, input_dict, state_batches, model, action_dist):
        assert isinstance(action_dist, TorchCategorical)
        fetches = vf_preds_fetches(policy, input_dict, state_batches, model, action_dist)
        fetches["obs_sum"] = input_dict[SampleBatch.OBS].sum(-1)
        fetches["greedy"] = action_dist.deterministic_sample()
        return fetches

    trainer = trainer_with(PGTorchPolicy.with_updates(extra_action_out_fn=extra))
    try:
        batch = sample_of(trainer)
        policy = trainer.get_policy()
        np.testing.assert_allclose(batch["obs_sum"], batch[SampleBatch.OBS].sum(-1), rtol=1e-5)
        logits = batch[SampleBatch.ACTION_DIST_INPUTS]
        np.testing.assert_array_equal(batch["greedy"], logits.argmax(-1))
        # vf_preds_fetches: the model's value predictions of the step (PG's
        # postprocessing, without a critic, zeroes the column of the batch).
        obs = batch[SampleBatch.OBS]
        _, extra_out = policy.compute_actions_from_obs(obs)
        np.testing.assert_allclose(extra_out[SampleBatch.VF_PREDS], policy.value(obs), atol=1e-5)
        np.testing.assert_allclose(
            batch[SampleBatch.ACTION_PROB], np.exp(batch[SampleBatch.ACTION_LOGP]), rtol=1e-5
        )
        trainer.train()
    finally:
        trainer.stop()


def test_action_sampler_fn_actions_are_the_ones_taken():
    seen = {}

    def sampler(policy, model, input_dict, state_batches, explore, timestep):
        seen["args"] = (type(input_dict), state_batches, explore, timestep)
        n = len(input_dict[SampleBatch.OBS])
        return torch.ones(n, dtype=torch.int64), torch.zeros(n)

    def action_one(policy, input_dict, state_batches, model, action_dist):
        assert action_dist is None  # (no distribution under an action sampler)
        return {"taken": input_dict[SampleBatch.ACTIONS]}

    policy_class = PGTorchPolicy.with_updates(
        action_sampler_fn=sampler, extra_action_out_fn=action_one
    )
    trainer = trainer_with(policy_class)
    try:
        batch = sample_of(trainer)
        assert (batch[SampleBatch.ACTIONS] == 1).all()
        assert (batch["taken"] == 1).all()
        assert SampleBatch.ACTION_DIST_INPUTS not in batch
        assert seen["args"][0] is dict and seen["args"][1] == []
        assert seen["args"][2] is True
        # The RLlib-named API acts through it too.
        actions, _, extra = trainer.get_policy().compute_actions(batch[SampleBatch.OBS][:3])
        np.testing.assert_array_equal(actions, [1, 1, 1])
        np.testing.assert_array_equal(extra[SampleBatch.ACTION_LOGP], [0.0, 0.0, 0.0])
    finally:
        trainer.stop()


def test_action_sampler_fn_with_four_outputs_and_the_old_obs_batch_form():
    def sampler(policy, model, obs_batch, *, explore, timestep):
        n = len(obs_batch)
        logits = torch.tensor([[0.0, 5.0]]).repeat(n, 1)
        return torch.zeros(n, dtype=torch.int64), torch.full((n,), -0.5), logits, []

    policy = PGTorchPolicy.with_updates(action_sampler_fn=sampler)(
        *_cartpole_spaces(), {**_pg_config()}
    )
    actions, extra = policy.compute_actions_from_obs(np.zeros((4, 4), np.float32))
    np.testing.assert_array_equal(actions, 0)
    np.testing.assert_allclose(extra[SampleBatch.ACTION_DIST_INPUTS], [[0.0, 5.0]] * 4)
    np.testing.assert_allclose(extra[SampleBatch.ACTION_LOGP], -0.5)


def test_action_distribution_fn_s_distribution_is_used():
    calls = []

    def distribution(
        policy, model, input_dict, *, state_batches, seq_lens, explore, timestep, is_training
    ):
        calls.append(is_training)
        logits, state = model(input_dict, state_batches, seq_lens)
        # Action 0 almost surely, whatever the model says.
        return logits * 0 + torch.tensor([20.0, -20.0]), TorchCategorical, state

    trainer = trainer_with(
        PGTorchPolicy.with_updates(
            action_distribution_fn=distribution, extra_action_out_fn=vf_preds_fetches
        )
    )
    try:
        batch = sample_of(trainer)
        assert calls and not any(calls)
        assert (batch[SampleBatch.ACTIONS] == 0).all()
        np.testing.assert_allclose(batch[SampleBatch.ACTION_DIST_INPUTS], [[20.0, -20.0]] * 20)
        assert SampleBatch.VF_PREDS in batch
        trainer.train()
    finally:
        trainer.stop()


def test_action_distribution_fn_in_rllib_s_older_form():
    def distribution(policy, model, obs_batch, explore=True, timestep=None, is_training=False):
        assert torch.is_tensor(obs_batch)
        return torch.tensor([[-20.0, 20.0]]).repeat(len(obs_batch), 1), TorchCategorical, []

    policy = PGTorchPolicy.with_updates(action_distribution_fn=distribution)(
        *_cartpole_spaces(), _pg_config()
    )
    actions, extra = policy.compute_actions_from_obs(np.zeros((5, 4), np.float32))
    np.testing.assert_array_equal(actions, 1)
    assert set(extra) == {
        SampleBatch.ACTION_DIST_INPUTS,
        SampleBatch.ACTION_LOGP,
        SampleBatch.ACTION_PROB,
    }
    # The hooked path acts on the policy's device too.
    policy.to_device("cpu")
    np.testing.assert_array_equal(
        policy.compute_actions_from_obs(np.zeros((2, 4), np.float32))[0], 1
    )


def test_action_distribution_fn_of_a_recurrent_policy_carries_its_state():
    def distribution(
        policy, model, input_dict, *, state_batches, seq_lens, explore, timestep, is_training
    ):
        assert len(state_batches) == 2 and seq_lens is not None
        logits, state = model(input_dict, state_batches, seq_lens)
        return logits, policy.dist_class, state

    policy_class = PGTorchPolicy.with_updates(action_distribution_fn=distribution)
    trainer = trainer_with(
        policy_class, model={"use_lstm": True, "lstm_cell_size": 8, "max_seq_len": 5}
    )
    try:
        batch = sample_of(trainer)
        # The state out of one step is the state into the next (in an episode).
        same = batch[SampleBatch.EPS_ID][1:] == batch[SampleBatch.EPS_ID][:-1]
        np.testing.assert_allclose(
            batch["state_in_0"][1:][same], batch["state_out_0"][:-1][same], rtol=1e-6
        )
        assert np.abs(batch["state_out_0"]).sum() > 0
        assert (
            "policy_loss" in trainer.train()["info"]["learner"]["default_policy"]["learner_stats"]
        )
    finally:
        trainer.stop()


class CountingCategorical(TorchCategorical):
    made = 0

    def __init__(self, inputs, model=None, temperature=1.0):
        CountingCategorical.made += 1
        super().__init__(inputs, model, temperature)


def test_make_model_and_action_dist_gives_model_and_distribution():
    def make(policy, obs_space, action_space, config):
        model = ModelCatalog.get_model_v2(
            obs_space, action_space, 2, {**config["model"], "fcnet_hiddens": [7]}
        )
        return model, CountingCategorical

    policy_class = PGTorchPolicy.with_updates(make_model_and_action_dist=make)
    CountingCategorical.made = 0
    trainer = trainer_with(policy_class)
    try:
        policy = trainer.get_policy()
        assert policy.dist_class is CountingCategorical
        assert any(w.shape == (7, 4) for w in policy.get_weights().values())
        trainer.train()
        assert CountingCategorical.made >= 2  # acting and the loss
    finally:
        trainer.stop()
    with pytest.raises(ValueError, match="not both"):
        PGTorchPolicy.with_updates(make_model=make, make_model_and_action_dist=make)


# -- learning -----------------------------------------------------------------------------


def test_extra_grad_process_fn_clips_and_its_stats_reach_the_learner_stats():
    norms = []

    def clip_tightly(policy, optimizer, loss):
        params = [p for g in optimizer.param_groups for p in g["params"]]
        before = torch.nn.utils.clip_grad_norm_(params, 1e-3)
        after = torch.linalg.vector_norm(
            torch.stack([p.grad.norm() for p in params if p.grad is not None])
        )
        norms.append((float(before), float(after)))
        return {"my_grad_norm": before, "loss_seen": loss.detach()}

    trainer = trainer_with(PGTorchPolicy.with_updates(extra_grad_process_fn=clip_tightly))
    try:
        before = flat_weights(trainer.get_policy())
        stats = trainer.train()["info"]["learner"]["default_policy"]["learner_stats"]
        after = flat_weights(trainer.get_policy())
    finally:
        trainer.stop()
    assert norms and all(b > 1e-3 and a <= 1e-3 * 1.01 for b, a in norms)
    assert stats["my_grad_norm"] == pytest.approx(norms[-1][0], rel=1e-4)
    assert "loss_seen" in stats and "policy_loss" in stats
    assert not np.allclose(before, after)


def test_extra_learn_fetches_fn_joins_learn_on_batch_and_compute_gradients():
    def fetches(policy):
        return {"td_error": torch.arange(3.0), "marker": 7}

    trainer = trainer_with(PGTorchPolicy.with_updates(extra_learn_fetches_fn=fetches))
    try:
        policy = trainer.get_policy()
        batch = policy.postprocess_trajectory(sample_of(trainer))
        info = policy.learn_on_batch(batch)
        np.testing.assert_array_equal(info["td_error"], [0.0, 1.0, 2.0])
        assert info["marker"] == 7 and "policy_loss" in info["learner_stats"]
        assert info["num_agent_steps_trained"] == batch.count
        grads, grad_info = policy.compute_gradients(batch)
        assert grad_info["marker"] == 7 and "policy_loss" in grad_info["learner_stats"]
        assert len(grads) == len(list(policy.model.parameters()))
    finally:
        trainer.stop()


def test_compute_and_apply_gradients_fns_replace_the_gradient_step():
    applied = []

    def zero_gradients(policy, batch):
        params = [p for opt in policy._optimizers for g in opt.param_groups for p in g["params"]]
        grads = [torch.zeros_like(p) for p in params]
        return grads, {"learner_stats": {"zeroed": 1.0}}

    def apply(policy, gradients):
        applied.append(gradients is _directStepOptimizerSingleton)
        for opt in policy._optimizers:
            opt.step()

    # Adam on zero gradients leaves the weights as they are.
    trainer = trainer_with(
        PGTorchPolicy.with_updates(compute_gradients_fn=zero_gradients, apply_gradients_fn=apply)
    )
    try:
        policy = trainer.get_policy()
        before = flat_weights(policy)
        stats = trainer.train()["info"]["learner"]["default_policy"]["learner_stats"]
        assert applied and all(applied)
        assert stats["zeroed"] == 1.0
        np.testing.assert_array_equal(before, flat_weights(policy))
    finally:
        trainer.stop()

    # apply_gradients_fn alone: the loss's gradients, stepped by the hook.
    trainer = trainer_with(PGTorchPolicy.with_updates(apply_gradients_fn=apply))
    try:
        policy = trainer.get_policy()
        before = flat_weights(policy)
        applied.clear()
        trainer.train()
        assert applied == [True]
        assert not np.allclose(before, flat_weights(policy))
        # The policy-level pair: gradients out, the hook gets them as given.
        batch = policy.postprocess_trajectory(sample_of(trainer))
        grads, info = policy.compute_gradients(batch)
        assert "policy_loss" in info["learner_stats"]
        policy.apply_gradients(grads)
        assert applied[-1] is False
    finally:
        trainer.stop()


def test_gradient_hooks_policy_level_apply_without_apply_gradients_fn():
    def keep(policy, optimizer, loss):
        return {}

    policy = PGTorchPolicy.with_updates(extra_grad_process_fn=keep)(
        *_cartpole_spaces(), _pg_config()
    )
    before = flat_weights(policy)
    grads = [np.ones(p.shape, np.float32) for p in policy.model.parameters()]
    seq = policy.weights_seq
    policy.apply_gradients(grads)
    assert not np.allclose(before, flat_weights(policy))
    assert policy.weights_seq == seq + 1
    with pytest.raises(ValueError, match="one per"):
        policy.apply_gradients(grads[:-1])


def test_gradient_hooks_are_refused_on_a_class_with_its_own_learn_step():
    with pytest.raises(NotImplementedError, match="learn_step"):
        DDPGTorchPolicy.with_updates(extra_grad_process_fn=lambda p, o, loss: {})


def test_get_batch_divisibility_req_pads_train_batches_as_rllib():
    rows = []

    def loss(policy, model, dist_class, train_batch):
        rows.append(len(train_batch[SampleBatch.OBS]))
        logits, _ = model({SampleBatch.OBS: train_batch[SampleBatch.OBS]})
        logp = dist_class(logits, model).logp(train_batch[SampleBatch.ACTIONS])
        return -(logp * train_batch[SampleBatch.REWARDS]).mean()

    Divisible = build_policy_class(
        "Divisible", "torch", loss_fn=loss, get_batch_divisibility_req=lambda p: 8
    )
    policy = Divisible(*_cartpole_spaces(), _pg_config())
    assert policy.batch_divisibility_req == 8
    batch = _episode(20)
    policy.learn_on_batch(batch)
    # One trajectory of 20 steps: three chunks of 8 rows, zero-padded.
    assert rows[-1] == 24
    policy.compute_gradients(batch)
    assert rows[-1] == 24
    assert batch.count == 20 and not batch.zero_padded  # (the caller's batch is kept)
    policy.learn_on_batch(_episode(16))
    assert rows[-1] == 16  # divides: as it is
    with pytest.raises(ValueError, match="int >= 1"):
        build_policy_class("Bad", "torch", loss_fn=loss, get_batch_divisibility_req=lambda p: 0)(
            *_cartpole_spaces(), _pg_config()
        )


def test_after_loss_init_runs_last():
    order = []

    def hook(tag):
        return lambda policy, obs_space, action_space, config: order.append(tag)

    policy_class = PGTorchPolicy.with_updates(
        before_init=hook("before_init"),
        before_loss_init=hook("before_loss_init"),
        after_init=hook("after_init"),
        _after_loss_init=hook("_after_loss_init"),
    )
    policy_class(*_cartpole_spaces(), _pg_config())
    assert order == ["before_init", "before_loss_init", "after_init", "_after_loss_init"]


# -- helpers ------------------------------------------------------------------------------


def _cartpole_spaces():
    import gymnasium as gym

    return (
        gym.spaces.Box(-np.inf, np.inf, (4,), np.float32),
        gym.spaces.Discrete(2),
    )


def _pg_config() -> dict:
    from corral.agents.pg import DEFAULT_CONFIG

    return {**DEFAULT_CONFIG, "seed": 0}


def _episode(n: int) -> SampleBatch:
    rng = np.random.default_rng(0)
    terminateds = np.zeros(n, bool)
    terminateds[-1] = True
    return SampleBatch(
        {
            SampleBatch.OBS: rng.normal(size=(n, 4)).astype(np.float32),
            SampleBatch.ACTIONS: rng.integers(0, 2, n),
            SampleBatch.REWARDS: np.ones(n, np.float32),
            SampleBatch.TERMINATEDS: terminateds,
            SampleBatch.TRUNCATEDS: np.zeros(n, bool),
            SampleBatch.EPS_ID: np.zeros(n, np.int64),
            SampleBatch.T: np.arange(n),
        }
    )
