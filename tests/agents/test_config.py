"""Tests of the trainer config layer: defaults, merging, validation, unbuilt features."""

from __future__ import annotations

import inspect
import logging
import pickle
import re
import sys
import types
from collections import OrderedDict
from pathlib import Path

import pytest

from corral.agents import config as cfg
from corral.agents.callbacks import DefaultCallbacks
from corral.agents.config import (
    ALLOW_UNKNOWN_SUBKEYS,
    COMMON_CONFIG,
    NOT_YET_IMPLEMENTED,
    OVERRIDE_ALL_SUBKEYS_IF_TYPE_CHANGES,
    check_not_implemented,
    copy_config,
    deep_update,
    merge_trainer_configs,
    validate_config,
    with_common_config,
)
from corral.models.model_defaults import MODEL_DEFAULTS
from corral.policy.policy import PolicySpec
from corral.utils.deprecation import DEPRECATED_VALUE, deprecation_warning, log_once

SEED = Path(__file__).parents[3] / "shared/seeds/trainer-source.txt"

# Keys whose corral default deliberately differs from RLlib's.
CORRAL_DEFAULTS = {"framework", "callbacks", "sample_collector", "model"}
CORRAL_KEYS = {
    "backend",
    "num_learners",
    "num_cpus_per_learner",
    "num_gpus_per_learner",
    "recreate_failed_workers",
    "restart_failed_sub_environments",
    "sample_timeout_s",
    "worker_health_probe_timeout_s",
    "skip_nonfinite_updates",
    "vectorize_mode",
    "env_splits",
    "stream_to_learners",
    # RLlib 2.x's names (not in 1.13's COMMON_CONFIG).
    "torch_compile_learner",
    "torch_compile_learner_dynamo_backend",
    "torch_compile_learner_dynamo_mode",
}
# Keys RLlib 1.13 added to COMMON_CONFIG (see tests/agents/test_config_1_13_keys.py).
RLLIB_1_13_KEYS = {
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
}


def _seed_block() -> str:
    if not SEED.exists():
        pytest.skip(f"seed file {SEED} not found (shared/ must sit beside the checkout)")
    text = SEED.read_text()
    start = text.index("COMMON_CONFIG: TrainerConfigDict = {")
    end = text.index("# __sphinx_doc_end__", start)
    return text[start:end]


def _seed_common_config() -> dict:
    """Evaluate the seed's COMMON_CONFIG literal, standing in for its imported names."""
    namespace = {
        "TrainerConfigDict": dict,
        "MODEL_DEFAULTS": "<MODEL_DEFAULTS>",
        "DefaultCallbacks": "<DefaultCallbacks>",
        "SimpleListCollector": "<SimpleListCollector>",
        "DEPRECATED_VALUE": DEPRECATED_VALUE,
    }
    exec(_seed_block(), namespace)
    return namespace["COMMON_CONFIG"]


def full_config(**overrides) -> dict:
    return merge_trainer_configs(COMMON_CONFIG, overrides)


# --------------------------------------------------------------------------------------
# COMMON_CONFIG / MODEL_DEFAULTS
# --------------------------------------------------------------------------------------


def test_every_seed_key_is_present():
    keys = re.findall(r'^    "(\w+)":', _seed_block(), flags=re.MULTILINE)
    assert len(keys) > 70
    missing = [k for k in keys if k not in COMMON_CONFIG]
    assert not missing
    assert set(COMMON_CONFIG) == set(keys) | CORRAL_KEYS | RLLIB_1_13_KEYS


def test_seed_defaults_are_kept():
    seed = _seed_common_config()
    for key, value in seed.items():
        if key not in CORRAL_DEFAULTS:
            assert COMMON_CONFIG[key] == value, key
    assert COMMON_CONFIG["framework"] == "torch"
    assert COMMON_CONFIG["callbacks"] is DefaultCallbacks
    assert COMMON_CONFIG["sample_collector"] == "SimpleListCollector"
    assert COMMON_CONFIG["model"] == MODEL_DEFAULTS
    assert COMMON_CONFIG["model"] is not MODEL_DEFAULTS
    assert COMMON_CONFIG["backend"] == "local"
    assert COMMON_CONFIG["num_learners"] == 0
    assert COMMON_CONFIG["recreate_failed_workers"] is False


