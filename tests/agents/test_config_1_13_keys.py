"""COMMON_CONFIG keys RLlib 1.13 added, and the 1.13-deprecated names they replace."""

from __future__ import annotations

import numpy as np
import pytest

from corral.agents.callbacks import DefaultCallbacks
from corral.agents.config import COMMON_CONFIG, RENAMED_IN_1_13, merge_trainer_configs
from corral.agents.pg import PGTrainer

NEW_KEYS = [
    "evaluation_duration",
    "evaluation_duration_unit",
    "always_attach_evaluation_results",
    "keep_per_episode_custom_metrics",
    "metrics_episode_collection_timeout_s",
    "metrics_num_episodes_for_smoothing",
    "min_time_s_per_reporting",
    "min_train_timesteps_per_reporting",
    "min_sample_timesteps_per_reporting",
    "output_config",
    "eager_max_retraces",
    "_tf_policy_handles_more_than_one_loss",
    "_disable_preprocessor_api",
    "_disable_action_flattening",
    "_disable_execution_plan_api",
    "disable_env_checking",
]

BASE = {"env": "CartPole-v1", "num_workers": 0, "rollout_fragment_length": 10}


@pytest.mark.parametrize("key", NEW_KEYS)
def test_new_key_is_accepted(key):
    assert key in COMMON_CONFIG
    merged = merge_trainer_configs(COMMON_CONFIG, {key: COMMON_CONFIG[key]})
    assert key in merged


def _trainer(**config):
    return PGTrainer(config={**BASE, "train_batch_size": 10, **config})


def test_min_time_s_per_reporting_is_honoured():
    trainer = _trainer(min_time_s_per_reporting=0.3)
    try:
        assert trainer.config["min_iter_time_s"] == 0.3
        assert trainer.train()["time_this_iter_s"] >= 0.3
    finally:
        trainer.stop()


def test_min_sample_timesteps_per_reporting_is_honoured():
    trainer = _trainer(min_sample_timesteps_per_reporting=35)
    try:
        assert trainer.train()["timesteps_this_iter"] >= 35
    finally:
        trainer.stop()


def test_metrics_num_episodes_for_smoothing_and_evaluation_duration():
    trainer = _trainer(metrics_num_episodes_for_smoothing=7, evaluation_duration=3)
    try:
        assert trainer.config["metrics_smoothing_episodes"] == 7
        assert trainer.config["evaluation_num_episodes"] == 3
    finally:
        trainer.stop()


def test_deprecated_old_name_still_works_with_a_warning(caplog):
    trainer = _trainer(min_iter_time_s=0.2)
    assert "`min_iter_time_s` has been deprecated" in caplog.text
    assert "min_time_s_per_reporting" in caplog.text
    try:
        assert trainer.config["min_time_s_per_reporting"] == 0.2
        assert trainer.train()["time_this_iter_s"] >= 0.2
    finally:
        trainer.stop()


def test_algorithm_defaults_of_old_names_do_not_warn(caplog):
    from corral.agents.a3c import A2CTrainer

    trainer = A2CTrainer(config={**BASE, "min_time_s_per_reporting": None})
    trainer.stop()
    assert "deprecated" not in caplog.text


def test_every_renamed_key_points_at_a_real_key():
    for new, old in RENAMED_IN_1_13.items():
        assert new in COMMON_CONFIG and old in COMMON_CONFIG


def test_1_13_setting_not_built_for_an_algorithm_raises_not_implemented():
    # (`_disable_action_flattening` and the others are built: tests/models/.)
    from corral.agents.dqn import DQNTrainer

    with pytest.raises(NotImplementedError, match="_disable_preprocessor_api"):
        DQNTrainer(config={"num_workers": 0, "_disable_preprocessor_api": True}, env="CartPole-v1")


def test_min_train_timesteps_per_reporting_repeats_the_training_step():
    trainer = _trainer(min_train_timesteps_per_reporting=35)
    try:
        result = trainer.train()
        # Four steps of 10: the first that has trained on at least 35.
        assert result["num_env_steps_trained"] == 40
        assert result["timesteps_this_iter"] == 40
        assert trainer.train()["num_env_steps_trained"] == 80
    finally:
        trainer.stop()


def test_min_train_timesteps_per_reporting_counts_trained_not_sampled_steps():
    # DQN samples 1 step per training step and trains on nothing before
    # learning_starts: the iteration goes on until 16 steps were trained on.
    from corral.agents.dqn import DQNTrainer

    trainer = DQNTrainer(
        config={
            **BASE,
            "rollout_fragment_length": 4,
            "train_batch_size": 8,
            "learning_starts": 20,
            "min_sample_timesteps_per_reporting": 0,
            "min_train_timesteps_per_reporting": 16,
            "model": {"fcnet_hiddens": [8]},
        }
    )
    try:
        result = trainer.train()
        assert result["num_env_steps_trained"] >= 16
        assert result["timesteps_this_iter"] >= 20
    finally:
        trainer.stop()


def test_an_algorithm_default_of_a_new_key_is_honoured():
    from corral.agents.ppo import APPOTrainer

    trainer = APPOTrainer(config={**BASE, "train_batch_size": 20})
    try:
        assert trainer.config["min_time_s_per_reporting"] == 10
        assert trainer.config["min_iter_time_s"] == 10
    finally:
        trainer.stop()


class LengthMetric(DefaultCallbacks):
    """Records each episode's length as the custom metric `len`."""

    def on_episode_end(self, *, episode, **kwargs):
        episode.custom_metrics["len"] = episode.length


@pytest.mark.parametrize("keep", [False, True])
def test_keep_per_episode_custom_metrics(keep):
    trainer = _trainer(
        train_batch_size=200,
        callbacks=LengthMetric,
        keep_per_episode_custom_metrics=keep,
        evaluation_interval=1,
        evaluation_duration=3,
        metrics_num_episodes_for_smoothing=1000,
    )
    try:
        result = trainer.train()
        lengths = result["hist_stats"]["episode_lengths"]
        custom = result["custom_metrics"]
        evaluated = result["evaluation"]["custom_metrics"]
        if keep:
            assert custom == {"len": lengths}
            assert evaluated == {"len": result["evaluation"]["hist_stats"]["episode_lengths"]}
            assert len(evaluated["len"]) == 3
        else:
            assert custom == {
                "len_mean": np.mean(lengths),
                "len_min": min(lengths),
                "len_max": max(lengths),
            }
            assert set(evaluated) == {"len_mean", "len_min", "len_max"}
    finally:
        trainer.stop()


def test_summarize_episodes_rllib_1_13_arguments():
    from corral.evaluation.metrics import RolloutMetrics, summarize_episodes

    def episode(length, metric):
        return RolloutMetrics(length, float(length), {}, {"m": metric}, {}, {}, {})

    old, new = [episode(3, 1.0)], [episode(5, float("nan")), episode(7, 2.0)]
    # RLlib 1.13's positional (episodes, new_episodes, keep_custom_metrics).
    summary = summarize_episodes(old + new, new, True)
    assert summary["episodes_this_iter"] == 2
    assert summary["episode_len_mean"] == 5.0
    assert summary["custom_metrics"] == {"m": [1.0, 2.0]}
    summary = summarize_episodes(old + new)
    assert summary["episodes_this_iter"] == 3
    assert summary["custom_metrics"] == {"m_mean": 1.5, "m_min": 1.0, "m_max": 2.0}
