"""Tuple/Dict actions: one distribution per leaf, flat action rows, rebuilt for the env."""

import gymnasium as gym
import numpy as np
import torch

from corral.models import ModelCatalog
from corral.models.torch.torch_action_dist import (
    TorchCategorical,
    TorchDiagGaussian,
    TorchMultiActionDistribution,
)
from corral.utils.spaces import flatten_actions, unflatten_actions

SPACE = gym.spaces.Tuple(
    (
        gym.spaces.Discrete(3),
        gym.spaces.Dict(
            {
                "force": gym.spaces.Box(-2.0, 2.0, (2,), np.float32),
                "mode": gym.spaces.MultiDiscrete([2, 2]),
            }
        ),
    )
)


def test_catalog_builds_children_and_output_size():
    dist_cls, num_outputs = ModelCatalog.get_action_dist(SPACE, {})
    assert num_outputs == 3 + 4 + 4
    dtype, shape = ModelCatalog.get_action_shape(SPACE)
    assert dtype == np.float32 and shape == (None, 1 + 2 + 2)
    dist = dist_cls(torch.zeros(5, num_outputs))
    assert isinstance(dist, TorchMultiActionDistribution)
    assert isinstance(dist.children[0], TorchCategorical)
    assert isinstance(dist.children[1], TorchDiagGaussian)


def test_logp_entropy_kl_are_sums_over_leaves():
    dist_cls, n = ModelCatalog.get_action_dist(SPACE, {})
    inputs = torch.randn(6, n)
    dist = dist_cls(inputs)
    actions = dist.sample()
    assert actions.shape == (6, 5) and actions.dtype == torch.float32
    expected = (
        dist.children[0].logp(actions[:, 0].long())
        + dist.children[1].logp(actions[:, 1:3])
        + dist.children[2].logp(actions[:, 3:5].long())
    )
    torch.testing.assert_close(dist.logp(actions), expected)
    torch.testing.assert_close(dist.sampled_action_logp(), expected)
    torch.testing.assert_close(dist.entropy(), sum(c.entropy() for c in dist.children))
    other = dist_cls(torch.randn(6, n))
    assert dist.multi_kl(other).shape == (6, 3)
    assert (dist.kl(other) >= -1e-6).all()
    torch.testing.assert_close(dist.kl(dist_cls(inputs)), torch.zeros(6), atol=1e-6, rtol=0)


def test_flat_rows_become_env_actions_and_back():
    row = np.array([2.0, 0.5, -1.0, 1.0, 0.0], np.float32)
    action = unflatten_actions(SPACE, row)
    assert SPACE.contains(action)
    assert action[0] == 2 and action[1]["mode"].tolist() == [1, 0]
    np.testing.assert_array_equal(flatten_actions(SPACE, action), row)
    # unsquash maps Box leaves from [-1, 1] onto their bounds.
    squashed = unflatten_actions(SPACE, row[None], unsquash=True)[0]
    np.testing.assert_allclose(squashed[1]["force"], [1.0, -2.0])
