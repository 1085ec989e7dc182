"""RLlib 1.13's `Exploration.get_exploration_optimizer`, and `Random`'s TF-only op."""

from __future__ import annotations

import gymnasium as gym
import pytest
import torch

from corral._surface import TensorFlowOnlyError
from corral.agents.pg.pg_torch_policy import PGTorchPolicy
from corral.agents.trainer import COMMON_CONFIG
from corral.models.torch.torch_action_dist import TorchCategorical
from corral.utils import merge_dicts
from corral.utils.exploration.random import Random


def test_default_exploration_returns_the_policy_s_optimizers_unchanged():
    config = merge_dicts(COMMON_CONFIG, {"model": {"fcnet_hiddens": [4]}})
    policy = PGTorchPolicy(gym.spaces.Box(-1, 1, (3,)), gym.spaces.Discrete(2), config)
    optimizers = [torch.optim.SGD(policy.model.parameters(), lr=0.1)]
    assert policy.exploration.get_exploration_optimizer(optimizers) is optimizers


def test_random_s_tf_op_raises_naming_the_torch_method():
    random = Random(gym.spaces.Discrete(3))
    dist = TorchCategorical(torch.zeros(4, 3))
    with pytest.raises(TensorFlowOnlyError, match="get_torch_exploration_action"):
        random.get_tf_exploration_action_op(dist, explore=True)
    actions, _ = random.get_torch_exploration_action(dist, explore=True)  # the counterpart
    assert actions.shape == (4,)
