"""Preprocessors: every observation space becomes the float32 array the model reads."""

import inspect

import gymnasium as gym
import numpy as np
import pytest

from corral.models.preprocessors import NoPreprocessor, preprocessor_for_space
from corral.utils.error import UnsupportedSpaceException


def test_discrete_is_one_hot():
    p = preprocessor_for_space(gym.spaces.Discrete(4))
    assert p.shape == (4,)
    np.testing.assert_array_equal(p.transform(2), [0, 0, 1, 0])
    np.testing.assert_array_equal(p.transform_batch([0, 3]), [[1, 0, 0, 0], [0, 0, 0, 1]])
    assert p.transform(1).dtype == np.float32


def test_multi_discrete_is_one_hot_per_component():
    p = preprocessor_for_space(gym.spaces.MultiDiscrete([2, 3]))
    assert p.shape == (5,)
    np.testing.assert_array_equal(p.transform(np.array([1, 2])), [0, 1, 0, 0, 1])


def test_multi_binary_passes_bits():
    p = preprocessor_for_space(gym.spaces.MultiBinary(3))
    np.testing.assert_array_equal(p.transform(np.array([1, 0, 1], np.int8)), [1, 0, 1])


@pytest.mark.parametrize("shape", [(3,), (2, 3), (42, 42, 3)])
def test_box_of_any_shape_keeps_its_shape(shape):
    space = gym.spaces.Box(0, 255, shape, np.uint8)
    p = preprocessor_for_space(space)
    assert isinstance(p, NoPreprocessor)
    assert p.shape == shape and p.observation_space is space
    out = p.transform(space.sample())
    assert out.shape == shape and out.dtype == np.float32


def test_dict_and_tuple_are_flattened():
    space = gym.spaces.Dict(
        {"id": gym.spaces.Discrete(3), "pos": gym.spaces.Box(-1, 1, (2,), np.float32)}
    )
    p = preprocessor_for_space(space)
    assert p.shape == (5,)
    obs = {"id": 1, "pos": np.array([0.5, -0.5], np.float32)}
    np.testing.assert_array_equal(p.transform(obs), [0, 1, 0, 0.5, -0.5])
    tup = gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Box(-1, 1, (1,), np.float32)))
    q = preprocessor_for_space(tup)
    np.testing.assert_array_equal(
        q.transform_batch([(1, np.array([0.25], np.float32))]), [[0, 1, 0.25]]
    )
    assert q.observation_space.shape == (3,)


def test_unsupported_space_is_named():
    with pytest.raises(UnsupportedSpaceException, match="Text"):
        preprocessor_for_space(gym.spaces.Text(5))


def test_preprocessors_take_rllib_1_13_s_keywords():
    from corral.models.preprocessors import OneHotPreprocessor

    box = gym.spaces.Box(-1.0, 1.0, (3,))
    assert NoPreprocessor(obs_space=box, options={}).shape == (3,)
    one_hot = OneHotPreprocessor(obs_space=gym.spaces.Discrete(4), options={})
    assert one_hot.shape == (4,) and one_hot.original_space == gym.spaces.Discrete(4)


def test_observation_space_is_rllib_1_13_s_property():
    from corral.models.preprocessors import AtariRamPreprocessor, Preprocessor

    for cls in (Preprocessor, NoPreprocessor):
        assert isinstance(inspect.getattr_static(cls, "observation_space"), property)
    box = gym.spaces.Box(-2.0, 2.0, (3,), np.float32)
    assert NoPreprocessor(box).observation_space is box  # the env's own space
    space = gym.spaces.Dict({"a": gym.spaces.Discrete(3), "b": box})
    flat = preprocessor_for_space(space).observation_space
    assert isinstance(flat, gym.spaces.Box) and flat.shape == (6,) and flat.dtype == np.float32
    assert flat.original_space == space  # what restore_original_dimensions reads
    ram = AtariRamPreprocessor(gym.spaces.Box(0, 255, (128,), np.uint8)).observation_space
    assert ram.shape == (128,) and ram.low.min() == -1.0 and ram.high.max() == 1.0

    class Halves(Preprocessor):
        """An RLlib 1.13 user preprocessor setting its shape after ``__init__``."""

        def __init__(self, obs_space, options=None):
            super().__init__(obs_space, options)
            self.shape = (2,)

        def transform(self, observation):
            return np.asarray(observation, np.float32)[:2]

    halves = Halves(box)
    assert halves.observation_space.shape == (2,)  # follows `shape`, as 1.13's property
    assert not hasattr(halves.observation_space, "original_space")
    assert halves.observation_space is halves.observation_space
