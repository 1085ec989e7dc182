"""RLlib 1.13's `check_multi_agent(config)`: the config's policies, and whether it is
multi-agent."""

from __future__ import annotations

from typing import Any

from corral.policy.policy import PolicySpec


def check_multi_agent(config: dict) -> tuple[dict[str, PolicySpec], bool]:
    """(policy id -> `PolicySpec`, whether the config is multi-agent): `multiagent.policies`
    in RLlib 1.13's forms (a dict of specs or tuples, a set or list of ids), or the
    default policy alone.

    Raises:
        KeyError: (a `corral.utils.config_spec.ConfigKeyError`, also a `ValueError`) a
            `multiagent` key COMMON_CONFIG lacks, or a policy id that is not a str.
        ValueError: `multiagent.policies` is of another type.
    """
    from corral.agents.config_validation import multiagent_policy_specs
    from corral.evaluation.worker_set import policy_specs_from_config
    from corral.policy.sample_batch import DEFAULT_POLICY_ID

    multiagent: Any = config.get("multiagent") or {}
    policies = multiagent.get("policies")
    if policies is not None and not isinstance(policies, dict | set | list | tuple):
        raise ValueError(
            f"multiagent.policies must be a dict, set or list of policy ids, got {policies!r}"
        )
    multiagent_policy_specs(multiagent)  # RLlib 1.13's checks of keys and policy ids
    specs = policy_specs_from_config(config, None)
    return specs, set(specs) != {DEFAULT_POLICY_ID}