def test_every_key_is_documented():
    source = inspect.getsource(cfg)
    block = source[source.index("COMMON_CONFIG: TrainerConfigDict = {") :]
    block = block[: block.index("\n}\n")]
    lines = block.splitlines()
    checked = 0
    in_multiagent = False
    for i, line in enumerate(lines):
        in_multiagent = in_multiagent or line.startswith('    "multiagent"')
        top = re.match(r'^    "(\w+)":', line)
        sub = in_multiagent and re.match(r'^        "(\w+)":', line)
        if top or sub:
            checked += 1
            if top and top.group(1) == "multiagent":
                continue
            assert lines[i - 1].strip().startswith("#"), f"undocumented key: {line.strip()}"
    assert checked >= len(COMMON_CONFIG) + 8


def test_model_defaults_keys():
    expected = {
        "fcnet_hiddens": [256, 256],
        "fcnet_activation": "tanh",
        "conv_filters": None,
        "conv_activation": "relu",
        "post_fcnet_hiddens": [],
        "post_fcnet_activation": "relu",
        "free_log_std": False,
        "no_final_linear": False,
        "vf_share_layers": True,
        "use_lstm": False,
        "max_seq_len": 20,
        "lstm_cell_size": 256,
        "lstm_use_prev_action": False,
        "lstm_use_prev_reward": False,
        "_time_major": False,
        "use_attention": False,
        "framestack": True,
        "dim": 84,
        "grayscale": False,
        "zero_mean": True,
        "custom_model": None,
        "custom_model_config": {},
        "custom_action_dist": None,
        "custom_preprocessor": None,
        "lstm_use_prev_action_reward": DEPRECATED_VALUE,
        "_use_default_native_models": False,
        "_disable_preprocessor_api": False,
        "_disable_action_flattening": False,
    }
    for key, value in expected.items():
        assert MODEL_DEFAULTS[key] == value, key
    attention = {k for k in MODEL_DEFAULTS if k.startswith("attention_")}
    assert len(attention) == 10


def test_subkey_lists_match_seed():
    assert OVERRIDE_ALL_SUBKEYS_IF_TYPE_CHANGES == ["exploration_config"]
    assert "logger_config" in ALLOW_UNKNOWN_SUBKEYS
    if SEED.exists():
        text = SEED.read_text()
        listed = text[text.index("_allow_unknown_subkeys = [") :]
        listed = listed[: listed.index("]")]
        # RLlib 1.13 added output_config (a writer's own keys) to the seed's list.
        added = {"logger_config", "output_config"}
        assert set(re.findall(r'"(\w+)"', listed)) | added == set(ALLOW_UNKNOWN_SUBKEYS)


def test_config_module_does_not_import_torch():
    import subprocess

    code = "import sys, corral.agents.config; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_deprecation_helpers(caplog):
    with caplog.at_level(logging.WARNING):
        deprecation_warning("old_key", "new_key")
    assert "`old_key` has been deprecated. Use `new_key` instead." in caplog.text
    with pytest.raises(ValueError, match="`old_key` has been deprecated") as err:
        deprecation_warning("old_key", error=True)
    assert isinstance(err.value, DeprecationWarning)
    assert log_once("test_config.unique") is True
    assert log_once("test_config.unique") is False


# --------------------------------------------------------------------------------------
# deep_update
# --------------------------------------------------------------------------------------


def test_deep_update_merges_recursively_in_place():
    original = {"a": 1, "d": {"x": 1, "y": {"p": 1, "q": 2}}}
    result = deep_update(original, {"a": 2, "d": {"y": {"q": 3}}})
    assert result is original
    assert original == {"a": 2, "d": {"x": 1, "y": {"p": 1, "q": 3}}}


def test_deep_update_rejects_unknown_top_level_key():
    with pytest.raises(ValueError, match=r"Unknown config key 'b'"):
        deep_update({"a": 1}, {"b": 2})
    assert deep_update({"a": 1}, {"b": 2}, new_keys_allowed=True) == {"a": 1, "b": 2}


