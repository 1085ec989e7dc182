"""RLlib 1.13's `TorchPolicy` override points in hand-written subclasses (`extra_action_out`,
`extra_grad_process`, `extra_compute_grad_fetches`), and `build_policy_class`'s learning
hooks (`get_batch_divisibility_req`, `extra_learn_fetches_fn`) in a trainer's updates."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from corral.agents.ddpg.ddpg_torch_policy import DDPGTorchPolicy
from corral.agents.dqn.dqn_torch_policy import DQNTorchPolicy
from corral.agents.pg import PGTrainer
from corral.agents.pg.pg_torch_policy import PGTorchPolicy
from corral.agents.ppo import PPOTrainer
from corral.agents.ppo.ppo_torch_policy import PPOTorchPolicy
from corral.agents.sac.sac_torch_policy import SACTorchPolicy
from corral.agents.trainer_template import build_trainer
from corral.policy.sample_batch import SampleBatch
from corral.policy.torch_policy import TorchPolicy
from tests.fixtures.configs import SMALL_CARTPOLE

CONFIG = SMALL_CARTPOLE


def trainer_of(trainer_class, policy_class, **config):
    """`trainer_class` training `policy_class` (RLlib 1.13's way: a subclass naming it)."""

    class WithPolicy(trainer_class):
        def get_default_policy_class(self, cfg):
            return policy_class

    return WithPolicy(config={**CONFIG, **config})


def flat_weights(policy) -> np.ndarray:
    return np.concatenate([w.ravel() for w in policy.get_weights().values()])


class ReinforcePolicy(TorchPolicy):
    """A policy written against RLlib 1.13's `TorchPolicy`: its own loss (a bare tensor)."""

    def loss(self, model, dist_class, train_batch):
        logits, _ = model(train_batch)
        logp = dist_class(logits, model).logp(train_batch[SampleBatch.ACTIONS])
        return -(logp * train_batch[SampleBatch.REWARDS]).mean()


# -- extra_action_out ---------------------------------------------------------------------


class FetchingPolicy(ReinforcePolicy):
    def extra_action_out(self, input_dict, state_batches, model, action_dist):
        return {
            "obs_sum": input_dict[SampleBatch.OBS].sum(-1),
            "greedy": action_dist.deterministic_sample(),
            "taken": input_dict[SampleBatch.ACTIONS],
            "value": model.value_function(),
        }


def test_extra_action_out_override_fetches_reach_the_sample_batch():
    trainer = trainer_of(PGTrainer, FetchingPolicy)
    try:
        batch = trainer.workers.local_worker().sample()
        policy = trainer.get_policy()
        obs = batch[SampleBatch.OBS]
        np.testing.assert_allclose(batch["obs_sum"], obs.sum(-1), rtol=1e-5)
        np.testing.assert_array_equal(
            batch["greedy"], batch[SampleBatch.ACTION_DIST_INPUTS].argmax(-1)
        )
        np.testing.assert_array_equal(batch["taken"], batch[SampleBatch.ACTIONS])
        np.testing.assert_allclose(batch["value"], policy.value(obs), atol=1e-5)
        # RLlib 1.13's fetches of this path beside the override's.
        np.testing.assert_allclose(
            batch[SampleBatch.ACTION_PROB], np.exp(batch[SampleBatch.ACTION_LOGP]), rtol=1e-5
        )
        _, _, extra = policy.compute_actions(obs[:3])
        assert set(extra) >= {"obs_sum", "greedy", "value", SampleBatch.ACTION_LOGP}
        trainer.train()
    finally:
        trainer.stop()


def _with_entropy_of_step(policy_class):
    """A subclass of `policy_class` adding a fetch to what `super().extra_action_out` gives."""

    class WithEntropy(policy_class):
        def extra_action_out(self, input_dict, state_batches, model, action_dist):
            fetches = super().extra_action_out(input_dict, state_batches, model, action_dist)
            fetches["entropy_of_step"] = action_dist.entropy()
            return fetches

    return WithEntropy


@pytest.mark.parametrize("algorithm", ["PPO", "A2C"])
def test_subclass_extra_action_out_gets_vf_preds_from_super(algorithm):
    # PPO's and A3C's own extra_action_out (RLlib 1.13's): the step's value predictions,
    # which GAE reads.
    from corral.agents.a3c import A2CTrainer
    from corral.agents.a3c.a3c_torch_policy import A3CTorchPolicy

    if algorithm == "PPO":
        trainer = trainer_of(
            PPOTrainer, _with_entropy_of_step(PPOTorchPolicy), sgd_minibatch_size=20, num_sgd_iter=2
        )
    else:
        trainer = trainer_of(A2CTrainer, _with_entropy_of_step(A3CTorchPolicy))
    try:
        batch = trainer.workers.local_worker().sample()
        policy = trainer.get_policy()
        assert batch["entropy_of_step"].shape == (batch.count,)
        np.testing.assert_allclose(
            batch[SampleBatch.VF_PREDS], policy.value(batch[SampleBatch.OBS]), atol=1e-5
        )
        result = trainer.train()
        assert "policy_loss" in result["info"]["learner"]["default_policy"]["learner_stats"]
    finally:
        trainer.stop()


@pytest.mark.parametrize("vtrace", [False, True])
def test_appo_subclass_extra_action_out_gets_vf_preds_from_super(vtrace):
    from corral.agents.ppo import APPOTrainer
    from corral.agents.ppo.appo_torch_policy import APPOTorchPolicy

    trainer = trainer_of(
        APPOTrainer,
        _with_entropy_of_step(APPOTorchPolicy),
        vtrace=vtrace,
        min_time_s_per_reporting=0,
    )
    try:
        batch = trainer.workers.local_worker().sample()
        policy = trainer.get_policy()
        assert batch["entropy_of_step"].shape == (batch.count,)
        if vtrace:  # RLlib 1.13's `add_values`: V-trace computes its values in the loss
            assert SampleBatch.VF_PREDS not in batch
        else:  # GAE on the workers reads them
            np.testing.assert_allclose(
                batch[SampleBatch.VF_PREDS], policy.value(batch[SampleBatch.OBS]), atol=1e-5
            )
            assert SampleBatch.ADVANTAGES in batch
        trainer.train()
    finally:
        trainer.stop()


def test_dqn_subclass_extra_action_out_reaches_the_sample_batch():
    class QFetching(DQNTorchPolicy):
        def extra_action_out(self, input_dict, state_batches, model, action_dist):
            return {"q_max": action_dist.inputs.max(-1).values}

    from corral.agents.dqn import DQNTrainer

    trainer = trainer_of(DQNTrainer, QFetching, learning_starts=0)
    try:
        batch = trainer.workers.local_worker().sample()
        np.testing.assert_allclose(
            batch["q_max"], batch[SampleBatch.ACTION_DIST_INPUTS].max(-1), rtol=1e-5
        )
    finally:
        trainer.stop()


# -- extra_grad_process -------------------------------------------------------------------


class ClippingPolicy(ReinforcePolicy):
    seen: list = []

    def extra_grad_process(self, optimizer, loss):
        # After backward (the policy head's gradients are there), before the step.
        params = [p for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
        assert params
        before = torch.nn.utils.clip_grad_norm_(params, 1e-3)
        after = torch.linalg.vector_norm(torch.stack([p.grad.norm() for p in params]))
        self.seen.append((float(before), float(after)))
        return {"my_grad_norm": before}


def test_extra_grad_process_override_runs_before_the_step_and_reports_its_stats():
    ClippingPolicy.seen = []
    trainer = trainer_of(PGTrainer, ClippingPolicy)
    try:
        policy = trainer.get_policy()
        before = flat_weights(policy)
        stats = trainer.train()["info"]["learner"]["default_policy"]["learner_stats"]
        after = flat_weights(policy)
        seen = list(ClippingPolicy.seen)
        assert seen and all(b > 1e-3 and a <= 1e-3 * 1.01 for b, a in seen)
        assert stats["my_grad_norm"] == pytest.approx(seen[-1][0], rel=1e-4)
        assert "total_loss" in stats
        # One Adam step on clipped gradients: each weight moves by about lr at most.
        assert 0 < np.abs(after - before).max() <= 1.5 * trainer.config["lr"]
        # The policy-level gradients go through it too.
        batch = trainer.workers.local_worker().sample()
        grads, info = policy.compute_gradients(batch)
        norm = np.sqrt(sum(float((g**2).sum()) for g in grads if g is not None))
        assert norm <= 1e-3 * 1.01 and "my_grad_norm" in info["learner_stats"]
    finally:
        trainer.stop()


def test_ppo_subclass_extra_grad_process_super_clips_to_grad_clip():
    calls = []

    class ClipAndCount(PPOTorchPolicy):
        def extra_grad_process(self, optimizer, loss):
            out = super().extra_grad_process(optimizer, loss)  # RLlib's PPO: grad_clip
            params = [p for g in optimizer.param_groups for p in g["params"]]
            calls.append(float(torch.nn.utils.get_total_norm([p.grad for p in params])))
            return {**out, "counted": len(calls)}

    trainer = trainer_of(
        PPOTrainer, ClipAndCount, sgd_minibatch_size=20, num_sgd_iter=2, grad_clip=1e-3
    )
    try:
        stats = trainer.train()["info"]["learner"]["default_policy"]["learner_stats"]
    finally:
        trainer.stop()
    assert len(calls) == 4  # one per minibatch: 2 epochs of 2
    assert all(norm <= 1e-3 * 1.01 for norm in calls)
    assert stats["grad_gnorm"] > 1e-3 and stats["counted"] == pytest.approx(2.5)


# -- extra_compute_grad_fetches -----------------------------------------------------------


class FetchesPolicy(ReinforcePolicy):
    def extra_compute_grad_fetches(self):
        return {"learner_stats": {}, "td_error": torch.arange(3.0), "marker": 7}


def test_extra_compute_grad_fetches_override_joins_learn_on_batch_and_train_results():
    trainer = trainer_of(PGTrainer, FetchesPolicy)
    try:
        policy = trainer.get_policy()
        batch = trainer.workers.local_worker().sample()
        info = policy.learn_on_batch(batch)
        np.testing.assert_array_equal(info["td_error"], [0.0, 1.0, 2.0])
        assert info["marker"] == 7 and "total_loss" in info["learner_stats"]
        assert info["num_agent_steps_trained"] == batch.count
        _, grad_info = policy.compute_gradients(batch)
        assert grad_info["marker"] == 7 and "total_loss" in grad_info["learner_stats"]
        learner = trainer.train()["info"]["learner"]["default_policy"]
        assert learner["marker"] == 7 and "total_loss" in learner["learner_stats"]
    finally:
        trainer.stop()


# -- the default paths --------------------------------------------------------------------


def test_classes_without_overrides_keep_torch_policy_s_paths():
    for cls in (PPOTorchPolicy, PGTorchPolicy, DQNTorchPolicy, ReinforcePolicy):
        assert cls.compute_actions_from_obs is TorchPolicy.compute_actions_from_obs, cls
        assert getattr(cls, "learn_step", None) is None, cls
        assert cls.learn_on_batch is TorchPolicy.learn_on_batch, cls
        assert not cls._processes_grads and not cls._learn_fetches, cls
    assert FetchingPolicy.compute_actions_from_obs is not TorchPolicy.compute_actions_from_obs
    assert getattr(ClippingPolicy, "learn_step", None) is not None
    assert FetchesPolicy.learn_on_batch is not TorchPolicy.learn_on_batch


def test_overrides_on_classes_with_their_own_acting_or_updates_are_refused():
    with pytest.raises(NotImplementedError, match="extra_action_out"):

        class ActingOwn(DDPGTorchPolicy):
            def extra_action_out(self, input_dict, state_batches, model, action_dist):
                return {}

    with pytest.raises(NotImplementedError, match="extra_grad_process"):

        class StepOwn(SACTorchPolicy):
            def extra_grad_process(self, optimizer, loss):
                return {}


# -- build_policy_class's learning hooks in a trainer's updates ----------------------------


def loss_rows(policy_class):
    """`policy_class` with a loss that records the rows (and `seq_lens`) it trains on."""
    rows: list = []
    loss = policy_class.loss

    class Recording(policy_class):
        def loss(self, model, dist_class, train_batch):
            seq_lens = train_batch.get(SampleBatch.SEQ_LENS)
            rows.append((len(train_batch[SampleBatch.OBS]), seq_lens))
            return loss(self, model, dist_class, train_batch)

    return Recording, rows


def test_divisibility_and_learn_fetches_of_a_built_policy_reach_a_built_trainer():
    built = PGTorchPolicy.with_updates(
        name="Chunked",
        get_batch_divisibility_req=lambda policy: 8,
        extra_learn_fetches_fn=lambda policy: {"marker": 7.0},
    )
    policy_class, rows = loss_rows(built)
    # (Its training step is RLlib 1.13's default: minibatches of `sgd_minibatch_size` rows,
    # here all of them in one.)
    defaults = {**PGTrainer._default_config, "sgd_minibatch_size": 128}
    Trainer = build_trainer("ChunkedPG", default_policy=PGTorchPolicy, default_config=defaults)
    # (`with_updates` of a built trainer, as RLlib's users swapped policies in.)
    Trainer = Trainer.with_updates(name="ChunkedPG2", default_policy=policy_class)
    trainer = Trainer(config={**CONFIG, "rollout_fragment_length": 25, "train_batch_size": 50})
    try:
        learner = trainer.train()["info"]["learner"]["default_policy"]
    finally:
        trainer.stop()
    assert learner["marker"] == 7.0 and "policy_loss" in learner["learner_stats"]
    # 50 rows do not divide by 8: every trajectory padded to whole chunks of 8 rows.
    count, seq_lens = rows[-1]
    assert count > 50 and count % 8 == 0
    assert int(seq_lens.sum()) == 50 and len(seq_lens) == count // 8


def test_divisibility_of_a_built_policy_in_ppo_s_minibatches():
    built = PPOTorchPolicy.with_updates(
        name="ChunkedPPO",
        get_batch_divisibility_req=lambda policy: 8,
        extra_learn_fetches_fn=lambda policy: {"marker": 7.0},
    )
    policy_class, rows = loss_rows(built)
    trainer = trainer_of(
        PPOTrainer,
        policy_class,
        rollout_fragment_length=25,
        train_batch_size=50,
        sgd_minibatch_size=28,
        num_sgd_iter=2,
    )
    try:
        learner = trainer.train()["info"]["learner"]["default_policy"]
    finally:
        trainer.stop()
    assert learner["marker"] == 7.0 and "policy_loss" in learner["learner_stats"]
    # Padded to >= 56 rows, the batch gives two minibatches of 28 per epoch (50 rows: one),
    # without the per-chunk `seq_lens` (the minibatches are rows).
    assert len(rows) >= 4 and all(n == 28 and s is None for n, s in rows)
