"""save at iteration k + restore + train == training straight through, bit for bit."""

import os

import numpy as np
import pytest

from corral.agents.ppo import PPOTrainer
from corral.agents.trainer import RESUME_CHECKPOINT_STATE, Trainer
from corral.tune.trainable import checkpoint_folder
from corral.utils import checkpoint_files

CONFIG = {
    "num_envs_per_worker": 2,
    "rollout_fragment_length": 32,
    "train_batch_size": 128,
    "sgd_minibatch_size": 32,
    "num_sgd_iter": 2,
    "seed": 3,
    "model": {"fcnet_hiddens": [16]},
}


def _weights_after(trainer, iterations):
    for _ in range(iterations):
        trainer.train()
    return trainer.get_policy().get_weights()


def _runs(num_workers, tmp_path, drop_resume_state=False):
    straight = PPOTrainer(config={**CONFIG, "num_workers": num_workers}, env="CartPole-v1")
    try:
        _weights_after(straight, 2)
        path = checkpoint_folder(straight.save(str(tmp_path)))
        expected = _weights_after(straight, 3)
        expected_steps = straight.iteration, straight._timesteps_total
    finally:
        straight.stop()
    if drop_resume_state:
        for suffix in (".json", ".safetensors"):
            os.remove(os.path.join(path, RESUME_CHECKPOINT_STATE + suffix))
        checkpoint_files.write_manifest(path, "PPO")
    resumed = Trainer.from_checkpoint(path)
    try:
        got = _weights_after(resumed, 3)
        assert (resumed.iteration, resumed._timesteps_total) == expected_steps
    finally:
        resumed.stop()
    return expected, got


@pytest.mark.parametrize("num_workers", [0, 2])
def test_resumed_training_equals_training_straight_through(num_workers, tmp_path):
    expected, got = _runs(num_workers, tmp_path)
    assert expected.keys() == got.keys()
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)


def test_without_the_resume_state_the_runs_differ(tmp_path):
    """The control: generators and unfinished episodes are what makes the difference."""
    expected, got = _runs(0, tmp_path, drop_resume_state=True)
    assert any(not np.array_equal(got[k], expected[k]) for k in expected)


def test_restore_into_an_existing_trainer_resumes_exactly(tmp_path):
    straight = PPOTrainer(config={**CONFIG, "num_workers": 0}, env="CartPole-v1")
    other = PPOTrainer(config={**CONFIG, "num_workers": 0, "seed": 99}, env="CartPole-v1")
    try:
        _weights_after(straight, 1)
        path = straight.save(str(tmp_path))
        expected = _weights_after(straight, 2)
        _weights_after(other, 1)  # a trainer mid-way through episodes of its own
        other.restore(path)
        got = _weights_after(other, 2)
    finally:
        straight.stop()
        other.stop()
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)


def test_a_second_save_after_resuming_is_exact_too(tmp_path):
    """The replayed log serves the next checkpoint: save, resume, save again, resume."""
    straight = PPOTrainer(config={**CONFIG, "num_workers": 0}, env="CartPole-v1")
    try:
        _weights_after(straight, 1)
        first = straight.save(str(tmp_path / "a"))
        expected = _weights_after(straight, 2)
    finally:
        straight.stop()
    once = Trainer.from_checkpoint(first)
    try:
        _weights_after(once, 1)
        second = once.save(str(tmp_path / "b"))
    finally:
        once.stop()
    twice = Trainer.from_checkpoint(second)
    try:
        got = _weights_after(twice, 1)
    finally:
        twice.stop()
    for name in expected:
        np.testing.assert_array_equal(got[name], expected[name], err_msg=name)
