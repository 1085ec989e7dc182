"""RLlib 1.13's own `RolloutWorker(...)` keywords, turned into corral's worker config.

corral builds its workers from a trainer's merged config (`RolloutWorker(env_creator=...,
policy_specs=..., config=...)`). RLlib 1.x code also builds one by hand with the worker's
own keywords, as RLlib's docs did:

    worker = RolloutWorker(env_creator=lambda ctx: gym.make("CartPole-v1"),
                           policy_spec=PGTorchPolicy, rollout_fragment_length=50)

`worker_config_from_kwargs` turns those keywords into the policy specs and the config a
trainer would have handed the worker, so the worker behaves the same either way.
"""

from __future__ import annotations

import copy
from typing import Any

from corral.policy.policy import PolicySpec
from corral.policy.sample_batch import DEFAULT_POLICY_ID

# Each keyword of RLlib 1.13's `RolloutWorker.__init__` that sets a config key: its path
# in corral's config, and RLlib 1.13's default for a hand-built worker (`_GIVEN_ONLY`:
# the config's own value unless the keyword is given).
_GIVEN_ONLY = object()
_CONFIG_KEYWORDS: dict[str, tuple[tuple[str, ...], Any]] = {
    "rollout_fragment_length": (("rollout_fragment_length",), 100),
    "count_steps_by": (("multiagent", "count_steps_by"), "env_steps"),
    "batch_mode": (("batch_mode",), "truncate_episodes"),
    "episode_horizon": (("horizon",), None),
    "preprocessor_pref": (("preprocessor_pref",), "deepmind"),
    "sample_async": (("sample_async",), False),
    "compress_observations": (("compress_observations",), False),
    "num_envs": (("num_envs_per_worker",), 1),
    "observation_fn": (("multiagent", "observation_fn"), None),
    "observation_filter": (("observation_filter",), "NoFilter"),
    "clip_rewards": (("clip_rewards",), None),
    "normalize_actions": (("normalize_actions",), True),
    "clip_actions": (("clip_actions",), False),
    "env_config": (("env_config",), _GIVEN_ONLY),
    "model_config": (("model",), _GIVEN_ONLY),
    "policy_mapping_fn": (("multiagent", "policy_mapping_fn"), _GIVEN_ONLY),
    "policies_to_train": (("multiagent", "policies_to_train"), _GIVEN_ONLY),
    "record_env": (("record_env",), False),
    "log_level": (("log_level",), _GIVEN_ONLY),
    "input_creator": (("input",), _GIVEN_ONLY),
    "input_evaluation": (("input_evaluation",), _GIVEN_ONLY),
    "output_creator": (("output",), _GIVEN_ONLY),
    "remote_worker_envs": (("remote_worker_envs",), False),
    "remote_env_batch_wait_ms": (("remote_env_batch_wait_ms",), 0),
    "soft_horizon": (("soft_horizon",), False),
    "no_done_at_end": (("no_done_at_end",), False),
    "seed": (("seed",), None),
    "extra_python_environs": (("extra_python_environs_for_worker",), _GIVEN_ONLY),
    "fake_sampler": (("fake_sampler",), False),
    "disable_env_checking": (("disable_env_checking",), False),
}
# Keywords whose values a hand-built worker converts, as RLlib 1.13's did (environment
# variables set with `str(value)`), where a trainer's config must hold strings.
_STR_CONVERTED = {"extra_python_environs"}
# Keywords with nothing to set in corral (TensorFlow's session), accepted at these values.
_INERT_KEYWORDS = {"tf_session_creator": (None,)}


def worker_config_from_kwargs(
    policy_spec: Any, policy_config: dict | None, kwargs: dict[str, Any]
) -> tuple[dict[str, PolicySpec], dict]:
    """(policy specs, config) of a worker built with RLlib 1.13's keywords.

    Args:
        policy_spec: a policy class (the worker's one policy, `default_policy`), or a
            dict of policy id -> `PolicySpec` or `(class, obs_space, act_space, config)`.
        policy_config: the policies' config, merged over `COMMON_CONFIG`.
        kwargs: the rest of RLlib 1.13's keywords (`rollout_fragment_length`,
            `num_envs`, `callbacks`, ...).

    Raises:
        TypeError: a keyword RLlib 1.13's `RolloutWorker` does not take, or no policy.
    """
    from corral.agents.config import COMMON_CONFIG
    from corral.env.remote_vector_env import check_remote_env_batch_wait_ms
    from corral.evaluation.worker_set import policy_specs_from_config
    from corral.utils import merge_dicts

    unknown = sorted(set(kwargs) - set(_CONFIG_KEYWORDS) - {"callbacks", *_INERT_KEYWORDS})
    if unknown:
        raise TypeError(f"RolloutWorker() got unexpected keyword argument(s) {unknown}")
    for key, accepted in _INERT_KEYWORDS.items():
        if key in kwargs and kwargs[key] not in accepted:
            raise NotImplementedError(
                f"RolloutWorker({key}={kwargs[key]!r}): corral's workers run torch policies "
                "and have nothing to set for it."
            )
    if isinstance(policy_spec, type):
        policies: Any = {DEFAULT_POLICY_ID: PolicySpec(policy_class=policy_spec)}
    elif isinstance(policy_spec, dict) and policy_spec:
        policies = policy_spec
    else:
        raise TypeError(
            "RolloutWorker needs its policies: policy_spec=<a Policy class> or a dict of "
            f"policy id -> PolicySpec, got {policy_spec!r}"
        )
    config = merge_dicts(COMMON_CONFIG, copy.deepcopy(policy_config or {}))
    for key, (path, default) in _CONFIG_KEYWORDS.items():
        value = kwargs.get(key, default)
        if value is _GIVEN_ONLY:
            continue
        target = config
        for part in path[:-1]:
            target = target.setdefault(part, {})
        target[path[-1]] = value
        if key in kwargs and key not in _STR_CONVERTED:
            _check_keyword(key, path, value)
    if config.get("remote_worker_envs"):
        check_remote_env_batch_wait_ms(config.get("remote_env_batch_wait_ms", 0))
    callbacks = kwargs.get("callbacks")
    if callbacks is not None:
        # RLlib 1.13 hands the worker an instance; corral's config holds a class.
        config["callbacks"] = callbacks if isinstance(callbacks, type) else lambda: callbacks
    config["multiagent"]["policies"] = policies
    specs = policy_specs_from_config(config, None)
    missing = [pid for pid, spec in specs.items() if spec.policy_class is None]
    if missing:
        raise TypeError(f"RolloutWorker: policies {missing} have no policy class")
    return specs, config


def _check_keyword(key: str, path: tuple[str, ...], value: Any) -> None:
    """A keyword's value checked as a trainer checks its config entry (a trainer's
    workers get a checked config); the error names the keyword.

    Raises:
        ConfigValueError, ConfigTypeError: the value is out of range or of the wrong type.
    """
    from corral.agents.config_validation import check_config_values
    from corral.utils.config_spec import ConfigTypeError, ConfigValueError

    entry: Any = value
    for part in reversed(path):
        entry = {part: entry}
    try:
        check_config_values(entry)
    except (ConfigValueError, ConfigTypeError) as err:
        raise type(err)(f"RolloutWorker({key}={value!r}): {err}") from None