def test_deep_update_subkeys_only_for_allowed_keys():
    original = {"free": {"x": 1}, "strict": {"x": 1, "xx": 2}}
    deep_update(original, {"free": {"new": {"deep": 1}}}, allow_new_subkey_list=["free"])
    assert original["free"] == {"x": 1, "new": {"deep": 1}}
    with pytest.raises(ValueError, match=r"'strict/y'"):
        deep_update(original, {"strict": {"y": 2}}, allow_new_subkey_list=["free"])
    # With new keys allowed at the top, sub-dicts inherit that permission.
    deep_update(original, {"strict": {"y": 2}}, new_keys_allowed=True)
    assert original["strict"]["y"] == 2


def test_deep_update_nested_error_names_full_path():
    original = {"outer": {"inner": {"x": 1}}}
    with pytest.raises(ValueError, match=r"Unknown config key 'outer/inner/z'"):
        deep_update(original, {"outer": {"inner": {"z": 1}}})


def test_deep_update_replaces_whole_dict_when_type_changes():
    original = {"exploration_config": {"type": "EpsilonGreedy", "initial_epsilon": 1.0}}
    deep_update(
        original,
        {"exploration_config": {"type": "OrnsteinUhlenbeckNoise", "ou_theta": 0.15}},
        allow_new_subkey_list=["exploration_config"],
        override_all_if_type_changes=["exploration_config"],
    )
    assert original["exploration_config"] == {"type": "OrnsteinUhlenbeckNoise", "ou_theta": 0.15}
    # Same type: merged.
    deep_update(
        original,
        {"exploration_config": {"type": "OrnsteinUhlenbeckNoise", "ou_sigma": 0.2}},
        allow_new_subkey_list=["exploration_config"],
        override_all_if_type_changes=["exploration_config"],
    )
    assert original["exploration_config"] == {
        "type": "OrnsteinUhlenbeckNoise",
        "ou_theta": 0.15,
        "ou_sigma": 0.2,
    }


def test_deep_update_non_dict_values_replace():
    original = {"a": {"x": 1}, "b": None}
    deep_update(original, {"a": None, "b": {"k": 1}})
    assert original == {"a": None, "b": {"k": 1}}


# --------------------------------------------------------------------------------------
# merge_trainer_configs / with_common_config
# --------------------------------------------------------------------------------------


def test_unknown_top_level_key_suggests_close_matches():
    with pytest.raises(ValueError) as err:
        merge_trainer_configs(COMMON_CONFIG, {"num_worker": 3})
    msg = str(err.value)
    assert "Unknown config key 'num_worker'" in msg
    assert "Did you mean: 'num_workers'" in msg


def test_unknown_key_suggestion_ignores_case():
    with pytest.raises(ValueError, match=r"Did you mean: 'train_batch_size'"):
        merge_trainer_configs(COMMON_CONFIG, {"TRAIN_BATCH_SIZE": 3})


def test_unknown_key_without_close_match_points_to_docs():
    with pytest.raises(ValueError, match=r"'zzzz'\. See COMMON_CONFIG"):
        merge_trainer_configs(COMMON_CONFIG, {"zzzz": 1})


def test_unknown_subkey_in_strict_dict_names_path_and_suggests():
    defaults = with_common_config({"Q_model": {"fcnet_hiddens": [64], "fcnet_activation": "relu"}})
    with pytest.raises(ValueError) as err:
        merge_trainer_configs(defaults, {"Q_model": {"fcnet_hidden": [32]}})
    assert "'Q_model/fcnet_hidden'" in str(err.value)
    assert "Did you mean: 'Q_model/fcnet_hiddens'" in str(err.value)
    merged = merge_trainer_configs(defaults, {"Q_model": {"fcnet_hiddens": [32]}})
    assert merged["Q_model"] == {"fcnet_hiddens": [32], "fcnet_activation": "relu"}


def test_merge_allows_subkeys_of_listed_dicts():
    merged = merge_trainer_configs(
        COMMON_CONFIG,
        {
            "env_config": {"size": 3},
            "model": {"custom_model_config": {"depth": 2}},
            "logger_config": {"wandb": {"project": "p"}},
            "multiagent": {"policies": {"p0": PolicySpec()}},
        },
    )
    assert merged["env_config"] == {"size": 3}
    assert merged["model"]["custom_model_config"] == {"depth": 2}
    assert merged["logger_config"] == {"wandb": {"project": "p"}}
    assert merged["model"]["fcnet_hiddens"] == [256, 256]


