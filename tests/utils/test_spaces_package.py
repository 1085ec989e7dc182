"""`corral.utils.spaces` as RLlib's package: space_utils, Repeated (through the
preprocessors and back to the model), Simplex, FlexDict."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.models.preprocessors import (
    RepeatedValuesPreprocessor,
    get_preprocessor,
    preprocessor_for_space,
    restore_original_dimensions,
)
from corral.models.repeated_values import RepeatedValues
from corral.utils.spaces import flat_action_size, flatten_space, unflatten_actions
from corral.utils.spaces import space_utils as su
from corral.utils.spaces.flexdict import FlexDict
from corral.utils.spaces.repeated import Repeated
from corral.utils.spaces.simplex import Simplex

BOX = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
ITEM = gym.spaces.Dict({"kind": gym.spaces.Discrete(3), "pos": BOX})


def test_the_package_keeps_its_old_names():
    space = gym.spaces.Tuple((gym.spaces.Discrete(2), BOX))
    assert len(flatten_space(space)) == 2 and flat_action_size(BOX) == 2
    assert unflatten_actions(space, np.array([1.0, 0.5, -0.5]))[0] == 1


def test_space_utils():
    space = gym.spaces.Dict({"b": BOX, "a": gym.spaces.Discrete(2)})
    assert su.flatten_space(space) == [space["a"], space["b"]]  # sorted keys, as RLlib
    struct = su.get_base_struct_from_space(space)
    assert struct == {"a": space["a"], "b": BOX}
    batch = su.get_dummy_batch_for_space(space, batch_size=4)
    assert batch["b"].shape == (4, 2) and batch["a"].shape == (4,)
    timed = su.get_dummy_batch_for_space(BOX, batch_size=3, time_size=5, fill_value="random")
    assert timed.shape == (3, 5, 2)
    assert su.flatten_to_single_ndarray({"x": np.ones(2), "y": np.zeros((1, 2))}).shape == (4,)
    rows = su.unbatch({"x": np.arange(3), "y": (np.arange(3) * 2,)})
    assert rows[2] == {"x": 2, "y": (4,)}
    wide = gym.spaces.Box(-2.0, 2.0, (2,), np.float32)
    np.testing.assert_allclose(su.unsquash_action(np.array([-1.0, 1.0]), wide), [-2.0, 2.0])
    np.testing.assert_allclose(su.normalize_action(np.array([-2.0, 0.0]), wide), [-1.0, 0.0])
    np.testing.assert_allclose(su.clip_action(np.array([3.0, -3.0]), wide), [2.0, -2.0])
    converted = su.convert_element_to_space_type(np.ones(2, np.float64), BOX.sample())
    assert converted.dtype == np.float32 and BOX.contains(converted)


def test_repeated_through_the_preprocessor_and_back():
    space = Repeated(ITEM, max_len=3)
    assert get_preprocessor(space) is RepeatedValuesPreprocessor
    prep = get_preprocessor(space)(space)
    assert prep.shape == (1 + 3 * 5,) and prep.size == 16
    obs = [{"kind": 2, "pos": np.array([0.5, -0.5], np.float32)}]
    row = prep.transform(obs)
    assert row[0] == 1 and row[1:6].tolist() == [0, 0, 1, 0.5, -0.5]
    assert not row[6:].any()
    with pytest.raises(ValueError, match="max len"):
        prep.transform([obs[0]] * 4)
    flat = torch.from_numpy(np.stack([row, prep.transform([obs[0], obs[0]])]))
    restored = restore_original_dimensions(flat, prep.observation_space)
    assert isinstance(restored, RepeatedValues) and restored.max_len == 3
    assert restored.lengths.tolist() == [1, 2]
    assert restored.values["pos"].shape == (2, 3, 2)
    rows = restored.unbatch_all()
    assert len(rows[0]) == 1 and len(rows[1]) == 2
    assert rows[1][1]["pos"].tolist() == [0.5, -0.5]


def test_repeated_inside_a_dict():
    space = gym.spaces.Dict({"items": Repeated(BOX, 2), "time": BOX})
    prep = preprocessor_for_space(space)
    row = prep.transform({"items": [np.array([0.1, 0.2], np.float32)], "time": np.zeros(2)})
    assert prep.shape == (5 + 2,) and row[:3].tolist() == pytest.approx([1, 0.1, 0.2])
    restored = restore_original_dimensions(torch.from_numpy(row[None]), prep.observation_space)
    assert restored["items"].lengths.tolist() == [1.0] and restored["time"].shape == (1, 2)


class _ListEnv(gym.Env):
    """Observations: a list of 0-3 points."""

    observation_space = Repeated(BOX, max_len=3)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        self.t = 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return [BOX.sample() for _ in range(1 + self.t % 3)], {}

    def step(self, action):
        self.t += 1
        obs = [BOX.sample() for _ in range(self.t % 4)]
        return obs, float(action), self.t >= 5, False, {}


def test_a_trainer_learns_on_repeated_observations():
    from corral.agents.pg import PGTrainer

    trainer = PGTrainer(
        config={"num_workers": 0, "train_batch_size": 20, "rollout_fragment_length": 20},
        env=_ListEnv,
    )
    try:
        result = trainer.train()
        assert result["timesteps_total"] >= 20
        action = trainer.compute_single_action([BOX.sample()])
        assert action in (0, 1)
    finally:
        trainer.stop()


def test_simplex_and_flexdict():
    simplex = Simplex((2, 3))
    simplex.seed(0)
    point = simplex.sample()
    assert point.shape == (2, 3) and simplex.contains(point)
    assert not simplex.contains(np.ones((2, 3)))
    assert Simplex((3,)) == Simplex((3,), concentration=np.ones(3))
    flex = FlexDict(a=BOX)
    flex["b"] = gym.spaces.Discrete(2)
    assert set(flex.sample()) == {"a", "b"}
    with pytest.raises(TypeError):
        flex["c"] = 3
