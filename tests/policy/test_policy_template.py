"""RLlib 1.x's function-built policies: build_policy_class, with_updates, tower_stats."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from corral.agents.pg import PGTrainer
from corral.agents.pg.pg_torch_policy import PGTorchPolicy
from corral.agents.trainer import Trainer
from corral.models import ModelCatalog
from corral.models.torch.fcnet import FullyConnectedNetwork
from corral.policy.policy_template import build_policy_class
from corral.policy.sample_batch import SampleBatch

CONFIG = {
    "env": "CartPole-v1",
    "num_workers": 0,
    "rollout_fragment_length": 20,
    "train_batch_size": 40,
}


def reward_weighted_loss(policy, model, dist_class, train_batch):
    logits, _ = model({SampleBatch.CUR_OBS: train_batch[SampleBatch.CUR_OBS]})
    dist = dist_class(logits, model)
    policy.loss_calls = getattr(policy, "loss_calls", 0) + 1
    return -train_batch[SampleBatch.REWARDS].dot(dist.logp(train_batch[SampleBatch.ACTIONS]))


MyTorchPolicy = build_policy_class(
    name="MyTorchPolicy", framework="torch", loss_fn=reward_weighted_loss
)


class MyTrainer(Trainer):
    def get_default_policy_class(self, config):
        return MyTorchPolicy


def test_build_policy_class_trains_under_the_base_trainer():
    trainer = MyTrainer(config=CONFIG)
    try:
        before = trainer.get_policy().get_weights()
        result = trainer.train()
        policy = trainer.get_policy()
        assert type(policy).__name__ == "MyTorchPolicy"
        assert policy.loss_calls >= 1
        assert "total_loss" in result["info"]["learner"]["default_policy"]["learner_stats"]
        after = policy.get_weights()
        assert any(not np.allclose(before[k], after[k]) for k in before)
    finally:
        trainer.stop()


def test_build_policy_class_rejects_other_frameworks_and_unknown_hooks():
    with pytest.raises(ValueError, match="torch"):
        build_policy_class("P", "tf", loss_fn=reward_weighted_loss)
    with pytest.raises(TypeError, match="no_such_fn"):
        build_policy_class("P", "torch", loss_fn=reward_weighted_loss, no_such_fn=print)


def test_with_updates_loss_fn_and_tower_stats():
    def entropy_loss(policy, model, dist_class, train_batch):
        logits, _ = model(train_batch)
        dist = dist_class(logits, model)
        model.tower_stats["policy_loss"] = torch.tensor([0.0])
        return torch.mean(
            -0.1 * dist.entropy() - dist.logp(train_batch["actions"]) * train_batch["advantages"]
        )

    EntropyPolicy = PGTorchPolicy.with_updates(loss_fn=entropy_loss)
    assert issubclass(EntropyPolicy, PGTorchPolicy)

    class EntropyPG(PGTrainer):
        def get_default_policy_class(self, config):
            return EntropyPolicy

    trainer = EntropyPG(config=CONFIG)
    try:
        stats = trainer.train()["info"]["learner"]["default_policy"]["learner_stats"]
        assert stats["policy_loss"] == 0.0
        assert trainer.get_policy().get_tower_stats("policy_loss")
    finally:
        trainer.stop()
    # A template class rebuilds from its own functions.
    Variant = MyTorchPolicy.with_updates(name="Variant")
    assert Variant.__name__ == "Variant" and Variant._template_kwargs["loss_fn"] is not None


class CountingFC(FullyConnectedNetwork):
    """Subclasses a built-in model and overrides forward(): must not be bypassed."""

    calls = 0

    def forward(self, input_dict, state, seq_lens):
        CountingFC.calls += 1
        return super().forward(input_dict, state, seq_lens)


def test_custom_model_subclassing_a_builtin_is_not_bypassed():
    ModelCatalog.register_custom_model("counting_fc_test", CountingFC)
    CountingFC.calls = 0
    trainer = PGTrainer(config={**CONFIG, "model": {"custom_model": "counting_fc_test"}})
    try:
        trainer.train()
        # Every sampling step and every training minibatch ran the override.
        assert CountingFC.calls >= 40 + 1
    finally:
        trainer.stop()


def test_training_goes_through_the_module_call():
    hooks = []
    trainer = PGTrainer(config=CONFIG)
    try:
        trainer.get_policy().model.register_forward_hook(lambda *a: hooks.append(1))
        trainer.train()
        assert hooks
    finally:
        trainer.stop()


def test_build_torch_policy_is_rllib_1_x_s_deprecated_alias(caplog):
    from corral.policy import build_torch_policy as from_package
    from corral.policy.torch_policy_template import build_torch_policy

    assert from_package is build_torch_policy
    with caplog.at_level("WARNING"):
        policy_class = build_torch_policy("Old", loss_fn=reward_weighted_loss)
    assert "build_policy_class(framework='torch')" in caplog.text
    assert policy_class.__name__ == "Old"
    assert policy_class.loss is not MyTorchPolicy.loss  # its own loss, built from the function
