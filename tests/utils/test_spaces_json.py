"""Gymnasium spaces to JSON and back (`corral.utils.spaces_json`)."""

import json

import gymnasium as gym
import numpy as np
import pytest

from corral.utils.spaces_json import space_from_json, space_to_json

SPACES = [
    gym.spaces.Box(-np.inf, np.inf, (3, 2), np.float32),
    gym.spaces.Box(np.array([0.0, -1.0]), np.array([1.0, np.inf]), dtype=np.float64),
    gym.spaces.Box(0, 255, (2, 2), np.uint8),
    gym.spaces.Box(-1.0, 1.0, (), np.float32),
    gym.spaces.Discrete(5, start=2),
    gym.spaces.MultiDiscrete([3, 4]),
    gym.spaces.MultiDiscrete([2, 2], start=[1, -1]),
    gym.spaces.MultiBinary(4),
    gym.spaces.Tuple(
        [
            gym.spaces.Discrete(2),
            gym.spaces.Dict({"a": gym.spaces.Box(-1.0, 1.0, (1,)), "b": gym.spaces.MultiBinary(2)}),
        ]
    ),
]


@pytest.mark.parametrize("space", SPACES, ids=repr)
def test_round_trip_through_strict_json(space):
    text = json.dumps(space_to_json(space), allow_nan=False)
    restored = space_from_json(json.loads(text))
    assert restored == space
    assert restored.dtype == space.dtype


def test_unsupported_spaces_and_bad_descriptions_are_clear_errors():
    with pytest.raises(TypeError, match="Text"):
        space_to_json(gym.spaces.Text(5))
    with pytest.raises(ValueError, match="Unknown space type 'Graph'"):
        space_from_json({"type": "Graph"})
    with pytest.raises(ValueError, match="'type'"):
        space_from_json([1, 2])
