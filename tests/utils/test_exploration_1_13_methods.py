"""RLlib 1.13's `Exploration.get_exploration_optimizer`."""

from __future__ import annotations

import gymnasium as gym
import torch

from corral.agents.pg.pg_torch_policy import PGTorchPolicy
from corral.agents.trainer import COMMON_CONFIG
from corral.utils import merge_dicts


def test_default_exploration_returns_the_policy_s_optimizers_unchanged():
    config = merge_dicts(COMMON_CONFIG, {"model": {"fcnet_hiddens": [4]}})
    policy = PGTorchPolicy(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2), config)
    optimizers = [torch.optim.SGD(policy.model.parameters(), lr=0.1)]
    assert policy.exploration.get_exploration_optimizer(optimizers) is optimizers
