"""Type and range checks of config values at trainer construction (issue 11, item 10).

Every documented key has an entry in a declarative spec table (COMMON_CONFIG_SPECS,
MODEL_SPECS, each algorithm's CONFIG_SPECS); a bad value is a ValueError/TypeError
naming the key's full path, the value and what is expected, raised when the trainer
is built rather than deep inside sampling or learning.
"""

from __future__ import annotations

import functools
import re

import gymnasium as gym
import numpy as np
import pytest

from corral.agents.callbacks import DefaultCallbacks, MultiCallbacks
from corral.agents.config import COMMON_CONFIG, COMMON_CONFIG_SPECS, check_config_values
from corral.agents.registry import _ALGORITHMS, get_trainer_class
from corral.models.model_defaults import MODEL_DEFAULTS, MODEL_SPECS
from corral.utils.config_spec import Dict, Float, Int, ListOf, OneOf, Optional, Schedule

BASE = {"env": "CartPole-v1", "num_workers": 0}


def _build(algo: str, **overrides):
    return get_trainer_class(algo)(config={**BASE, **overrides})


# --------------------------------------------------------------------------------------
# The tables are complete
# --------------------------------------------------------------------------------------


def test_every_common_key_has_a_spec():
    missing = sorted(set(COMMON_CONFIG) - set(COMMON_CONFIG_SPECS))
    assert not missing, f"COMMON_CONFIG keys without an entry in COMMON_CONFIG_SPECS: {missing}"
    stale = sorted(set(COMMON_CONFIG_SPECS) - set(COMMON_CONFIG))
    assert not stale, f"COMMON_CONFIG_SPECS entries for keys that do not exist: {stale}"


def test_every_model_key_has_a_spec():
    assert set(MODEL_SPECS) == set(MODEL_DEFAULTS)


@pytest.mark.parametrize("algo", sorted(set(_ALGORITHMS)))
def test_every_algorithm_key_has_a_spec(algo):
    cls = get_trainer_class(algo)
    specs = cls.get_config_specs()
    missing = sorted(set(cls.get_default_config()) - set(specs))
    assert not missing, f"{algo}: DEFAULT_CONFIG keys without a spec: {missing}"


@pytest.mark.parametrize("algo", sorted(set(_ALGORITHMS)))
def test_defaults_pass_their_own_specs(algo):
    cls = get_trainer_class(algo)
    check_config_values(cls.get_default_config(), cls.get_config_specs())


# --------------------------------------------------------------------------------------
# The examples: named errors at construction
# --------------------------------------------------------------------------------------

