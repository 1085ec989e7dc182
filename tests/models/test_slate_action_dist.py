"""TorchSlateMultiCategorical: a categorical over every slate of distinct candidates."""

import itertools
import math

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.models.torch.torch_action_dist import (
    MAX_SLATES,
    TorchCategorical,
    TorchSlateMultiCategorical,
    enumerate_slates,
    slate_shape,
)

SPACE = gym.spaces.MultiDiscrete([4, 4])


def test_enumerate_slates_lists_every_ordered_slate_of_distinct_candidates():
    slates = enumerate_slates(4, 2)
    assert slates.dtype == torch.long
    assert slates.tolist() == [list(s) for s in itertools.permutations(range(4), 2)]
    assert len(enumerate_slates(5, 3)) == 5 * 4 * 3
    assert enumerate_slates(3, 1).tolist() == [[0], [1], [2]]
    with pytest.raises(ValueError, match="slate_size"):
        enumerate_slates(2, 3)
    with pytest.raises(ValueError, match=str(MAX_SLATES)):
        enumerate_slates(100, 4)


@pytest.mark.parametrize(
    "space",
    [
        gym.spaces.Discrete(4),
        gym.spaces.MultiDiscrete([4, 3]),  # not uniform
        gym.spaces.MultiDiscrete([2, 2, 2]),  # more slots than candidates
        gym.spaces.MultiDiscrete([[3, 3], [3, 3]]),  # not 1-D
    ],
)
def test_slate_shape_refuses_non_slate_spaces(space):
    with pytest.raises(ValueError, match="slate_size"):
        slate_shape(space)


def test_slate_shape():
    assert slate_shape(gym.spaces.MultiDiscrete([10, 10])) == (10, 2)


def test_greedy_and_sampled_slates_and_their_logp():
    torch.manual_seed(0)
    logits = torch.randn(3, 12)
    dist = TorchSlateMultiCategorical(logits, action_space=SPACE)
    slates = enumerate_slates(4, 2)

    greedy = dist.deterministic_sample()
    assert torch.equal(greedy, slates[logits.argmax(-1)])
    log_probs = torch.log_softmax(logits, -1)
    assert torch.allclose(dist.logp(greedy), log_probs.max(-1).values)

    sample = dist.sample()
    assert sample.shape == (3, 2) and (sample[:, 0] != sample[:, 1]).all()
    index = [slates.tolist().index(s) for s in sample.tolist()]
    expected = log_probs[torch.arange(3), torch.tensor(index)]
    assert torch.allclose(dist.sampled_action_logp(), expected)
    assert torch.allclose(dist.logp(sample), expected)
    # Over slates, entropy and KL are the categorical's.
    assert torch.allclose(dist.entropy(), TorchCategorical(logits).entropy())


def test_sample_frequencies_follow_the_softmax_over_slates():
    torch.manual_seed(1)
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0, 0.5, 0.0, 0.0, 1.5, -2.0, 0.0, 0.0, 1.0]])
    dist = TorchSlateMultiCategorical(logits.expand(20000, -1), action_space=SPACE)
    samples = dist.sample()
    codes = (samples[:, 0] * 4 + samples[:, 1]).numpy()
    slates = enumerate_slates(4, 2).numpy()
    freq = np.array([np.mean(codes == a * 4 + b) for a, b in slates])
    np.testing.assert_allclose(freq, torch.softmax(logits[0], -1).numpy(), atol=0.015)


def test_slates_not_listed_have_zero_probability():
    dist = TorchSlateMultiCategorical(torch.zeros(2, 12), action_space=SPACE)
    logp = dist.logp(torch.tensor([[1, 1], [0, 3]]))
    assert logp[0] == -math.inf
    assert logp[1] == pytest.approx(-math.log(12))


def test_temperature_divides_the_logits():
    logits = torch.tensor([[0.0, 2.0] + [0.0] * 10])
    hot = TorchSlateMultiCategorical(logits, temperature=2.0, action_space=SPACE)
    assert torch.allclose(hot.inputs, logits / 2)
    with pytest.raises(ValueError, match="temperature"):
        TorchSlateMultiCategorical(logits, temperature=0.0, action_space=SPACE)


def test_slates_come_from_the_argument_or_the_model():
    custom = torch.tensor([[2, 0], [0, 1]])
    dist = TorchSlateMultiCategorical(torch.tensor([[0.0, 1.0]]), all_slates=custom)
    assert dist.deterministic_sample().tolist() == [[0, 1]]
    assert dist.logp(torch.tensor([[2, 0]])).item() == pytest.approx(
        torch.log_softmax(torch.tensor([0.0, 1.0]), -1)[0].item()
    )

    class Model:
        slates = custom

    assert TorchSlateMultiCategorical(torch.tensor([[1.0, 0.0]]), Model()).all_slates.equal(custom)
    with pytest.raises(ValueError, match="all_slates"):
        TorchSlateMultiCategorical(torch.zeros(1, 2))
    with pytest.raises(ValueError, match="one logit per"):
        TorchSlateMultiCategorical(torch.zeros(1, 5), action_space=SPACE)


def test_required_model_output_shape_is_the_number_of_slates():
    space = gym.spaces.MultiDiscrete([10, 10, 10])
    assert TorchSlateMultiCategorical.required_model_output_shape(space, {}) == 720
