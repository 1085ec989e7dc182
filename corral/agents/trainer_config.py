"""`TrainerConfig`: RLlib 1.13's builder-style trainer configuration.

    config = PPOConfig().training(lr=1e-3, num_sgd_iter=5).rollouts(num_rollout_workers=0)
    trainer = config.build(env="CartPole-v1")      # or tune.run("PPO", config=config.to_dict())

A `TrainerConfig` starts from its trainer class's `DEFAULT_CONFIG`; every key is an
attribute (`config.lr`, `config.lambda_` for "lambda", the `multiagent` keys flat as in
RLlib: `config.policies`, ...). The builder methods set groups of keys and return the
config itself, so calls chain; an argument left None keeps the current value. Keys
RLlib 1.13 spells differently in the builders are mapped as it does
(`num_rollout_workers` -> `num_workers`, `create_env_on_local_worker` ->
`create_env_on_driver`, `num_cpus_for_local_worker` -> `num_cpus_for_driver`,
`custom_evaluation_function` -> `custom_eval_function`, `synchronize_filter` ->
`synchronize_filters`, `callbacks_class` -> `callbacks`). `to_dict()` returns the classic
config dict, `build()` the trainer.
"""

from __future__ import annotations

import copy
import importlib
from collections.abc import Callable
from typing import Any

from corral.agents.config import COMMON_CONFIG

_MULTIAGENT_KEYS = (
    "policies",
    "policy_map_capacity",
    "policy_map_cache",
    "policy_mapping_fn",
    "policies_to_train",
    "observation_fn",
    "replay_mode",
    "count_steps_by",
)
# Builder argument -> config key, where RLlib 1.13's builders rename a key.
_RENAMED = {
    "num_rollout_workers": "num_workers",
    "create_env_on_local_worker": "create_env_on_driver",
    "num_cpus_for_local_worker": "num_cpus_for_driver",
    "custom_evaluation_function": "custom_eval_function",
    "synchronize_filter": "synchronize_filters",
    "lambda_": "lambda",
    "input_": "input",
    # RLlib 1.13's attribute names where a builder method has the key's name.
    "callbacks_class": "callbacks",
    "framework_str": "framework",
}
# Builder method -> the arguments it takes (RLlib 1.13's signatures).
_GROUPS: dict[str, tuple[str, ...]] = {
    "python_environment": ("extra_python_environs_for_driver", "extra_python_environs_for_worker"),
    "resources": (
        "num_gpus",
        "_fake_gpus",
        "num_cpus_per_worker",
        "num_gpus_per_worker",
        "num_cpus_for_local_worker",
        "custom_resources_per_worker",
        "placement_strategy",
    ),
    "framework": (
        "framework",
        "eager_tracing",
        "eager_max_retraces",
        "tf_session_args",
        "local_tf_session_args",
    ),
    "environment": (
        "env",
        "env_config",
        "observation_space",
        "action_space",
        "env_task_fn",
        "render_env",
        "record_env",
        "clip_rewards",
        "normalize_actions",
        "clip_actions",
        "disable_env_checking",
    ),
    "rollouts": (
        "num_rollout_workers",
        "num_envs_per_worker",
        "create_env_on_local_worker",
        "sample_collector",
        "sample_async",
        "rollout_fragment_length",
        "batch_mode",
        "remote_worker_envs",
        "remote_env_batch_wait_ms",
        "ignore_worker_failures",
        "recreate_failed_workers",
        "horizon",
        "soft_horizon",
        "no_done_at_end",
        "preprocessor_pref",
        "observation_filter",
        "synchronize_filter",
        "compress_observations",
    ),
    "exploration": ("explore", "exploration_config"),
    "evaluation": (
        "evaluation_interval",
        "evaluation_duration",
        "evaluation_duration_unit",
        "evaluation_parallel_to_training",
        "evaluation_config",
        "evaluation_num_workers",
        "custom_evaluation_function",
        "always_attach_evaluation_results",
    ),
    "offline_data": (
        "input_",
        "input_config",
        "actions_in_input_normalized",
        "input_evaluation",
        "postprocess_inputs",
        "shuffle_buffer_size",
        "output",
        "output_config",
        "output_compress_columns",
        "output_max_file_size",
    ),
    "multi_agent": _MULTIAGENT_KEYS,
    "reporting": (
        "keep_per_episode_custom_metrics",
        "metrics_episode_collection_timeout_s",
        "metrics_num_episodes_for_smoothing",
        "min_time_s_per_reporting",
        "min_train_timesteps_per_reporting",
        "min_sample_timesteps_per_reporting",
    ),
    "debugging": ("logger_config", "log_level", "log_sys_usage", "fake_sampler", "seed"),
    "experimental": (
        "_tf_policy_handles_more_than_one_loss",
        "_disable_preprocessor_api",
        "_disable_action_flattening",
        "_disable_execution_plan_api",
    ),
}


