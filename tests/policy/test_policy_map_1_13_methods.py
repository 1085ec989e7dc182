"""RLlib 1.13's `PolicyMap.create_policy`."""

from __future__ import annotations

import gymnasium as gym
import pytest

from corral.agents.pg.pg_torch_policy import PGTorchPolicy
from corral.agents.trainer import COMMON_CONFIG
from corral.policy.policy_map import PolicyMap
from corral.utils import merge_dicts


def test_create_policy_builds_and_stores_the_policy():
    obs, act = gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2)
    override = {"lr": 0.5, "model": {"fcnet_hiddens": [4]}}
    merged = merge_dicts(COMMON_CONFIG, override)
    policy_map = PolicyMap(capacity=2)
    assert policy_map.create_policy("p", PGTorchPolicy, obs, act, override, merged) is None
    policy = policy_map["p"]
    assert isinstance(policy, PGTorchPolicy) and policy.config["lr"] == 0.5
    assert policy_map.spaces("p") == (obs, act) and policy_map.policy_class("p") is PGTorchPolicy
    with pytest.raises(ValueError, match="PyTorch only"):
        policy_map.create_policy("q", PGTorchPolicy, obs, act, {}, {**merged, "framework": "tf"})
    assert "q" not in policy_map
