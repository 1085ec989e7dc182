"""APPO: RLlib 1.13's defaults, IMPALA's asynchronous architecture, the loss against a
hand computation, the target network's refresh interval and the adaptive KL term."""

from __future__ import annotations

import time

import numpy as np
import pytest
import torch

from corral.agents.impala import ImpalaTrainer
from corral.agents.ppo import APPOTrainer
from corral.agents.ppo.appo import DEFAULT_CONFIG
from corral.agents.registry import get_trainer_class
from corral.policy.sample_batch import SampleBatch

CONFIG = {
    "env": "CartPole-v1",
    "num_workers": 0,
    "min_time_s_per_reporting": 0,
    "rollout_fragment_length": 50,
    "train_batch_size": 100,
    "seed": 0,
}


def test_registry_and_rllib_defaults():
    assert get_trainer_class("APPO") is APPOTrainer
    assert issubclass(APPOTrainer, ImpalaTrainer)
    assert DEFAULT_CONFIG["vtrace"] is True
    assert DEFAULT_CONFIG["clip_param"] == 0.4
    assert DEFAULT_CONFIG["train_batch_size"] == 500
    assert DEFAULT_CONFIG["min_time_s_per_reporting"] == 10
    assert DEFAULT_CONFIG["replay_buffer_num_slots"] == 100
    assert DEFAULT_CONFIG["learner_queue_size"] == 16


def _trained(config, iterations=2):
    trainer = APPOTrainer(config={**CONFIG, **config})
    results = []
    try:
        for _ in range(iterations):
            results.append(trainer.train())
    except BaseException:
        trainer.stop()
        raise
    return trainer, results


@pytest.mark.parametrize("vtrace", [True, False])
def test_trains_and_reports_loss_terms(vtrace):
    trainer, results = _trained({"vtrace": vtrace, "target_update_frequency": 1}, 3)
    try:
        # The learner thread reports its stats from its first update on (as RLlib's); on
        # a loaded machine that first update (building the optimiser) can take longer
        # than three short iterations.
        deadline = time.monotonic() + 120
        while "default_policy" not in results[-1]["info"]["learner"]:
            assert time.monotonic() < deadline, "the learner thread reported no update in 120 s"
            results.append(trainer.train())
        info = results[-1]["info"]
        stats = info["learner"]["default_policy"]["learner_stats"]
        assert {"total_loss", "policy_loss", "vf_loss", "entropy", "mean_kl"} <= set(stats)
        assert info["num_env_steps_trained"] > 0 and "policy_lag" in info
        policy = trainer.get_policy()
        with trainer._learning_paused():
            after = policy.get_weights()
            # target_update_frequency=1: the target follows every update.
            for k, v in policy.target_model.state_dict().items():
                np.testing.assert_allclose(v.numpy(), after[k])
    finally:
        trainer.stop()


def test_remote_workers_and_kl_loss():
    trainer, results = _trained(
        {"num_workers": 2, "use_kl_loss": True, "min_time_s_per_reporting": 1}, 2
    )
    try:
        stats = results[-1]["info"]["learner"]["default_policy"]["learner_stats"]
        assert "cur_kl_coeff" in stats
        assert results[-1]["num_healthy_workers"] == 2
    finally:
        trainer.stop()


def test_target_is_refreshed_every_target_update_frequency_updates():
    trainer = APPOTrainer(config={**CONFIG, "target_update_frequency": 3})
    try:
        policy = trainer.get_policy()
        assert policy.target_update_frequency() == 3
        refreshed = [bool(policy.after_update({})) for _ in range(6)]
        assert refreshed == [False, False, True, False, False, True]
        policy.config = {**policy.config, "target_update_frequency": None, "num_sgd_iter": 2}
        assert policy.target_update_frequency() == 2  # num_sgd_iter * minibatch_buffer_size
    finally:
        trainer.stop()


def test_kl_coefficient_adapts():
    trainer = APPOTrainer(config={**CONFIG, "use_kl_loss": True, "kl_target": 0.01})
    try:
        policy = trainer.get_policy()
        assert policy.update_kl(0.05) == pytest.approx(1.5)
        assert policy.update_kl(0.001) == pytest.approx(0.75)
        assert policy.update_kl(0.01) == pytest.approx(0.75)
    finally:
        trainer.stop()