def test_merge_exploration_type_change_replaces_whole_dict():
    defaults = with_common_config(
        {"exploration_config": {"type": "EpsilonGreedy", "initial_epsilon": 1.0}}
    )
    merged = merge_trainer_configs(
        defaults, {"exploration_config": {"type": "SoftQ", "temperature": 0.5}}
    )
    assert merged["exploration_config"] == {"type": "SoftQ", "temperature": 0.5}
    merged = merge_trainer_configs(defaults, {"exploration_config": {"final_epsilon": 0.01}})
    assert merged["exploration_config"] == {
        "type": "EpsilonGreedy",
        "initial_epsilon": 1.0,
        "final_epsilon": 0.01,
    }


class _Unpicklable:
    def __deepcopy__(self, memo):
        raise AssertionError("config objects must not be deep-copied")


def test_merge_copies_containers_but_not_objects():
    marker = _Unpicklable()
    fn = lambda x: x  # noqa: E731
    user = {"env_config": {"obj": marker, "nested": [1, {"k": 2}]}, "env": fn}
    merged = merge_trainer_configs(COMMON_CONFIG, user)
    assert merged["env_config"]["obj"] is marker
    assert merged["env"] is fn
    assert merged["callbacks"] is DefaultCallbacks
    merged["env_config"]["nested"][1]["k"] = 99
    merged["model"]["fcnet_hiddens"].append(1)
    assert user["env_config"]["nested"][1]["k"] == 2
    assert COMMON_CONFIG["model"]["fcnet_hiddens"] == [256, 256]
    assert MODEL_DEFAULTS["fcnet_hiddens"] == [256, 256]


def test_copy_config_keeps_types():
    spec = PolicySpec(None, None, None, {"lr": 1.0})
    od = OrderedDict(a=[1])
    copied = copy_config({"spec": spec, "od": od, "s": {1, 2}, "t": (1, [2])})
    assert type(copied["spec"]) is PolicySpec and copied["spec"].config == {"lr": 1.0}
    assert copied["spec"].config is not spec.config
    assert type(copied["od"]) is OrderedDict and copied["od"]["a"] is not od["a"]
    assert copied["s"] == {1, 2} and copied["t"] == (1, [2])


def test_merge_none_and_non_dict():
    assert merge_trainer_configs(COMMON_CONFIG, None) == COMMON_CONFIG
    with pytest.raises(ValueError, match="must be a dict"):
        merge_trainer_configs(COMMON_CONFIG, [("num_workers", 1)])


def _legacy_episode_end(info):
    info["episode"].append("legacy")


def test_merge_turns_legacy_callbacks_dict_into_factory(caplog):
    legacy = {"on_episode_end": _legacy_episode_end}
    user = {"callbacks": legacy}
    merged = merge_trainer_configs(COMMON_CONFIG, user)
    assert user["callbacks"] is legacy  # the input is not modified
    factory = merged["callbacks"]
    assert callable(factory) and factory is not DefaultCallbacks
    with caplog.at_level(logging.WARNING):
        callbacks = pickle.loads(pickle.dumps(factory))()
    assert "callbacks dict interface" in caplog.text
    assert isinstance(callbacks, DefaultCallbacks)
    episode = []
    callbacks.on_episode_end(worker=None, base_env=None, policies={}, episode=episode)
    assert episode == ["legacy"]


def test_with_common_config_allows_new_keys():
    defaults = with_common_config({"num_sgd_iter": 30, "model": {"vf_share_layers": False}})
    assert defaults["num_sgd_iter"] == 30
    assert defaults["model"]["vf_share_layers"] is False
    assert defaults["model"]["fcnet_hiddens"] == [256, 256]
    assert COMMON_CONFIG["model"]["vf_share_layers"] is True
    merged = merge_trainer_configs(defaults, {"num_sgd_iter": 5})
    assert merged["num_sgd_iter"] == 5


# --------------------------------------------------------------------------------------
# validate_config
# --------------------------------------------------------------------------------------


def test_default_config_validates():
    config = full_config()
    validate_config(config)
    assert config["multiagent"]["policies"] == {"default_policy": PolicySpec(config={})}
    assert config["simple_optimizer"] is False
    assert config["evaluation_interval"] is None