BAD_VALUES = [
    ("PPO", {"gamma": 1.5}, "gamma"),
    ("PPO", {"lambda": 2}, "lambda"),
    ("PPO", {"clip_param": -1}, "clip_param"),
    ("PPO", {"grad_clip": -1}, "grad_clip"),
    ("PPO", {"horizon": -5}, "horizon"),
    ("PPO", {"horizon": 0}, "horizon"),
    ("PPO", {"model": {"fcnet_hiddens": "64"}}, "model.fcnet_hiddens"),
    ("PPO", {"model": {"fcnet_hiddens": [0]}}, "model.fcnet_hiddens[0]"),
    ("PPO", {"metrics_smoothing_episodes": 0}, "metrics_smoothing_episodes"),
    ("DQN", {"target_network_update_freq": -1}, "target_network_update_freq"),
    ("PPO", {"normalize_actions": "no"}, "normalize_actions"),
    ("PPO", {"evaluation_config": {"explore": "maybe"}}, "evaluation_config.explore"),
    ("PPO", {"train_batch_size": 150.5}, "train_batch_size"),
    ("PPO", {"rollout_fragment_length": 0}, "rollout_fragment_length"),
    ("PPO", {"train_batch_size": "200"}, "train_batch_size"),
    ("PPO", {"gamma": "0.99"}, "gamma"),
    ("PPO", {"seed": "abc"}, "seed"),
    ("PPO", {"env_config": 5}, "env_config"),
    ("PPO", {"lr_schedule": [[0]]}, "lr_schedule"),
    ("PPO", {"callbacks": lambda: 42}, "callbacks"),
    ("PPO", {"multiagent": {"policy_mapping_fn": 5}}, "multiagent.policy_mapping_fn"),
    ("PPO", {"extra_python_environs_for_driver": 5}, "extra_python_environs_for_driver"),
    ("DQN", {"train_batch_size": 0}, "train_batch_size"),
    # A few more of the same kinds.
    ("PPO", {"gamma": float("nan")}, "gamma"),
    ("PPO", {"lr": float("inf")}, "lr"),
    ("PPO", {"num_sgd_iter": 0}, "num_sgd_iter"),
    ("PPO", {"entropy_coeff_schedule": [[100, 0.1], [0, 0.0]]}, "entropy_coeff_schedule"),
    ("PPO", {"callbacks": dict}, "callbacks"),
    ("PPO", {"extra_python_environs_for_worker": {"OMP_NUM_THREADS": 1}}, "OMP_NUM_THREADS"),
    ("PPO", {"model": {"fcnet_activation": "sigmoid"}}, "model.fcnet_activation"),
    ("PPO", {"num_workers": True}, "num_workers"),
    ("SAC", {"Q_model": {"fcnet_hiddens": [-3]}}, "Q_model.fcnet_hiddens[0]"),
    ("SAC", {"optimization": {"actor_learning_rate": -1e-3}}, "optimization.actor_learning_rate"),
    ("DQN", {"replay_buffer_config": {"capacity": 0}}, "replay_buffer_config.capacity"),
    ("DQN", {"evaluation_config": {"n_step": 0}}, "evaluation_config.n_step"),
    ("TD3", {"tau": 1.5}, "tau"),
    ("PPO", {"observation_space": "Box"}, "observation_space"),
    ("PPO", {"clip_rewards": "yes"}, "clip_rewards"),
    ("PPO", {"multiagent": {"count_steps_by": "steps"}}, "multiagent.count_steps_by"),
]


@pytest.mark.parametrize(("algo", "overrides", "path"), BAD_VALUES)
def test_bad_value_is_named_at_construction(algo, overrides, path):
    with pytest.raises((ValueError, TypeError)) as err:
        _build(algo, **overrides)
    msg = str(err.value)
    assert f"`{path}" in msg or path in msg, msg
    assert "must be" in msg, msg


def test_message_names_key_value_and_expectation():
    with pytest.raises(ValueError, match=re.escape("`gamma` must be a number in [0, 1], got 1.5.")):
        _build("PPO", gamma=1.5)
    with pytest.raises(TypeError, match=r"`train_batch_size` must be an int >= 1, got '200'"):
        _build("PPO", train_batch_size="200")
    with pytest.raises(TypeError, match=r"`evaluation_config\.explore` must be a bool"):
        _build("PPO", evaluation_config={"explore": "maybe"})


# --------------------------------------------------------------------------------------
# Valid RLlib values stay valid
# --------------------------------------------------------------------------------------

GOOD_VALUES = [
    {"horizon": None},
    {"horizon": 200},
    {"grad_clip": None},
    {"grad_clip": 0.5},
    {"seed": None},
    {"seed": 0},
    {"seed": np.int64(7)},
    {"gamma": np.float32(0.9)},
    {"gamma": 1.0},
    {"lr": 0},
    {"evaluation_interval": 0},
    {"evaluation_interval": None},
    {"model": None},
    {"model": {"fcnet_hiddens": (32, 32), "fcnet_activation": "ReLU"}},
    {"model": {"fcnet_hiddens": []}},
    {"callbacks": None},
    {"callbacks": MultiCallbacks([DefaultCallbacks])},
    {"callbacks": functools.partial(DefaultCallbacks)},
    {"callbacks": {"on_episode_end": lambda **kw: None}},
    {"lr_schedule": [[0, 1e-3], [1000, 1e-4]]},
    {"clip_rewards": True},
    {"clip_rewards": 5.0},
    {"clip_rewards": (-1, 1)},
    {"record_env": False},
    {"observation_filter": "MeanStdFilter"},
    {"evaluation_config": None},
    {"evaluation_config": {"explore": False}},
    {"multiagent": {"policies_to_train": {"default_policy"}}},
    {"extra_python_environs_for_driver": {"CORRAL_TEST_VAR": "1"}},
    {"input_evaluation": ("is",)},
    {"log_level": "INFO"},
]


