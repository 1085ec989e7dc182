"""LearningRateSchedule / EntropyCoeffSchedule: values follow the global timestep, and the
learner trains with the scheduled learning rate."""

import pytest

from corral.agents.a3c import A2CTrainer
from corral.agents.ppo import PPOTrainer

SMALL = {
    "train_batch_size": 64,
    "rollout_fragment_length": 32,
    "sgd_minibatch_size": 32,
    "num_sgd_iter": 1,
    "min_iter_time_s": 0,
    "seed": 0,
    "log_level": "ERROR",
    "lr_schedule": [[0, 1e-3], [1000, 0.0]],
    "entropy_coeff_schedule": [[0, 0.1], [1000, 0.02]],
}


@pytest.mark.parametrize("cls", [PPOTrainer, A2CTrainer])
def test_schedules_follow_the_global_timestep(cls):
    config = {k: v for k, v in SMALL.items() if k in cls.get_default_config()}
    trainer = cls(config=config, env="CartPole-v1")
    try:
        policy = trainer.get_policy()
        assert (policy.cur_lr, policy.entropy_coeff) == (1e-3, 0.1)
        trainer.train()  # ends by telling the policies the timestep: 64
        assert policy.cur_lr == pytest.approx(1e-3 * (1 - 64 / 1000))
        trainer.train()  # the second update runs at that rate
        (group,) = trainer.learner_group.local_learner.optimizers["default_policy"].param_groups
        assert group["lr"] == pytest.approx(1e-3 * (1 - 64 / 1000))
        policy.on_global_var_update({"timestep": 500})
        assert policy.cur_lr == pytest.approx(5e-4)
        assert policy.entropy_coeff == pytest.approx(0.06)
    finally:
        trainer.stop()