def test_policies_to_train_naming_no_policy_warns(caplog):
    # A typo in `policies_to_train` trains nothing (RLlib 1.13 said nothing); the ids
    # may still be added later (add_policy), so this warns rather than raises.
    multiagent = {"policies": {"p0", "p1"}, "policies_to_train": ["p0", "p9"]}
    with caplog.at_level(logging.WARNING, logger="corral.agents.config"):
        validate_config(full_config(multiagent=multiagent))
    assert "names 'p9', which no policy of multiagent.policies ('p0', 'p1') has" in caplog.text
    caplog.clear()
    for fine in (["p0", "p1"], None, lambda pid, batch=None: pid == "p0"):
        with caplog.at_level(logging.WARNING, logger="corral.agents.config"):
            validate_config(full_config(multiagent={**multiagent, "policies_to_train": fine}))
        assert "policies_to_train" not in caplog.text


def test_non_dict_config_rejected():
    with pytest.raises(ValueError, match="must be a dict"):
        validate_config(["num_workers"])


@pytest.mark.parametrize("framework", ["tf", "tf2", "tfe", "jax"])
def test_tensorflow_frameworks_rejected(framework):
    with pytest.raises(ValueError, match="PyTorch only"):
        validate_config(full_config(framework=framework))


def test_unknown_framework_rejected():
    with pytest.raises(ValueError, match="supports only 'torch'"):
        validate_config(full_config(framework="pytorch"))


def test_backend_checks():
    with pytest.raises(ValueError, match="`backend` must be one of"):
        validate_config(full_config(backend="slurm"))
    with pytest.raises(ValueError, match="custom_resources_per_worker=.*need backend='ray'"):
        validate_config(full_config(custom_resources_per_worker={"accel": 1}))


def test_ray_backend_without_ray_says_how_to_install(monkeypatch):
    import corral.evaluation.ray_backend as ray_backend

    monkeypatch.setattr(ray_backend, "ray_available", lambda: False)
    with pytest.raises(ImportError, match=r"corral\[ray\]"):
        validate_config(full_config(backend="ray"))


def test_num_learners_checks():
    validate_config(full_config(num_learners=2))  # data-parallel learners are built
    with pytest.raises(ValueError, match="`num_learners` must be an int >= 0"):
        validate_config(full_config(num_learners=-1))


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("num_workers", -1),
        ("num_workers", 1.5),
        ("num_workers", True),
        ("num_envs_per_worker", 0),
        ("evaluation_num_workers", -2),
    ],
)
def test_worker_counts_checked(key, value):
    with pytest.raises(ValueError, match=f"`{key}` must be an int"):
        validate_config(full_config(**{key: value}))


def test_recreate_and_ignore_worker_failures_exclusive():
    with pytest.raises(ValueError, match="Only one of `ignore_worker_failures`"):
        validate_config(full_config(recreate_failed_workers=True, ignore_worker_failures=True))


def test_model_none_becomes_empty_and_non_dict_rejected():
    config = full_config(model=None)
    validate_config(config)
    assert config["model"] == {}
    with pytest.raises(ValueError, match="`model` must be a dict"):
        validate_config(full_config(model=[64, 64]))


def test_unknown_model_key_rejected_with_suggestion():
    with pytest.raises(ValueError) as err:
        validate_config(full_config(model={"fcnet_hidden": [32]}))
    assert "Unknown config key 'model/fcnet_hidden'" in str(err.value)
    assert "Did you mean: 'model/fcnet_hiddens'" in str(err.value)
    with pytest.raises(ValueError, match="Valid keys there: .*'fcnet_hiddens'"):
        validate_config(full_config(model={"qqqqqq": 1}))
    # A custom model may read extra keys.
    config = full_config(model={"custom_model": "mine", "my_width": 3})
    validate_config(config)
    assert config["model"]["my_width"] == 3


def test_monitor_maps_to_record_env(caplog):
    config = full_config(monitor=True)
    with caplog.at_level(logging.WARNING):
        validate_config(config)
    assert config["record_env"] is True
    assert "`monitor` has been deprecated. Use `record_env` instead." in caplog.text


