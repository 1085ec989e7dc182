"""APPO: RLlib 1.13's defaults and loss (V-trace + clipped surrogate + target network)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from corral.agents.ppo import APPOTrainer
from corral.agents.ppo.appo import DEFAULT_CONFIG
from corral.agents.registry import get_trainer_class

CONFIG = {
    "env": "CartPole-v1",
    "num_workers": 0,
    "min_time_s_per_reporting": 0,
    "rollout_fragment_length": 50,
    "train_batch_size": 100,
}


def test_registry_and_rllib_defaults():
    assert get_trainer_class("APPO") is APPOTrainer
    assert DEFAULT_CONFIG["vtrace"] is True
    assert DEFAULT_CONFIG["clip_param"] == 0.4
    assert DEFAULT_CONFIG["train_batch_size"] == 500
    assert DEFAULT_CONFIG["min_time_s_per_reporting"] == 10


@pytest.mark.parametrize("vtrace", [True, False])
def test_trains_and_reports_loss_terms(vtrace):
    trainer = APPOTrainer(config={**CONFIG, "vtrace": vtrace})
    try:
        before = trainer.get_policy().get_weights()
        result = trainer.train()
        stats = result["info"]["learner"]["default_policy"]["learner_stats"]
        assert {"total_loss", "policy_loss", "vf_loss", "entropy"} <= set(stats)
        policy = trainer.get_policy()
        after = policy.get_weights()
        assert any(not np.allclose(before[k], after[k]) for k in before)
        # The target network follows every training step.
        for k, v in policy.target_model.state_dict().items():
            np.testing.assert_allclose(v.numpy(), after[k])
    finally:
        trainer.stop()


def test_vtrace_on_policy_is_the_bootstrapped_return():
    """With behaviour = target policy (all rhos 1), v_s is the n-step return bootstrapped
    at the cut and pg advantages are r + gamma v_{s+1} - V(s)."""
    trainer = APPOTrainer(config=CONFIG)
    try:
        policy = trainer.get_policy()
        gamma = policy.config["gamma"]
        n = 4
        batch = {
            "rewards": torch.ones(n),
            "terminateds": torch.tensor([False, True, False, False]),
            "truncateds": torch.zeros(n, dtype=torch.bool),
            "eps_id": torch.tensor([1, 1, 2, 2]),
            "new_obs": torch.zeros(n, 4),
        }
        values = torch.tensor([0.5, 0.25, 0.0, 0.0])
        boot = float(policy._target_forward(torch.zeros(1, 4))[1][0])
        adv, vs = policy._vtrace(batch, values, torch.zeros(n))
        expected_vs = [1 + gamma * 1, 1.0, 1 + gamma * (1 + gamma * boot), 1 + gamma * boot]
        np.testing.assert_allclose(vs.numpy(), expected_vs, rtol=1e-5)
        expected_adv = [
            1 + gamma * expected_vs[1] - 0.5,
            1 - 0.25,
            1 + gamma * expected_vs[3],
            1 + gamma * boot,
        ]
        np.testing.assert_allclose(adv.numpy(), expected_adv, rtol=1e-5)
    finally:
        trainer.stop()


def test_unbuilt_impala_settings_raise():
    with pytest.raises(NotImplementedError, match="replay_proportion"):
        APPOTrainer(config={**CONFIG, "replay_proportion": 0.5})
