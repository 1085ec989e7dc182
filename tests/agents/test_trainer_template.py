"""build_trainer: classic execution plans, training_step functions, with_updates."""

import pytest

from corral.agents.ppo import DEFAULT_CONFIG, PPOTrainer
from corral.agents.ppo.ppo_torch_policy import PPOTorchPolicy
from corral.agents.trainer import Trainer
from corral.agents.trainer_template import build_trainer
from corral.execution import synchronous_parallel_sample

SMALL = {
    "num_workers": 0,
    "rollout_fragment_length": 50,
    "train_batch_size": 100,
    "sgd_minibatch_size": 50,
    "num_sgd_iter": 1,
    "model": {"fcnet_hiddens": [16]},
}


def sampling_plan(workers, config, **kwargs):
    """A classic plan: sample, report steps (no learning)."""
    while True:
        batch = synchronous_parallel_sample(workers, max_env_steps=config["train_batch_size"])
        yield {"timesteps_this_iter": batch.env_steps(), "plan_marker": True}


def test_execution_plan_trainer():
    seen = []
    Built = build_trainer(
        "Sampler",
        default_config=DEFAULT_CONFIG,
        default_policy=PPOTorchPolicy,
        validate_config=lambda config: seen.append("validated"),
        execution_plan=sampling_plan,
    )
    assert issubclass(Built, Trainer) and Built.__name__ == "Sampler"
    t = Built(config=SMALL, env="CartPole-v1")
    try:
        assert repr(t) == "Sampler" and seen == ["validated"]
        first, second = t.train(), t.train()
        assert first["plan_marker"] and second["training_iteration"] == 2
        assert second["timesteps_total"] == 200
    finally:
        t.stop()


def test_training_step_trainer_with_mixins_and_policy_choice():
    class Mixin:
        def extra(self):
            return "mixed in"

    Built = build_trainer(
        "MyPPO",
        default_config=DEFAULT_CONFIG,
        get_policy_class=lambda config: PPOTorchPolicy,
        training_step=PPOTrainer.training_step,
        mixins=[Mixin],
    )
    t = Built(config=SMALL, env="CartPole-v1")
    try:
        assert t.extra() == "mixed in"
        assert t.get_default_policy_class(t.config) is PPOTorchPolicy
        stats = t.train()["info"]["learner"]["default_policy"]["learner_stats"]
        assert "total_loss" in stats
    finally:
        t.stop()


def test_with_updates_builds_a_variant():
    Base = build_trainer(
        "Base",
        default_config=DEFAULT_CONFIG,
        default_policy=PPOTorchPolicy,
        execution_plan=sampling_plan,
    )
    Variant = Base.with_updates(name="Variant", default_config={**DEFAULT_CONFIG, "lr": 0.123})
    assert Variant.__name__ == "Variant" and Variant is not Base
    assert Variant.get_default_config()["lr"] == 0.123
    assert Base.get_default_config()["lr"] != 0.123
    with pytest.raises(NotImplementedError, match="build_trainer"):
        PPOTrainer.with_updates(name="x")


def test_plan_and_training_step_are_exclusive():
    with pytest.raises(ValueError, match="not both"):
        build_trainer("X", execution_plan=sampling_plan, training_step=lambda t: {})