def test_empty_record_env_means_default_dir():
    config = full_config(record_env="")
    validate_config(config)
    assert config["record_env"] is True


def test_callbacks_none_and_non_callable():
    config = full_config(callbacks=None)
    validate_config(config)
    assert config["callbacks"] is DefaultCallbacks
    with pytest.raises(ValueError, match="`callbacks` must be a callable"):
        validate_config(full_config(callbacks=3))


def test_simple_optimizer_deprecated(caplog):
    config = full_config(simple_optimizer=True)
    with caplog.at_level(logging.WARNING):
        validate_config(config)
    assert "`simple_optimizer` has been deprecated" in caplog.text
    assert config["simple_optimizer"] is True
    with pytest.raises(ValueError, match="Cannot use `simple_optimizer` if `num_gpus` > 1"):
        validate_config(full_config(simple_optimizer=True, num_gpus=2))
    config = full_config(num_gpus=2)
    validate_config(config)
    assert config["simple_optimizer"] is False


def test_simple_optimizer_resolved_for_multiagent():
    config = full_config(multiagent={"policies": {"a", "b"}})
    validate_config(config)
    # No policy class known: the simple optimiser is the safe choice.
    assert config["simple_optimizer"] is True


def test_simple_optimizer_off_for_torch_policies(monkeypatch):
    # A stand-in module keeps this test free of torch and of the real policy code.
    fake = types.ModuleType("corral.policy.torch_policy")

    class TorchPolicy:
        pass

    fake.TorchPolicy = TorchPolicy
    monkeypatch.setitem(sys.modules, "corral.policy.torch_policy", fake)

    class Trainer:
        def get_default_policy_class(self, config):
            return TorchPolicy

    config = full_config(multiagent={"policies": {"a", "b"}})
    validate_config(config, trainer=Trainer())
    assert config["simple_optimizer"] is False
    config = full_config(
        multiagent={"policies": {"a": PolicySpec(policy_class=object), "b": PolicySpec()}}
    )
    validate_config(config, trainer=Trainer())
    assert config["simple_optimizer"] is True


def test_validate_twice_is_stable():
    config = full_config(multiagent={"policies": {"a": (None, None, None, None)}})
    validate_config(config)
    first = copy_config(config)
    validate_config(config)
    assert config == first


def test_policies_set_list_and_empty_become_specs():
    for policies in ({"a", "b"}, ["a", "b"], ("a", "b")):
        config = full_config(multiagent={"policies": policies})
        validate_config(config)
        assert config["multiagent"]["policies"] == {
            "a": PolicySpec(config={}),
            "b": PolicySpec(config={}),
        }
    config = full_config(multiagent={"policies": {}})
    validate_config(config)
    assert list(config["multiagent"]["policies"]) == ["default_policy"]


def test_policy_tuples_become_specs_with_dict_config():
    config = full_config(
        multiagent={
            "policies": {"a": (None, "obs", "act", None), "b": [None, None, None, {"x": 1}]}
        }
    )
    validate_config(config)
    policies = config["multiagent"]["policies"]
    assert policies["a"] == PolicySpec(None, "obs", "act", {})
    assert isinstance(policies["b"], PolicySpec) and policies["b"].config == {"x": 1}


def test_policy_key_must_be_str():
    with pytest.raises(ValueError, match="Policy IDs must always be of type"):
        validate_config(full_config(multiagent={"policies": {1: PolicySpec()}}))
    with pytest.raises(ValueError, match="Policy IDs must always be of type"):
        validate_config(full_config(multiagent={"policies": {1, 2}}))


def test_policy_spec_wrong_length():
    with pytest.raises(ValueError, match=r"Policy specs must be tuples/lists of \(cls or None"):
        validate_config(full_config(multiagent={"policies": {"a": (None, None, None)}}))
    with pytest.raises(ValueError, match="Policy specs must be tuples/lists"):
        validate_config(full_config(multiagent={"policies": {"a": "PPO"}}))


def test_policy_config_must_be_dict():
    with pytest.raises(ValueError, match="Multiagent policy config for a must be a dict"):
        validate_config(full_config(multiagent={"policies": {"a": PolicySpec(config=[1])}}))


