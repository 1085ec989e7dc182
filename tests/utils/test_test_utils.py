"""RLlib 1.13's test helpers: `check`, `framework_iterator`, `check_learning_achieved`,
`check_train_results`, `check_compute_single_action`, `check_same_batch`."""

import logging
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from corral.policy.sample_batch import SampleBatch
from corral.utils.test_utils import (
    check,
    check_compute_single_action,
    check_learning_achieved,
    check_same_batch,
    check_train_results,
    framework_iterator,
)


def test_check_compares_nested_structures():
    check({"a": [1.0, np.ones(2)], "b": "x"}, {"a": [1.0000001, torch.ones(2)], "b": "x"})
    check(1.0, 1.1, decimals=0)
    check(np.array([1.0]), np.array([1.05]), atol=0.1)
    check(1.0, 2.0, false=True)
    check(True, False, false=True)
    with pytest.raises(AssertionError):
        check({"a": 1}, {"a": 1, "b": 2})
    with pytest.raises(AssertionError):
        check([1, 2], [1])
    with pytest.raises(AssertionError):
        check(np.array([1.0]), np.array([1.0]), false=True)


def test_framework_iterator_yields_torch_only(caplog):
    config = {}
    with caplog.at_level(logging.WARNING):
        assert list(framework_iterator(config)) == ["torch"]
    assert config["framework"] == "torch"
    assert "skipping tf" in caplog.text
    assert list(framework_iterator(config, frameworks="torch", session=True)) == [("torch", None)]
    timings = {}
    for _ in framework_iterator(config, frameworks=("torch",), time_iterations=timings):
        pass
    assert "torch" in timings
    # Only frameworks corral cannot run: skipped with RLlib's warning, nothing yielded.
    caplog.clear()
    tf_config = {}
    with caplog.at_level(logging.WARNING):
        assert list(framework_iterator(tf_config, frameworks=("tf", "tf2"))) == []
    assert "framework_iterator skipping tf2 (tf not installed)!" in caplog.text
    assert "framework" not in tf_config
    with pytest.raises(ValueError, match="Unknown framework"):
        list(framework_iterator(config, frameworks=("pytorch",)))


def test_check_learning_achieved():
    trials = [SimpleNamespace(last_result={"episode_reward_mean": r}) for r in (10, 150)]
    check_learning_achieved(SimpleNamespace(trials=trials), 100)
    with pytest.raises(ValueError, match="`stop-reward` of 200 not reached!"):
        check_learning_achieved(SimpleNamespace(trials=trials), 200)
    eval_trials = [SimpleNamespace(last_result={"evaluation": {"episode_reward_mean": 5}})]
    check_learning_achieved(SimpleNamespace(trials=eval_trials), 5, evaluation=True)


def test_check_same_batch():
    a = SampleBatch({"obs": np.ones((2, 1)), "rewards": np.zeros(2)})
    check_same_batch(a, SampleBatch({"obs": np.ones((2, 1)), "rewards": np.zeros(2)}))
    with pytest.raises(AssertionError):
        check_same_batch(a, SampleBatch({"obs": np.ones((2, 1))}))


def test_trainer_checks_on_a_real_trainer():
    from corral.agents.ppo import PPOTrainer

    trainer = PPOTrainer(
        config={
            "num_workers": 0,
            "train_batch_size": 64,
            "sgd_minibatch_size": 32,
            "num_sgd_iter": 1,
            "rollout_fragment_length": 64,
            "model": {"fcnet_hiddens": [8]},
        },
        env="CartPole-v1",
    )
    try:
        assert check_train_results(trainer.train())["training_iteration"] == 1
        check_compute_single_action(trainer)
    finally:
        trainer.stop()
