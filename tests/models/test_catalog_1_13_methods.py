"""RLlib 1.13's `ModelCatalog.get_action_placeholder`: TensorFlow-only, refused clearly."""

from __future__ import annotations

import gymnasium as gym
import pytest

from corral._surface import TensorFlowOnlyError
from corral.models.catalog import ModelCatalog


def test_get_action_placeholder_names_the_torch_way():
    with pytest.raises(TensorFlowOnlyError, match=r"get_action_shape\(action_space\)"):
        ModelCatalog.get_action_placeholder(gym.spaces.Discrete(2))
