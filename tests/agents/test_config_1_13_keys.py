"""COMMON_CONFIG keys RLlib 1.13 added, and the 1.13-deprecated names they replace."""

from __future__ import annotations

import pytest

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


def test_unbuilt_1_13_setting_raises_not_implemented():
    with pytest.raises(NotImplementedError, match="keep_per_episode_custom_metrics"):
        _trainer(keep_per_episode_custom_metrics=True)


def test_an_algorithm_default_of_a_new_key_is_honoured():
    from corral.agents.ppo import APPOTrainer

    trainer = APPOTrainer(config={**BASE, "train_batch_size": 20})
    try:
        assert trainer.config["min_time_s_per_reporting"] == 10
        assert trainer.config["min_iter_time_s"] == 10
    finally:
        trainer.stop()