def test_loss_equals_a_hand_computation():
    """One terminated 3-step episode: V-trace with pi_old as target, then the clipped
    surrogate with the behaviour/target ratio, all written out by hand."""
    cfg = {"gamma": 0.9, "clip_param": 0.2, "vf_loss_coeff": 0.5, "entropy_coeff": 0.01}
    trainer = APPOTrainer(config={**CONFIG, **cfg})
    try:
        policy = trainer.get_policy()
        torch.manual_seed(3)
        with torch.no_grad():  # a target net that differs from the current one
            for p in policy.target_model.parameters():
                p.add_(0.3 * torch.randn_like(p))
        obs = torch.randn(3, 4)
        actions = torch.tensor([0, 1, 1])
        behaviour_logits = torch.tensor([[0.2, -0.1], [0.0, 0.5], [1.0, 0.0]])
        batch = {
            SampleBatch.OBS: obs,
            SampleBatch.NEXT_OBS: torch.randn(3, 4),
            SampleBatch.ACTIONS: actions,
            SampleBatch.REWARDS: torch.tensor([1.0, 0.0, 2.0]),
            SampleBatch.TERMINATEDS: torch.tensor([False, False, True]),
            SampleBatch.TRUNCATEDS: torch.zeros(3, dtype=torch.bool),
            SampleBatch.EPS_ID: torch.tensor([1, 1, 1]),
            SampleBatch.T: torch.tensor([0, 1, 2]),
            SampleBatch.ACTION_DIST_INPUTS: behaviour_logits,
        }
        total, stats = policy.loss(policy.model, policy.dist_class, batch)

        with torch.no_grad():
            logits, _ = policy.model({"obs": obs}, [], None)
            values = policy.model.value_function()
            old_logits, _ = policy.target_model({"obs": obs}, [], None)

        def logp(lg):
            return torch.log_softmax(lg, -1)[torch.arange(3), actions]

        pi, mu, old = logp(logits), logp(behaviour_logits), logp(old_logits)
        rho = torch.exp(old - mu)
        c = rho.clamp(max=1.0)
        rho_c = rho.clamp(max=1.0)
        g = 0.9
        r = [1.0, 0.0, 2.0]
        v = values.tolist()
        # V-trace, terminal after step 2 (no bootstrap).
        d2 = rho_c[2] * (r[2] - v[2])
        d1 = rho_c[1] * (r[1] + g * v[2] - v[1])
        d0 = rho_c[0] * (r[0] + g * v[1] - v[0])
        a2 = d2
        a1 = d1 + g * c[1] * a2
        a0 = d0 + g * c[0] * a1
        vs = torch.stack([v[0] + a0, v[1] + a1, v[2] + a2])
        adv = torch.stack(
            [
                rho_c[0] * (r[0] + g * vs[1] - v[0]),
                rho_c[1] * (r[1] + g * vs[2] - v[1]),
                rho_c[2] * (r[2] - v[2]),
            ]
        )
        ratio = torch.clamp(torch.exp(mu - old), 0, 2) * torch.exp(pi - mu)
        surrogate = torch.minimum(adv * ratio, adv * ratio.clamp(0.8, 1.2))
        probs = torch.softmax(logits, -1)
        entropy = -(probs * torch.log(probs)).sum(-1)
        expected = (
            -surrogate.mean() + 0.5 * 0.5 * ((values - vs) ** 2).mean() - 0.01 * entropy.mean()
        )
        assert float(total.detach()) == pytest.approx(float(expected), rel=1e-5)
        assert float(stats["vf_loss"]) == pytest.approx(float(0.5 * ((values - vs) ** 2).mean()))
    finally:
        trainer.stop()


def test_vtrace_false_needs_gae():
    with pytest.raises(ValueError, match="use_gae"):
        APPOTrainer(config={**CONFIG, "vtrace": False, "use_gae": False})
