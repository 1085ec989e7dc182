"""RLlib 1.13's model helpers: ModelV2 (base of every corral model), ActionDistribution,
models.torch.misc layers, models.utils lookups, and RLlib's get_preprocessor classes."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from corral._surface import TensorFlowOnlyError
from corral.models import ActionDistribution, ModelCatalog, ModelV2
from corral.models import preprocessors as pp
from corral.models.modelv2 import flatten, restore_original_dimensions
from corral.models.torch.misc import (
    AppendBiasLayer,
    Reshape,
    SlimConv2d,
    SlimFC,
    normc_initializer,
    same_padding,
    valid_padding,
)
from corral.models.torch.torch_action_dist import TorchCategorical
from corral.models.torch.torch_modelv2 import TorchModelV2
from corral.models.utils import get_activation_fn, get_filter_config, get_initializer


def test_every_corral_model_is_a_modelv2():
    space = gym.spaces.Box(-1, 1, (4,), np.float32)
    model = ModelCatalog.get_model_v2(
        space, gym.spaces.Discrete(2), 2, {"fcnet_hiddens": [8]}, framework="torch"
    )
    assert isinstance(model, ModelV2) and isinstance(model, TorchModelV2)
    assert issubclass(TorchModelV2, nn.Module)
    assert model.last_output() is None
    out, _ = model({"obs": torch.zeros(3, 4)})
    assert model.last_output() is out
    with model.context():
        pass
    dist = TorchCategorical(out, model)
    assert isinstance(dist, ActionDistribution)


def test_a_custom_rllib_style_model_still_works():
    class MyModel(TorchModelV2, nn.Module):
        def __init__(self, obs_space, action_space, num_outputs, model_config, name):
            TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
            nn.Module.__init__(self)
            self.layer = SlimFC(4, num_outputs, initializer=normc_initializer(0.01))

        def forward(self, input_dict, state, seq_lens):
            return self.layer(input_dict["obs_flat"]), state

        def value_function(self):
            return torch.zeros(1)

    model = MyModel(gym.spaces.Box(-1, 1, (4,)), gym.spaces.Discrete(2), 2, {}, "m")
    out, state = model({"obs": torch.ones(5, 4)}, [], None)
    assert out.shape == (5, 2) and state == [] and isinstance(model, ModelV2)


def test_modelv2_flatten_and_restore():
    assert flatten(torch.zeros(2, 3, 4), "torch").shape == (2, 12)
    with pytest.raises(TensorFlowOnlyError):
        flatten(torch.zeros(2, 3), "tf")
    space = gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Box(0, 1, (3,))))
    prep = pp.get_preprocessor(space)(space)
    flat = torch.from_numpy(prep.transform_batch([space.sample(), space.sample()]))
    restored = restore_original_dimensions(flat, prep.observation_space, "torch")
    assert restored[0].shape == (2, 2) and restored[1].shape == (2, 3)


def test_misc_layers():
    fc = SlimFC(3, 2, activation_fn="relu", bias_init=0.5)
    assert fc(torch.zeros(1, 3)).tolist() == [[0.5, 0.5]]
    padding, out = same_padding((84, 84), 8, 4)
    assert out == (21, 21)
    conv = SlimConv2d(3, 4, 8, 4, padding)
    assert conv(torch.zeros(1, 3, 84, 84)).shape == (1, 4, 21, 21)
    assert valid_padding((84, 84), 8, 4) == ((0, 0), (20, 20))
    bias = AppendBiasLayer(2)
    assert bias(torch.ones(3, 1)).shape == (3, 3)
    assert len(list(bias.parameters())) == 1
    assert Reshape([-1, 2])(torch.zeros(2, 3, 2)).shape == (6, 2)
    weight = torch.empty(4, 5)
    normc_initializer(2.0)(weight)
    np.testing.assert_allclose(weight.norm(dim=1).numpy(), 2.0, rtol=1e-5)


def test_model_utils():
    assert get_activation_fn("tanh", "torch") is nn.Tanh
    assert get_activation_fn(None, "torch") is None
    assert get_activation_fn(nn.ReLU, "torch") is nn.ReLU
    with pytest.raises(ValueError, match="Unknown activation"):
        get_activation_fn("nope", "torch")
    with pytest.raises(TensorFlowOnlyError):
        get_activation_fn("relu")  # RLlib's default framework is "tf"
    assert get_initializer("xavier_normal", "torch") is nn.init.xavier_normal_
    assert get_filter_config((84, 84, 4))[0] == [16, [8, 8], 4]
    with pytest.raises(ValueError, match="conv_filters"):
        get_filter_config((7, 7, 1))


def test_rllib_get_preprocessor_returns_classes():
    assert pp.get_preprocessor(gym.spaces.Discrete(3)) is pp.OneHotPreprocessor
    assert pp.get_preprocessor(gym.spaces.MultiDiscrete([2, 2])) is pp.OneHotPreprocessor
    assert pp.get_preprocessor(gym.spaces.Box(0, 1, (3,))) is pp.NoPreprocessor
    assert pp.get_preprocessor(gym.spaces.Box(0, 255, (128,), np.uint8)) is (
        pp.AtariRamPreprocessor
    )
    tup = gym.spaces.Tuple((gym.spaces.Discrete(2),))
    assert pp.get_preprocessor(tup) is pp.TupleFlatteningPreprocessor
    dct = gym.spaces.Dict({"a": gym.spaces.Discrete(2)})
    prep = pp.get_preprocessor(dct)(dct, {})
    assert isinstance(prep, pp.DictFlatteningPreprocessor) and prep.size == 2
    out = np.zeros(4, np.float32)
    prep.write({"a": 1}, out, 1)
    assert out.tolist() == [0, 0, 1, 0]
    ram = pp.AtariRamPreprocessor(gym.spaces.Box(0, 255, (128,), np.uint8))
    assert ram.transform(np.full(128, 128, np.uint8)).max() == 0.0
    with pytest.raises(ValueError, match="outside given space"):
        pp.NoPreprocessor(gym.spaces.Box(0, 1, (2,))).check_shape(np.array([5.0, 5.0]))
