"""num_gpus: the driver's learner on a device; `_fake_gpus` runs that path on the CPU."""

import numpy as np
import pytest
import torch

from corral.agents.ppo import PPOTrainer
from corral.agents.sac import SACTrainer
from corral.core.learner.distributed import InProcessLearner


def _check_device_learner(trainer, before):
    group = trainer.learner_group
    assert isinstance(group.remote_learners[0], InProcessLearner)
    assert group.device == torch.device("cpu")  # the fake GPU
    learner_policy = group.remote_learners[0].worker.policies["default_policy"]
    driver_policy = trainer.get_policy()
    assert learner_policy is not driver_policy  # a copy, as a GPU learner trains
    after = driver_policy.get_weights()
    assert any(not np.array_equal(before[k], after[k]) for k in before)  # weights came back
    trained = {k: v.cpu().numpy() for k, v in learner_policy.model.state_dict().items()}
    assert all(np.array_equal(trained[k], after[k]) for k in after)


def test_ppo_trains_with_two_fake_gpus():
    trainer = PPOTrainer(
        config={
            "num_workers": 0,
            "num_gpus": 2,
            "_fake_gpus": True,
            "train_batch_size": 256,
            "rollout_fragment_length": 256,
            "sgd_minibatch_size": 64,
            "num_sgd_iter": 2,
            "model": {"fcnet_hiddens": [16]},
            "seed": 0,
        },
        env="CartPole-v1",
    )
    try:
        before = trainer.get_policy().get_weights()
        result = trainer.train()
        assert np.isfinite(
            result["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"]
        )
        _check_device_learner(trainer, before)
        assert trainer.learner_group.get_state()["optimizers"]["default_policy"]["state"]
    finally:
        trainer.stop()


def test_sac_trains_with_two_fake_gpus():
    trainer = SACTrainer(
        config={
            "num_workers": 0,
            "num_gpus": 2,
            "_fake_gpus": True,
            "learning_starts": 64,
            "train_batch_size": 32,
            "timesteps_per_iteration": 100,
            "seed": 0,
        },
        env="Pendulum-v1",
    )
    try:
        before = trainer.get_policy().get_weights()
        stats = trainer.train()["info"]["learner"]["default_policy"]["learner_stats"]
        assert np.isfinite(stats["critic_loss"]) and np.isfinite(stats["actor_loss"])
        _check_device_learner(trainer, before)
        # Target critics live beside the model: they come back to the driver too.
        learner_policy = trainer.learner_group.remote_learners[0].worker.policies["default_policy"]
        driver_target = trainer.get_policy().target_q.state_dict()
        for name, value in learner_policy.target_q.state_dict().items():
            assert torch.equal(value, driver_target[name])
    finally:
        trainer.stop()


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has a CUDA GPU")
def test_gpus_without_cuda_say_what_to_do():
    # A RuntimeError (RLlib 1.13's type) that is also a ValueError (a bad config value).
    with pytest.raises(RuntimeError, match=r"num_gpus=0.5, but torch sees no CUDA.*_fake_gpus"):
        PPOTrainer(config={"num_workers": 0, "num_gpus": 0.5}, env="CartPole-v1")
    with pytest.raises(ValueError, match=r"num_gpus_per_learner=1, but torch sees no CUDA"):
        PPOTrainer(
            config={"num_workers": 0, "num_learners": 2, "num_gpus_per_learner": 1},
            env="CartPole-v1",
        )