def test_policies_of_wrong_type_and_multiagent_none():
    with pytest.raises(ValueError, match="`multiagent/policies` must be a dict"):
        validate_config(full_config(multiagent={"policies": "default_policy"}))
    config = full_config(multiagent=None)
    validate_config(config)
    assert config["multiagent"]["count_steps_by"] == "env_steps"
    with pytest.raises(ValueError, match="`multiagent` must be a dict"):
        validate_config(full_config(multiagent=["a"]))


def test_input_evaluation():
    config = full_config(input_evaluation=("is",))
    validate_config(config)
    assert config["input_evaluation"] == ["is"]
    with pytest.raises(ValueError, match="`input_evaluation` must be a list of strings"):
        validate_config(full_config(input_evaluation="is"))


def test_lstm_use_prev_action_reward_maps_to_both(caplog):
    config = full_config(model={"lstm_use_prev_action_reward": True})
    with caplog.at_level(logging.WARNING):
        validate_config(config)
    assert config["model"]["lstm_use_prev_action"] is True
    assert config["model"]["lstm_use_prev_reward"] is True
    assert "model.lstm_use_prev_action_reward" in caplog.text


def test_batch_mode_checked():
    with pytest.raises(
        ValueError, match=r"`batch_mode` must be one of \[truncate_episodes\|complete_episodes\]"
    ):
        validate_config(full_config(batch_mode="episodes"))


def test_count_steps_by_checked():
    with pytest.raises(
        ValueError, match=r"`count_steps_by` must be one of \[env_steps\|agent_steps"
    ):
        validate_config(full_config(multiagent={"count_steps_by": "steps"}))


def test_eval_workers_without_interval(caplog):
    config = full_config(evaluation_num_workers=2)
    with caplog.at_level(logging.WARNING):
        validate_config(config)
    assert config["evaluation_interval"] == 1
    assert "2 evaluation workers, but no evaluation interval" in caplog.text


def test_parallel_evaluation_needs_workers(caplog):
    config = full_config(evaluation_parallel_to_training=True, evaluation_interval=1)
    with caplog.at_level(logging.WARNING):
        validate_config(config)
    assert config["evaluation_parallel_to_training"] is False
    assert "`evaluation_parallel_to_training` needs `evaluation_num_workers` > 0" in caplog.text


@pytest.mark.parametrize("episodes", [0, -1, 1.5, True, "all", None])
def test_evaluation_num_episodes_checked(episodes):
    with pytest.raises(ValueError, match="`evaluation_num_episodes`"):
        validate_config(full_config(evaluation_num_episodes=episodes))


def test_evaluation_num_episodes_auto():
    with pytest.raises(ValueError, match="only supported with `evaluation_parallel_to_training"):
        validate_config(full_config(evaluation_num_episodes="auto"))
    config = full_config(
        evaluation_num_episodes="auto",
        evaluation_parallel_to_training=True,
        evaluation_num_workers=1,
        evaluation_interval=1,
    )
    validate_config(config)
    assert config["evaluation_num_episodes"] == "auto"


@pytest.mark.parametrize("interval", [-1, 1.5, "2", True])
def test_evaluation_interval_checked(interval):
    with pytest.raises(ValueError, match="`evaluation_interval` must be None or an int >= 1"):
        validate_config(full_config(evaluation_interval=interval))


def test_evaluation_interval_zero_means_none():
    config = full_config(evaluation_interval=0)
    validate_config(config)
    assert config["evaluation_interval"] is None


def test_evaluation_config_checked():
    config = full_config(evaluation_config=None)
    validate_config(config)
    assert config["evaluation_config"] == {}
    with pytest.raises(ValueError, match="`evaluation_config` must be a dict"):
        validate_config(full_config(evaluation_config=1))
    with pytest.raises(ValueError) as err:
        validate_config(full_config(evaluation_config={"num_worker": 1}))
    assert "'evaluation_config/num_worker'" in str(err.value)
    assert "Did you mean: 'evaluation_config/num_workers'" in str(err.value)


# --------------------------------------------------------------------------------------
# check_not_implemented
# --------------------------------------------------------------------------------------

# One non-default value per unbuilt key.
NON_DEFAULT_SAMPLES = {
    "eager_tracing": True,
}


def _nested(path: str, value) -> dict:
    *parents, leaf = path.split("/")
    out = {leaf: value}
    for part in reversed(parents):
        out = {part: out}
    return out