def _key(name: str) -> str:
    return _RENAMED.get(name, name)


def _attr(key: str) -> str:
    """The attribute name of a config key ("lambda" is a Python keyword)."""
    return {"lambda": "lambda_", "input": "input_"}.get(key, key)


class TrainerConfig:
    """A trainer's configuration, built with chained method calls (RLlib 1.13).

    Args:
        trainer_class: the `Trainer` subclass this config builds (None: the base
            `Trainer` and `COMMON_CONFIG`).
    """

    def __init__(self, trainer_class: type | None = None) -> None:
        defaults = trainer_class.get_default_config() if trainer_class else COMMON_CONFIG
        values = copy.deepcopy({k: v for k, v in defaults.items() if k != "multiagent"})
        for key in _MULTIAGENT_KEYS:
            values[key] = copy.deepcopy((defaults.get("multiagent") or {}).get(key))
        object.__setattr__(self, "trainer_class", trainer_class)
        object.__setattr__(self, "_values", values)

    # -- attribute access ---------------------------------------------------------

    def __getattr__(self, name: str) -> Any:
        values = self.__dict__.get("_values", {})
        key = _key(name)
        if key in values:
            return values[key]
        raise AttributeError(f"{type(self).__name__} has no setting {name!r}.")

    def __setattr__(self, name: str, value: Any) -> None:
        if name == "trainer_class":
            object.__setattr__(self, name, value)
            return
        self._values[_key(name)] = value

    def __repr__(self) -> str:
        owner = self.trainer_class.__name__ if self.trainer_class else "Trainer"
        return f"{type(self).__name__}({owner}, {len(self._values)} settings)"

    def _set(self, method: str, allowed: tuple[str, ...] | None, kwargs: dict) -> TrainerConfig:
        for name, value in kwargs.items():
            if allowed is not None and name not in allowed:
                raise TypeError(
                    f"{type(self).__name__}.{method}() got an unexpected keyword argument "
                    f"{name!r}; it takes {list(allowed)}."
                )
            if value is not None:
                self._values[_key(name)] = value
        return self

    # -- builder methods (each returns the config, so calls chain) ------------------

    def python_environment(self, **kwargs: Any) -> TrainerConfig:
        """Env variables for the driver and the workers."""
        return self._set("python_environment", _GROUPS["python_environment"], kwargs)

    def resources(self, **kwargs: Any) -> TrainerConfig:
        """CPUs/GPUs of the driver and workers, custom resources, placement strategy."""
        return self._set("resources", _GROUPS["resources"], kwargs)

    def framework(self, framework: str | None = None, **kwargs: Any) -> TrainerConfig:
        """The deep-learning framework ("torch") and TensorFlow-only settings."""
        return self._set("framework", _GROUPS["framework"], {"framework": framework, **kwargs})

    def environment(self, env: Any = None, **kwargs: Any) -> TrainerConfig:
        """The env, its config and spaces, rendering/recording, reward and action handling."""
        return self._set("environment", _GROUPS["environment"], {"env": env, **kwargs})

    def rollouts(self, **kwargs: Any) -> TrainerConfig:
        """Rollout workers: how many, envs per worker, fragments, batch mode, horizons."""
        return self._set("rollouts", _GROUPS["rollouts"], kwargs)

    def training(self, **kwargs: Any) -> TrainerConfig:
        """Training settings: the common ones (gamma, lr, train_batch_size, model,
        optimizer) and every key of the trainer class's own config."""
        allowed = {"gamma", "lr", "train_batch_size", "model", "optimizer"}
        algo_keys = set(self._values) - set(COMMON_CONFIG) - set(_MULTIAGENT_KEYS)
        allowed |= {_attr(k) for k in algo_keys} | algo_keys
        if "model" in kwargs and isinstance(kwargs["model"], dict):
            kwargs["model"] = {**(self._values.get("model") or {}), **kwargs["model"]}
        return self._set("training", tuple(sorted(allowed)), kwargs)

    def callbacks(self, callbacks_class: Any) -> TrainerConfig:
        """The `DefaultCallbacks` subclass whose hooks run during sampling and training."""
        self._values["callbacks"] = callbacks_class
        return self

    def exploration(self, **kwargs: Any) -> TrainerConfig:
        """Whether to explore, and the `Exploration` config."""
        return self._set("exploration", _GROUPS["exploration"], kwargs)

    def evaluation(self, **kwargs: Any) -> TrainerConfig:
        """When and how long to evaluate, with which workers and overrides."""
        return self._set("evaluation", _GROUPS["evaluation"], kwargs)

    def offline_data(self, **kwargs: Any) -> TrainerConfig:
        """Offline input/output settings."""
        return self._set("offline_data", _GROUPS["offline_data"], kwargs)

    def multi_agent(self, **kwargs: Any) -> TrainerConfig:
        """Policies, the mapping function, which policies train, replay and step counting."""
        return self._set("multi_agent", _GROUPS["multi_agent"], kwargs)

    def reporting(self, **kwargs: Any) -> TrainerConfig:
        """What one `train()` result covers (time, steps, smoothing window)."""
        return self._set("reporting", _GROUPS["reporting"], kwargs)

    def debugging(self, **kwargs: Any) -> TrainerConfig:
        """Logging, log level, system-usage stats, fake sampler, seed."""
        return self._set("debugging", _GROUPS["debugging"], kwargs)

    def experimental(self, **kwargs: Any) -> TrainerConfig:
        """RLlib 1.13's experimental flags."""
        return self._set("experimental", _GROUPS["experimental"], kwargs)

    # -- results -------------------------------------------------------------------

    def to_dict(self) -> dict:
        """The classic config dict (`multiagent` nested), for `tune.run` or a trainer."""
        config = copy.deepcopy(self._values)
        config["multiagent"] = {k: config.pop(k) for k in _MULTIAGENT_KEYS}
        return config

    def copy(self) -> TrainerConfig:
        """An independent copy."""
        new = type(self).__new__(type(self))
        object.__setattr__(new, "trainer_class", self.trainer_class)
        object.__setattr__(new, "_values", copy.deepcopy(self._values))
        return new

    def build(self, env: Any = None, logger_creator: Callable | None = None) -> Any:
        """The trainer this config describes; `env` overrides the configured one."""
        from corral.agents.trainer import Trainer

        if env is not None:
            self._values["env"] = env
        trainer_class = self.trainer_class or Trainer
        return trainer_class(config=self.to_dict(), env=env, logger_creator=logger_creator)