@pytest.mark.parametrize("overrides", GOOD_VALUES, ids=lambda o: repr(o)[:40])
def test_valid_values_are_accepted(overrides):
    trainer = _build("PPO", **overrides)
    trainer.stop()


def test_off_policy_accepts_counts_in_scientific_notation():
    trainer = _build("DQN", replay_buffer_config={"capacity": 1e4}, learning_starts=1e3)
    trainer.stop()


def test_rollout_fragment_length_auto_is_not_1_13():
    # "auto" arrived after RLlib 1.13; in 1.13 the value is an int.
    with pytest.raises(TypeError, match="`rollout_fragment_length` must be an int >= 1"):
        _build("PPO", rollout_fragment_length="auto")


# --------------------------------------------------------------------------------------
# The spec types
# --------------------------------------------------------------------------------------


def test_spec_descriptions():
    assert Int(1).describe() == "an int >= 1"
    assert Float(0, 1, lo_open=True).describe() == "a number in (0, 1]"
    assert Optional(Int(1)).describe() == "None or an int >= 1"
    assert OneOf("a", "b").describe() == "one of 'a', 'b'"
    assert "list" in ListOf(Int(1)).describe()


def test_specs_reject_and_accept():
    assert Int(0).problem(True, "k") is not None  # a bool is no count
    assert Int(0).problem(np.int32(3), "k") is None
    assert Float(0, 1).problem(np.float64(0.5), "k") is None
    assert isinstance(Float().problem("1", "k"), TypeError)
    assert isinstance(Float(0).problem(-1, "k"), ValueError)
    assert Schedule().problem([[0, 1.0], [10, 0.5]], "k") is None
    assert Schedule().problem([(0, 1.0)], "k") is None
    assert Schedule().problem([], "k") is not None
    assert Dict(values=Int(0)).problem({"a": 1}, "k") is None
    err = Dict(values=Int(0)).problem({"a": -1}, "k")
    assert "`k.a`" in str(err)


def test_config_space_must_be_a_space():
    space = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
    check_config_values({"observation_space": space})
    with pytest.raises(
        TypeError, match="`observation_space` must be None or a gymnasium Space or an old gym Space"
    ):
        check_config_values({"observation_space": (4,)})


def test_policy_config_overrides_are_checked():
    from corral.policy.policy import PolicySpec

    policies = {"p": PolicySpec(config={"gamma": 2.0})}
    config = {"multiagent": {"policies": policies, "policy_mapping_fn": lambda *a, **k: "p"}}
    with pytest.raises(ValueError, match=r"`multiagent\.policies\.p\.config\.gamma` must be"):
        _build("PPO", **config)
    policies = {"q": (None, None, None, {"lr": "fast"})}
    config = {"multiagent": {"policies": policies, "policy_mapping_fn": lambda *a, **k: "q"}}
    with pytest.raises(TypeError, match=r"`multiagent\.policies\.q\.config\.lr` must be"):
        _build("PPO", **config)


def test_floats_beyond_float32_are_named():
    # Finite in Python, but infinite (or a conversion error) in torch's float32 math.
    with pytest.raises(ValueError, match=r"`clip_param` must be a number > 0 within float32's"):
        _build("PPO", clip_param=3.5e38)
    trainer = _build("PPO", vf_clip_param=3.0e38)
    trainer.stop()
