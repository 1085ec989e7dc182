"""Checking a merged trainer config: the type and range of every key
(`COMMON_CONFIG_SPECS`), RLlib 1.x's `validate_config` rules, and the refusal of settings
corral does not build (`check_not_implemented`, from `corral._surface.not_built`).
Re-exported by `corral.agents.config`.

No torch import here: reading or validating a config must stay cheap.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from corral._surface.not_built import NOT_BUILT_SETTINGS, common_settings
from corral.agents.callbacks import DefaultCallbacks

# `corral.agents.config` imports this module at its end, after `COMMON_CONFIG` exists.
from corral.agents.config import COMMON_CONFIG
from corral.agents.config_merge import TrainerConfigDict, copy_config, unknown_key_error
from corral.models.model_defaults import MODEL_DEFAULTS, MODEL_SPECS
from corral.tune.stopping import lookup_result
from corral.utils.config_spec import (
    AnyOf,
    AnyValue,
    Bool,
    CallableSpec,
    ClassOrFactory,
    ConfigKeyError,
    Dict,
    Float,
    InstanceOf,
    Int,
    ListOf,
    OneOf,
    Optional,
    Satisfies,
    Spec,
    Str,
    SubConfig,
)
from corral.utils.config_spec import check_config_values as _check_values
from corral.utils.deprecation import DEPRECATED_VALUE, deprecation_warning

logger = logging.getLogger("corral.agents.config")

# Spelled out rather than imported so that reading a config never pulls in numpy.
_DEFAULT_POLICY_ID = "default_policy"


def _common_specs() -> dict[str, Spec]:
    # The env variables a worker or the driver sets must be strings (os.environ's rule).
    environ = Dict(values=Str(), what="a dict of environment variables {name: str value}")
    fn = CallableSpec("a callable")
    ids = ListOf(Str(), sets_ok=True)
    deprecated = OneOf(DEPRECATED_VALUE)
    space = Optional(
        AnyOf(
            InstanceOf("gymnasium.spaces:Space", "a gymnasium Space"),
            Satisfies("corral.env.gym_compat:is_old_gym_space", "an old gym Space"),
        )
    )
    return {
        # Rollout workers
        "num_workers": Int(0),
        "num_envs_per_worker": Int(1),
        "vectorize_mode": OneOf("sequential", "native", "envpool"),
        "env_splits": Int(1),
        "create_env_on_driver": Bool(),
        "rollout_fragment_length": Int(1),
        "batch_mode": OneOf("truncate_episodes", "complete_episodes"),
        # Training
        "gamma": Float(0, 1),
        "lr": Float(0),
        "train_batch_size": Int(1),
        "model": Optional(Dict(MODEL_SPECS, what="a dict of model options")),
        "optimizer": Dict(what="a dict of keyword arguments for the optimiser"),
        "skip_nonfinite_updates": Bool(),
        "torch_compile_learner": Bool(),
        "torch_compile_learner_dynamo_backend": Str(),
        "torch_compile_learner_dynamo_mode": Optional(
            OneOf("default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs")
        ),
        # Environment
        "horizon": Optional(Int(1)),
        "soft_horizon": Bool(),
        "no_done_at_end": Bool(),
        "env": Optional(AnyOf(Str(), CallableSpec("an env class or creator"))),
        "observation_space": space,
        "action_space": space,
        "env_config": Dict(),
        "env_task_fn": Optional(fn),
        "render_env": Bool(),
        "record_env": AnyOf(Bool(), Str()),
        "clip_rewards": Optional(AnyOf(Bool(), Float(0), ListOf(Float(), length=2))),
        "normalize_actions": Bool(),
        "clip_actions": Bool(),
        "preprocessor_pref": OneOf("deepmind", "rllib", None),
        # Debugging
        "log_level": OneOf("DEBUG", "INFO", "WARN", "WARNING", "ERROR", "CRITICAL"),
        "callbacks": Optional(
            ClassOrFactory(DefaultCallbacks, "a DefaultCallbacks subclass (or a factory of one)")
        ),
        "ignore_worker_failures": Bool(),
        "log_sys_usage": Bool(),
        "fake_sampler": Bool(),
        "disable_env_checking": Bool(),
        # Framework: validate_config says which frameworks exist and which corral has
        # (None: RLlib 1.13's framework-free policies, e.g. a "bare metal" numpy policy).
        "framework": Optional(Str()),
        "eager_tracing": Bool(),
        # Exploration
        "explore": Bool(),
        "exploration_config": Dict(
            {"type": AnyOf(Str(), CallableSpec("an Exploration class"))},
            what='a dict {"type": ..., **constructor arguments}',
        ),
        # Evaluation (an interval of 0 is RLlib's old spelling of None)
        "evaluation_interval": Optional(Int(0)),
        "evaluation_num_episodes": AnyOf(Int(1), OneOf("auto")),
        "evaluation_parallel_to_training": Bool(),
        "in_evaluation": Bool(),
        "evaluation_config": SubConfig(),
        "evaluation_num_workers": Int(0),
        "custom_eval_function": Optional(fn),
        # Advanced rollout settings
        "sample_async": Bool(),
        "sample_collector": AnyOf(Str(), CallableSpec("a collector class")),
        "observation_filter": AnyOf(
            OneOf("NoFilter", "MeanStdFilter", "ConcurrentMeanStdFilter"),
            CallableSpec("a function shape -> Filter"),
        ),
        "synchronize_filters": Bool(),
        "tf_session_args": Dict(),
        "local_tf_session_args": Dict(),
        "compress_observations": Bool(),
        "collect_metrics_timeout": Float(0),
        "metrics_smoothing_episodes": Int(1),
        "remote_worker_envs": Bool(),
        "remote_env_batch_wait_ms": Float(0),
        "min_iter_time_s": Optional(Float(0)),
        "timesteps_per_iteration": Int(0),
        # Workers add their index (and sub-envs theirs) to the seed; Gymnasium wants
        # seeds >= 0.
        "seed": Optional(Int(0, 2**62)),
        "extra_python_environs_for_driver": environ,
        "extra_python_environs_for_worker": environ,
        # Resources
        "num_gpus": Float(0),
        "_fake_gpus": Bool(),
        "num_cpus_per_worker": Float(0),
        "num_gpus_per_worker": Float(0),
        "custom_resources_per_worker": Dict(values=Float(0)),
        "num_cpus_for_driver": Float(0),
        "placement_strategy": OneOf("PACK", "SPREAD", "STRICT_PACK", "STRICT_SPREAD"),
        # Offline data
        "input": AnyValue("a str, list, dict or callable naming the input"),
        "input_config": Dict(),
        "actions_in_input_normalized": Bool(),
        "input_evaluation": ListOf(Str()),
        "postprocess_inputs": Bool(),
        "stream_to_learners": Bool(),
        "shuffle_buffer_size": Int(0),
        "output": Optional(AnyOf(Str(), CallableSpec("a function returning an OutputWriter"))),
        "output_compress_columns": ListOf(Str()),
        "output_max_file_size": Int(1, integral_float_ok=True),
        # Multi-agent ("policies" is normalised and checked by validate_config)
        "multiagent": Optional(
            Dict(
                {
                    "policies": AnyValue(),
                    "policy_map_capacity": Int(1),
                    "policy_map_cache": Optional(Str()),
                    "policy_mapping_fn": Optional(fn),
                    "policies_to_train": Optional(AnyOf(ids, fn)),
                    "observation_fn": Optional(fn),
                    "replay_mode": OneOf("independent", "lockstep"),
                    "count_steps_by": OneOf("env_steps", "agent_steps"),
                },
                what="a dict of multi-agent settings",
            )
        ),
        # Logging
        "logger_config": Optional(Dict()),
        # Deprecated
        "simple_optimizer": AnyOf(deprecated, Bool()),
        "monitor": AnyOf(deprecated, Bool(), Str()),
        # RLlib 1.13 additions
        "evaluation_duration": AnyOf(Int(1), OneOf("auto")),
        "evaluation_duration_unit": OneOf("episodes", "timesteps"),
        "always_attach_evaluation_results": Bool(),
        "keep_per_episode_custom_metrics": Bool(),
        "metrics_episode_collection_timeout_s": Float(0),
        "metrics_num_episodes_for_smoothing": Int(1),
        "min_time_s_per_reporting": Optional(Float(0)),
        "min_train_timesteps_per_reporting": Optional(Int(0)),
        "min_sample_timesteps_per_reporting": Optional(Int(0)),
        "output_config": Dict({"store_infos": Bool()}),
        "eager_max_retraces": Optional(Int(0)),
        "_tf_policy_handles_more_than_one_loss": Bool(),
        "_disable_preprocessor_api": Bool(),
        "_disable_action_flattening": Bool(),
        "_disable_execution_plan_api": Bool(),
        # corral additions
        "backend": OneOf("local", "ray"),
        "num_learners": Int(0),
        "num_cpus_per_learner": Float(0),
        "num_gpus_per_learner": Float(0),
        "recreate_failed_workers": Bool(),
        "restart_failed_sub_environments": Bool(),
        "sample_timeout_s": Float(0, lo_open=True),
        "worker_health_probe_timeout_s": Float(0, lo_open=True),
    }


# Type and range of every key of COMMON_CONFIG (see `corral.utils.config_spec`),
# checked when a trainer is built, before anything uses the values. A key added to
# COMMON_CONFIG needs an entry here (tests/agents/test_config_values.py checks it);
# an algorithm's own keys are in its `CONFIG_SPECS`, next to its `DEFAULT_CONFIG`.
COMMON_CONFIG_SPECS: dict[str, Spec] = _common_specs()


# --------------------------------------------------------------------------------------
# Validation
# --------------------------------------------------------------------------------------

_TF_FRAMEWORKS = ("tf", "tf2", "tfe", "jax")
_BACKENDS = ("local", "ray")


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _check_int(config: Mapping[str, Any], key: str, minimum: int) -> None:
    value = config.get(key, COMMON_CONFIG.get(key))
    if not _is_int(value) or value < minimum:
        raise ValueError(f"`{key}` must be an int >= {minimum}, got {value!r}.")


def validate_framework(config: Mapping[str, Any]) -> None:
    """Checks the `framework` key (RLlib 1.13's `Trainer.validate_framework`).

    Raises:
        ValueError: `framework` is a TensorFlow one or unknown: corral is PyTorch only.
    """
    framework = config.get("framework", "torch")
    if framework is None:  # RLlib 1.13 checks nothing then (framework-free policies)
        return
    if framework in _TF_FRAMEWORKS:
        raise ValueError(
            f"framework={framework!r} is not available: corral is built on PyTorch only. "
            "Set framework='torch' (the default)."
        )
    if framework != "torch":
        raise ValueError(f"Unknown framework {framework!r}; corral supports only 'torch'.")


def _validate_framework_and_backend(config: TrainerConfigDict) -> None:
    validate_framework(config)

    backend = config.get("backend", "local")
    if backend not in _BACKENDS:
        raise ValueError(f"`backend` must be one of {list(_BACKENDS)}, got {backend!r}.")
    if backend == "ray":
        from corral.evaluation.ray_backend import RAY_MISSING, ray_available

        if not ray_available():
            raise ImportError(RAY_MISSING)
    elif config.get("custom_resources_per_worker"):
        raise ValueError(
            f"custom_resources_per_worker={config['custom_resources_per_worker']!r} are Ray "
            "resources; they need backend='ray' (the local backend has no resource scheduler)."
        )

    _check_int(config, "num_learners", 0)
    _check_int(config, "num_workers", 0)
    _check_int(config, "num_envs_per_worker", 1)
    _check_int(config, "evaluation_num_workers", 0)
    _check_env_splits(config)

    if config.get("remote_worker_envs"):
        from corral.env.remote_vector_env import check_remote_env_batch_wait_ms

        check_remote_env_batch_wait_ms(config.get("remote_env_batch_wait_ms", 0))

    if config.get("recreate_failed_workers") and config.get("ignore_worker_failures"):
        raise ValueError(
            "Only one of `ignore_worker_failures` (carry on without a dead worker) and "
            "`recreate_failed_workers` (replace it) may be True."
        )


def _check_env_splits(config: Mapping[str, Any]) -> None:
    """`env_splits` > 1 needs EnvPool pools and divides `num_envs_per_worker`."""
    splits = config.get("env_splits") or 1
    if splits == 1:
        return
    mode = config.get("vectorize_mode") or "sequential"
    if mode != "envpool":
        raise ValueError(
            f"env_splits={splits!r} needs vectorize_mode='envpool' (EnvPool steps a group in "
            f"its own threads while the policy acts for the next one); got vectorize_mode="
            f"{mode!r}, whose envs step in the sampler's thread. Set env_splits=1."
        )
    n = config.get("num_envs_per_worker") or 1
    if n % splits:
        raise ValueError(
            f"env_splits={splits!r} must divide num_envs_per_worker={n} (each group is a "
            "pool of num_envs_per_worker // env_splits sub-envs)."
        )


def _warn_of_unknown_policies_to_train(to_train: Any, specs: Mapping[str, Any]) -> None:
    """Warns when `policies_to_train` lists an id that no policy has (a typo trains
    nothing, silently, as in RLlib 1.13); it trains once `add_policy` adds that id."""
    if to_train is None or callable(to_train) or isinstance(to_train, str):
        return
    unknown = [pid for pid in to_train if pid not in specs]
    if unknown:
        logger.warning(
            "multiagent.policies_to_train names %s, which no policy of multiagent.policies "
            "(%s) has: nothing trains it until add_policy() adds a policy of that id.",
            ", ".join(repr(p) for p in unknown),
            ", ".join(repr(p) for p in sorted(specs)),
        )


def _check_policy_id(pid: Any) -> None:
    """Policy ids are strs (RLlib 1.13's KeyError and words)."""
    if not isinstance(pid, str):
        raise ConfigKeyError(
            f"Policy IDs must always be of type `str`, got {pid!r} ({type(pid).__name__})."
        )


def _warn_of_unknown_policy_keys(
    specs: Mapping[str, Any], trainer: Any, config: TrainerConfigDict
) -> None:
    """Warns of a policy's config override (`PolicySpec.config`) whose key neither the
    trainer's config nor the policy class's own defaults have, when the class is one of
    corral's (its own or the trainer's default): nothing reads such a key, so it is most
    likely a typo. A policy class of one's own may read keys of its own: no warning.
    (RLlib 1.13 merged the overrides unchecked; this stays a warning so its code runs.)"""
    from corral.evaluation.policy_setup import class_default_config  # (imports torch)

    default_cls = _default_policy_class(trainer, config)
    for pid, spec in specs.items():
        if not spec.config:
            continue
        cls = spec.policy_class or default_cls
        if not isinstance(cls, type) or not cls.__module__.startswith("corral."):
            continue
        known = set(config).union(class_default_config(cls) or ())
        for key in spec.config:
            if key not in known:
                logger.warning(
                    "%s Nothing reads it: %s takes the trainer's config keys.",
                    unknown_key_error(key, known, prefix=f"multiagent/policies/{pid}/config/"),
                    cls.__name__,
                )


def _default_policy_class(trainer: Any, config: TrainerConfigDict) -> Any:
    """The trainer's policy class for a spec that names none (None if unknown)."""
    default_cls = getattr(trainer, "_policy_class", None)
    if default_cls is None and hasattr(trainer, "get_default_policy_class"):
        default_cls = trainer.get_default_policy_class(config)
    return default_cls


def multiagent_policy_specs(multiagent: Mapping[str, Any]) -> dict[str, Any]:
    """The `multiagent` config dict's policies as {policy id: PolicySpec}, after RLlib
    1.13's checks of its keys.

    Raises:
        ConfigKeyError: (a `KeyError` and a `ValueError`) a key that COMMON_CONFIG's
            `multiagent` lacks, or a policy id that is not a str.
        ValueError: a policy spec of the wrong form.
    """
    allowed = COMMON_CONFIG["multiagent"]
    unknown = [key for key in multiagent if key not in allowed]
    if unknown:
        raise ConfigKeyError(
            f"{unknown_key_error(unknown[0], allowed, 'multiagent/')} (You have invalid keys "
            "in your 'multiagent' config dict.)"
        )
    return _policy_specs(multiagent)


def _policy_specs(multiagent: Mapping[str, Any]) -> dict[str, Any]:
    """Normalise `multiagent["policies"]` into {policy id: PolicySpec}."""
    from corral.policy.policy import PolicySpec

    policies = multiagent.get("policies")
    if not policies:
        policies = {_DEFAULT_POLICY_ID}
    if isinstance(policies, set | frozenset | list | tuple):
        # A collection of ids: each gets a default spec (class and spaces inferred).
        for pid in policies:
            _check_policy_id(pid)
        policies = {pid: PolicySpec() for pid in policies}
    elif not isinstance(policies, Mapping):
        raise ValueError(
            "`multiagent/policies` must be a dict {policy id: PolicySpec} or a set of "
            f"policy ids, got {type(policies).__name__}."
        )

    specs: dict[str, Any] = {}
    for pid, spec in policies.items():
        _check_policy_id(pid)
        if not isinstance(spec, PolicySpec):
            if not isinstance(spec, list | tuple) or len(spec) != 4:
                raise ValueError(
                    "Policy specs must be tuples/lists of "
                    f"(cls or None, obs_space, action_space, config), got {spec}"
                )
            spec = PolicySpec(*spec)
        if spec.config is None:
            spec = spec._replace(config={})
        elif not isinstance(spec.config, dict):
            raise ValueError(
                f"Multiagent policy config for {pid} must be a dict, but got {type(spec.config)}!"
            )
        specs[pid] = spec
    return specs


def _all_torch_policies(specs: Mapping[str, Any], trainer: Any, config: TrainerConfigDict) -> bool:
    default_cls = _default_policy_class(trainer, config)
    classes = [spec.policy_class or default_cls for spec in specs.values()]
    if any(not isinstance(c, type) for c in classes):
        return False
    try:
        from corral.policy.torch_policy import TorchPolicy
    except ImportError:
        return False
    return all(issubclass(c, TorchPolicy) for c in classes)


def _validate_model(model_config: dict) -> None:
    prev_a_r = model_config.get("lstm_use_prev_action_reward", DEPRECATED_VALUE)
    if prev_a_r != DEPRECATED_VALUE:
        deprecation_warning(
            "model.lstm_use_prev_action_reward",
            "model.lstm_use_prev_action and model.lstm_use_prev_reward",
            error=False,
        )
        model_config["lstm_use_prev_action"] = prev_a_r
        model_config["lstm_use_prev_reward"] = prev_a_r
    # "model" accepts new sub-keys (like RLlib) because a custom model may read them.
    # Without a custom model nothing would, so an unknown key there is a typo.
    if not model_config.get("custom_model"):
        for key in model_config:
            if key not in MODEL_DEFAULTS:
                raise unknown_key_error(
                    key,
                    MODEL_DEFAULTS,
                    prefix="model/",
                    hint="Extra model keys are only read by a `custom_model`; put a custom "
                    "model's own options into `model/custom_model_config`.",
                )


def _validate_evaluation(config: TrainerConfigDict) -> None:
    interval = config.get("evaluation_interval")
    if interval == 0 and _is_int(interval):
        # RLlib treated 0 like None (no evaluation); normalise so later code sees None.
        config["evaluation_interval"] = interval = None
    if interval is not None and (not _is_int(interval) or interval < 1):
        raise ValueError(f"`evaluation_interval` must be None or an int >= 1, got {interval!r}.")

    num_eval_workers = config.get("evaluation_num_workers", 0)
    if num_eval_workers > 0 and not interval:
        logger.warning(
            "You have specified %d evaluation workers, but no evaluation interval! Setting "
            "`evaluation_interval` to 1 (evaluate on every `train()` call); set it to a "
            "larger value if that is too often.",
            num_eval_workers,
        )
        config["evaluation_interval"] = 1
    elif num_eval_workers == 0 and config.get("evaluation_parallel_to_training"):
        logger.warning(
            "`evaluation_parallel_to_training` needs `evaluation_num_workers` > 0! Setting "
            "`evaluation_parallel_to_training` to False."
        )
        config["evaluation_parallel_to_training"] = False

    episodes = config.get("evaluation_num_episodes", COMMON_CONFIG["evaluation_num_episodes"])
    if episodes == "auto":
        if not config.get("evaluation_parallel_to_training"):
            raise ValueError(
                "`evaluation_num_episodes='auto'` is only supported with "
                "`evaluation_parallel_to_training=True` (and `evaluation_num_workers` > 0)!"
            )
    elif not _is_int(episodes) or episodes <= 0:
        raise ValueError(f"`evaluation_num_episodes` ({episodes!r}) must be an int > 0 or 'auto'!")

    eval_config = config.get("evaluation_config")
    if eval_config is None:
        config["evaluation_config"] = eval_config = {}
    if not isinstance(eval_config, dict):
        raise ValueError(
            f"`evaluation_config` must be a dict of config overrides, got {eval_config!r}."
        )
    for key in eval_config:
        if key not in config:
            raise unknown_key_error(key, config.keys(), prefix="evaluation_config/")


def check_config_values(config: Mapping[str, Any], specs: Mapping[str, Spec] | None = None) -> None:
    """Check the type and range of every key of `config` that has a spec.

    The overrides in `evaluation_config` and in each policy's config
    (`multiagent.policies`) are checked against the same table.

    Args:
        config: a merged trainer config (numpy scalars in it become Python numbers).
        specs: key -> spec; default `COMMON_CONFIG_SPECS` (a trainer passes its
            `get_config_specs()`, which adds the algorithm's keys).

    Raises:
        ValueError: a value out of range; TypeError: a value of the wrong type. The
            message names the key's full path, the value and what is expected.
    """
    specs = COMMON_CONFIG_SPECS if specs is None else specs
    _check_values(config, specs)
    policies = (config.get("multiagent") or {}).get("policies")
    if isinstance(policies, Mapping):
        for pid, spec in policies.items():
            if isinstance(spec, tuple) and hasattr(spec, "_fields"):  # a PolicySpec
                overrides = getattr(spec, "config", None)
            elif isinstance(spec, list | tuple) and len(spec) == 4:
                overrides = spec[3]
            else:
                continue  # validate_config names a malformed spec
            if isinstance(overrides, Mapping):
                _check_values(overrides, specs, prefix=f"multiagent.policies.{pid}.config.")


def validate_config(config: TrainerConfigDict, trainer: Any = None) -> None:
    """Check a merged trainer config and fill in derived values, in place.

    Follows RLlib 1.x's `Trainer._validate_config`: resolves deprecated keys (with a
    warning), normalises `multiagent/policies` to {id: PolicySpec} and
    `input_evaluation` to a list, and raises `ValueError` for values that cannot
    work. corral adds the checks of its own keys; features it does not have yet raise
    `NotImplementedError` (see also `check_not_implemented`).

    Args:
        config: the full config (`merge_trainer_configs` output); changed in place.
        trainer: the trainer being built, if any (its default policy class decides
            `simple_optimizer` in multi-agent setups).
    """
    if not isinstance(config, dict):
        raise ValueError(f"A trainer config must be a dict, got {type(config).__name__}.")
    _validate_framework_and_backend(config)

    model_config = config.get("model")
    if model_config is None:
        config["model"] = model_config = {}
    if not isinstance(model_config, dict):
        raise ValueError(f"`model` must be a dict of model options, got {model_config!r}.")

    if config.get("monitor", DEPRECATED_VALUE) != DEPRECATED_VALUE:
        deprecation_warning("monitor", "record_env", error=False)
        config["record_env"] = config.get("monitor", False)
    # An empty folder name means "the default folder" and must not read as False.
    if config.get("record_env") == "":
        config["record_env"] = True

    if config.get("callbacks") is None:
        config["callbacks"] = DefaultCallbacks
    if not callable(config["callbacks"]):
        raise ValueError(
            "`callbacks` must be a callable method that returns a subclass of "
            f"DefaultCallbacks, got {config['callbacks']}"
        )

    simple_optimizer = config.get("simple_optimizer", DEPRECATED_VALUE)
    if simple_optimizer != DEPRECATED_VALUE:
        deprecation_warning(old="simple_optimizer", error=False)

    multiagent = config.get("multiagent")
    if multiagent is None:
        config["multiagent"] = multiagent = copy_config(COMMON_CONFIG["multiagent"])
    if not isinstance(multiagent, dict):
        raise ValueError(f"`multiagent` must be a dict, got {multiagent!r}.")
    specs = multiagent["policies"] = multiagent_policy_specs(multiagent)
    is_multiagent = len(specs) > 1 or _DEFAULT_POLICY_ID not in specs
    _warn_of_unknown_policies_to_train(multiagent.get("policies_to_train"), specs)
    _warn_of_unknown_policy_keys(specs, trainer, config)

    num_gpus = config.get("num_gpus", 0) or 0
    if num_gpus > 1:
        if simple_optimizer is True:
            raise ValueError(
                "Cannot use `simple_optimizer` if `num_gpus` > 1! Consider not setting "
                "`simple_optimizer` in your config."
            )
        config["simple_optimizer"] = False
    elif simple_optimizer == DEPRECATED_VALUE:
        # The multi-device path needs every policy to be a TorchPolicy.
        config["simple_optimizer"] = is_multiagent and not _all_torch_policies(
            specs, trainer, config
        )

    input_evaluation = config.get("input_evaluation", [])
    if isinstance(input_evaluation, tuple):
        config["input_evaluation"] = list(input_evaluation)
    elif not isinstance(input_evaluation, list):
        raise ValueError(f"`input_evaluation` must be a list of strings, got {input_evaluation}!")
    if config.get("stream_to_learners"):
        from corral.execution.learner_stream import check_stream_config

        check_stream_config(config, trainer)

    _validate_model(model_config)

    batch_mode = config.get("batch_mode", "truncate_episodes")
    if batch_mode not in ("truncate_episodes", "complete_episodes"):
        raise ValueError(
            f"`batch_mode` must be one of [truncate_episodes|complete_episodes]! Got {batch_mode}"
        )
    count_steps_by = multiagent.get("count_steps_by", "env_steps")
    if count_steps_by not in ("env_steps", "agent_steps"):
        raise ValueError(
            f"`count_steps_by` must be one of [env_steps|agent_steps]! Got {count_steps_by}"
        )
    replay_mode = multiagent.get("replay_mode", "independent")
    if replay_mode not in ("independent", "lockstep"):
        raise ValueError(
            f"`multiagent.replay_mode` must be one of [independent|lockstep]! Got {replay_mode}"
        )

    _resolve_renamed_keys(config, trainer)
    _validate_evaluation(config)


# RLlib 1.13's new key -> the pre-1.13 key corral's code reads. A new key set away
# from its default is copied onto the old one; an old key set by the user still
# works, with a deprecation warning naming its replacement.
RENAMED_IN_1_13: dict[str, str] = {
    "evaluation_duration": "evaluation_num_episodes",
    "metrics_num_episodes_for_smoothing": "metrics_smoothing_episodes",
    "metrics_episode_collection_timeout_s": "collect_metrics_timeout",
    "min_time_s_per_reporting": "min_iter_time_s",
    "min_sample_timesteps_per_reporting": "timesteps_per_iteration",
}


def _resolve_renamed_keys(config: TrainerConfigDict, trainer: Any = None) -> None:
    # An algorithm's own defaults for the old keys (e.g. DQN's timesteps_per_iteration)
    # are not the user's doing: no warning for them.
    defaults = COMMON_CONFIG
    if trainer is not None and callable(getattr(trainer, "get_default_config", None)):
        defaults = trainer.get_default_config()
    for new, old in RENAMED_IN_1_13.items():
        if new not in config or old not in config:
            continue
        new_default = defaults.get(new, COMMON_CONFIG[new])
        old_default = defaults.get(old, COMMON_CONFIG[old])
        if not _same(config[new], new_default):  # the user set the new key
            value = config[new]
            # None means "no minimum" in 1.13, 0 in the old keys.
            config[old] = COMMON_CONFIG[old] if value is None else value
        elif not _same(config[old], old_default):  # the user set the old key
            deprecation_warning(old, new, error=False)
            config[new] = config[old]
        elif not _same(config[new], COMMON_CONFIG[new]):  # the algorithm set the new key
            config[old] = config[new]


# --------------------------------------------------------------------------------------
# Settings accepted for compatibility but not built yet
# --------------------------------------------------------------------------------------

# Path -> what is missing, for the keys of COMMON_CONFIG among the not-built settings (the
# one table: `corral._surface.not_built.NOT_BUILT_SETTINGS`, which has the algorithms' own
# keys too).
NOT_YET_IMPLEMENTED: dict[str, str] = common_settings()

_MISSING = object()


def _lookup(config: Mapping[str, Any], path: str) -> Any:
    # The one reader of "/"-joined paths into nested dicts (results and configs alike).
    return lookup_result(config, path, _MISSING)


def _normalised(value: Any) -> Any:
    if isinstance(value, tuple | list):
        return [_normalised(v) for v in value]
    if isinstance(value, Mapping):
        return {k: _normalised(v) for k, v in value.items()}
    return value


def _same(a: Any, b: Any) -> bool:
    if a is b:
        return True
    try:
        return bool(_normalised(a) == _normalised(b))
    except Exception:
        # e.g. numpy arrays, whose == is element-wise.
        return False


def _short_repr(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def check_not_implemented(
    config: Mapping[str, Any],
    defaults: Mapping[str, Any] | None = None,
    algorithm: str | None = None,
) -> None:
    """Raise `NotImplementedError` if `config` turns on a feature corral lacks.

    Each path of `NOT_BUILT_SETTINGS` found in `config` (and in its `evaluation_config`)
    must hold its default: the value in `defaults` (the algorithm's `DEFAULT_CONFIG`;
    `COMMON_CONFIG` when None or when the path is missing there), or one of the setting's
    `allowed` values where it has them ("sampler" for `input`, whatever an algorithm's
    defaults say). A setting of some algorithms only (its `algorithms`) is checked for
    those when `algorithm` (the trainer's name) is given: another algorithm's key of the
    same name means something else (QMIX's `replay_buffer_config`). The error lists
    every offending key.
    """
    defaults = COMMON_CONFIG if defaults is None else defaults
    problems = []
    eval_config = config.get("evaluation_config")
    sources = [("", config)]
    if isinstance(eval_config, Mapping):
        sources.append(("evaluation_config/", eval_config))
    for prefix, source in sources:
        for setting in NOT_BUILT_SETTINGS:
            if algorithm is not None and setting.algorithms and algorithm not in setting.algorithms:
                continue
            path = setting.path
            value = _lookup(source, path)
            if value is _MISSING:
                continue
            if setting.allowed:
                if any(_same(value, ok) for ok in setting.allowed):
                    continue
                default = setting.allowed[0]
            else:
                default = _lookup(defaults, path)
                if default is _MISSING:
                    default = _lookup(COMMON_CONFIG, path)
                if default is _MISSING or _same(value, default):
                    continue
            problems.append(
                f"'{prefix}{path}' = {_short_repr(value)} ({setting.what}; default: "
                f"{_short_repr(default)})"
            )
    if problems:
        raise NotImplementedError(
            "corral does not implement these config settings yet: "
            + "; ".join(problems)
            + ". Leave them at their defaults."
        )