def _config_class(name: str, trainer_path: str) -> type:
    """A `TrainerConfig` subclass for the trainer at `trainer_path` ("module:Class")."""

    def __init__(self: TrainerConfig, trainer_class: type | None = None) -> None:
        if trainer_class is None:
            module, _, attr = trainer_path.partition(":")
            trainer_class = getattr(importlib.import_module(module), attr)
        TrainerConfig.__init__(self, trainer_class)

    doc = f"`TrainerConfig` of `{trainer_path.replace(':', '.')}` (its DEFAULT_CONFIG)."
    return type(name, (TrainerConfig,), {"__init__": __init__, "__doc__": doc})


# One builder per algorithm corral builds (RLlib 1.13 had PPOConfig and PGConfig).
PPOConfig = _config_class("PPOConfig", "corral.agents.ppo.ppo:PPOTrainer")
PGConfig = _config_class("PGConfig", "corral.agents.pg.pg:PGTrainer")
APPOConfig = _config_class("APPOConfig", "corral.agents.ppo.appo:APPOTrainer")
A2CConfig = _config_class("A2CConfig", "corral.agents.a3c.a2c:A2CTrainer")
DQNConfig = _config_class("DQNConfig", "corral.agents.dqn.dqn:DQNTrainer")
SimpleQConfig = _config_class("SimpleQConfig", "corral.agents.dqn.simple_q:SimpleQTrainer")
ApexConfig = _config_class("ApexConfig", "corral.agents.dqn.apex:ApexTrainer")
SACConfig = _config_class("SACConfig", "corral.agents.sac.sac:SACTrainer")
DDPGConfig = _config_class("DDPGConfig", "corral.agents.ddpg.ddpg:DDPGTrainer")
TD3Config = _config_class("TD3Config", "corral.agents.ddpg.td3:TD3Trainer")

__all__ = [
    "A2CConfig",
    "APPOConfig",
    "ApexConfig",
    "DDPGConfig",
    "DQNConfig",
    "PGConfig",
    "PPOConfig",
    "SACConfig",
    "SimpleQConfig",
    "TD3Config",
    "TrainerConfig",
]