def test_samples_cover_every_unbuilt_key():
    assert set(NON_DEFAULT_SAMPLES) == set(NOT_YET_IMPLEMENTED)


def test_defaults_pass():
    config = full_config()
    check_not_implemented(config, COMMON_CONFIG)
    validate_config(config)
    check_not_implemented(config, COMMON_CONFIG)
    check_not_implemented(config)


@pytest.mark.parametrize("path", sorted(NOT_YET_IMPLEMENTED))
def test_non_default_value_raises(path):
    config = full_config(**_nested(path, NON_DEFAULT_SAMPLES[path]))
    with pytest.raises(NotImplementedError) as err:
        check_not_implemented(config, COMMON_CONFIG)
    assert f"'{path}'" in str(err.value)
    assert NOT_YET_IMPLEMENTED[path] in str(err.value)


def test_several_problems_reported_together():
    config = full_config(eager_tracing=True, evaluation_config={"eager_tracing": True})
    with pytest.raises(NotImplementedError) as err:
        check_not_implemented(config)
    assert "'eager_tracing' = True" in str(err.value)
    assert "'evaluation_config/eager_tracing' = True" in str(err.value)


@pytest.mark.parametrize(
    "policies",
    [
        {},
        {"default_policy"},
        {"main"},
        {"default_policy": PolicySpec(config={"lr": 0.1})},
        {"default_policy", "other"},
    ],
)
def test_multi_agent_policy_setups_are_implemented(policies):
    check_not_implemented(
        full_config(multiagent={"policies": policies, "policies_to_train": ["main"]})
    )


def test_values_equal_to_default_in_other_form_pass():
    check_not_implemented(full_config(model={"post_fcnet_hiddens": ()}))
    check_not_implemented(full_config(num_gpus=0.0, num_gpus_per_worker=0))


def test_algorithm_defaults_are_the_baseline():
    defaults = with_common_config({"eager_tracing": True})
    check_not_implemented(merge_trainer_configs(defaults, {}), defaults)
    with pytest.raises(NotImplementedError, match="'eager_tracing' = False"):
        check_not_implemented(merge_trainer_configs(defaults, {"eager_tracing": False}), defaults)


def test_settings_of_some_algorithms_are_checked_for_those_only():
    # `_disable_preprocessor_api` is built for PPO, not for DQN (its own model).
    config = full_config(_disable_preprocessor_api=True)
    check_not_implemented(config, COMMON_CONFIG, "PPO")
    with pytest.raises(NotImplementedError, match="'_disable_preprocessor_api' = True"):
        check_not_implemented(config, COMMON_CONFIG, "DQN")
    config = full_config(model={"custom_preprocessor": "prep"})
    check_not_implemented(config, COMMON_CONFIG, "PPO")
    with pytest.raises(NotImplementedError, match="'model/custom_preprocessor' = 'prep'"):
        check_not_implemented(config, COMMON_CONFIG, "QMIX")


def test_fixed_off_values_ignore_algorithm_defaults(monkeypatch):
    # A setting with `allowed` values (as `input` had before offline input was built).
    from corral._surface.not_built import Setting
    from corral.agents import config_validation

    fixed = Setting("fake_sampler", "the fake sampler", allowed=(False,))
    monkeypatch.setattr(config_validation, "NOT_BUILT_SETTINGS", (fixed,))
    defaults = with_common_config({"fake_sampler": True})
    with pytest.raises(NotImplementedError, match="'fake_sampler'"):
        check_not_implemented(merge_trainer_configs(defaults, {}), defaults)


def test_evaluation_config_is_checked_too():
    config = full_config(evaluation_config={"eager_tracing": True, "explore": False})
    with pytest.raises(NotImplementedError, match="'evaluation_config/eager_tracing' = True"):
        check_not_implemented(config)
    config = full_config(evaluation_config={"_disable_preprocessor_api": True})
    with pytest.raises(
        NotImplementedError, match="'evaluation_config/_disable_preprocessor_api' = True"
    ):
        check_not_implemented(config, COMMON_CONFIG, "SAC")
    check_not_implemented(full_config(evaluation_config={"explore": False, "eager_tracing": False}))
