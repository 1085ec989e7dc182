"""ModelCatalog: distribution and model selection, registries, and the TorchModelV2 base."""

import functools

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from corral.models import MODEL_DEFAULTS, ModelCatalog
from corral.models.torch.fcnet import FullyConnectedNetwork
from corral.models.torch.torch_action_dist import (
    TorchCategorical,
    TorchDeterministic,
    TorchDiagGaussian,
    TorchDistributionWrapper,
    TorchMultiCategorical,
)
from corral.models.torch.torch_modelv2 import TorchModelV2
from corral.utils.error import UnsupportedSpaceException

OBS = gym.spaces.Box(-1.0, 1.0, shape=(4,))


class RLlibStyleModel(TorchModelV2, nn.Module):
    """The RLlib 1.x pattern: both base __init__s called explicitly."""

    def __init__(self, obs_space, action_space, num_outputs, model_config, name, width=8):
        TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
        nn.Module.__init__(self)
        self.width = width
        self.body = nn.Linear(obs_space.shape[0], width)
        self.pi = nn.Linear(width, num_outputs)
        self.vf = nn.Linear(width, 1)

    def forward(self, input_dict, state, seq_lens):
        self._h = torch.relu(self.body(input_dict["obs"]))
        return self.pi(self._h), state

    def value_function(self):
        return self.vf(self._h).squeeze(-1)


class SuperStyleModel(TorchModelV2):
    def __init__(self, obs_space, action_space, num_outputs, model_config, name):
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        self.pi = nn.Linear(obs_space.shape[0], num_outputs)

    def forward(self, input_dict, state, seq_lens):
        return self.pi(input_dict["obs"]), state


@pytest.mark.parametrize(
    ("space", "dist_cls", "num_outputs"),
    [
        (gym.spaces.Discrete(5), TorchCategorical, 5),
        (gym.spaces.Box(-1.0, 1.0, shape=(3,)), TorchDiagGaussian, 6),
    ],
)
def test_get_action_dist_defaults(space, dist_cls, num_outputs):
    assert ModelCatalog.get_action_dist(space, MODEL_DEFAULTS) == (dist_cls, num_outputs)
    assert ModelCatalog.get_action_dist(space, None)[0] is dist_cls


def test_get_action_dist_multi_discrete():
    space = gym.spaces.MultiDiscrete([3, 4])
    dist_cls, num_outputs = ModelCatalog.get_action_dist(space, {})
    assert num_outputs == 7
    assert isinstance(dist_cls, functools.partial) and dist_cls.func is TorchMultiCategorical
    assert dist_cls(torch.randn(2, 7), None).sample().shape == (2, 2)


def test_get_action_dist_deterministic_and_class():
    box = gym.spaces.Box(-1.0, 1.0, shape=(2,))
    assert ModelCatalog.get_action_dist(box, {}, "deterministic") == (TorchDeterministic, 2)
    assert ModelCatalog.get_action_dist(box, {}, TorchDiagGaussian) == (TorchDiagGaussian, 4)
    with pytest.raises(ValueError, match="squashed"):
        ModelCatalog.get_action_dist(box, {}, "squashed")


@pytest.mark.parametrize(
    "space",
    [
        gym.spaces.Sequence(gym.spaces.Discrete(3)),
        gym.spaces.Box(-1.0, 1.0, shape=(2, 3)),
    ],
)
def test_unsupported_action_space_is_named(space):
    with pytest.raises(UnsupportedSpaceException) as info:
        ModelCatalog.get_action_dist(space, {})
    assert str(space) in str(info.value)


def test_unsupported_observation_space_is_named():
    space = gym.spaces.Sequence(gym.spaces.Discrete(3))
    with pytest.raises(UnsupportedSpaceException) as info:
        ModelCatalog.get_model_v2(space, gym.spaces.Discrete(2), 2, {})
    assert str(space) in str(info.value)


def test_other_frameworks_are_rejected():
    with pytest.raises(ValueError, match="torch"):
        ModelCatalog.get_action_dist(gym.spaces.Discrete(2), {}, framework="tf")
    with pytest.raises(ValueError, match="'tf2'"):
        ModelCatalog.get_model_v2(OBS, gym.spaces.Discrete(2), 2, {}, framework="tf2")


def test_custom_action_dist_by_name():
    class Doubled(TorchCategorical):
        @staticmethod
        def required_model_output_shape(action_space, model_config):
            return 2 * action_space.n

    ModelCatalog.register_custom_action_dist("doubled_cat", Doubled)
    config = {"custom_action_dist": "doubled_cat"}
    assert ModelCatalog.get_action_dist(gym.spaces.Discrete(3), config) == (Doubled, 6)
    with pytest.raises(ValueError, match="doubled_ca'.*doubled_cat"):
        ModelCatalog.get_action_dist(gym.spaces.Discrete(3), {"custom_action_dist": "doubled_ca"})


def test_default_model_merges_partial_config():
    model = ModelCatalog.get_model_v2(OBS, gym.spaces.Discrete(2), 2, {"fcnet_hiddens": [8]})
    assert isinstance(model, FullyConnectedNetwork)
    assert model.model_config["fcnet_activation"] == MODEL_DEFAULTS["fcnet_activation"]
    assert model._hidden_layers[0].out_features == 8
    assert model.forward_inference(torch.randn(3, 4))[0].shape == (3, 2)


@pytest.mark.parametrize(
    ("space", "obs_dim"),
    [
        (gym.spaces.Discrete(5), 5),
        (gym.spaces.Box(0, 1, shape=(2, 3)), 6),
        (gym.spaces.Dict({"a": gym.spaces.Discrete(2), "b": gym.spaces.Box(0, 1, (3,))}), 5),
    ],
)
def test_default_model_flattens_observation_spaces(space, obs_dim):
    model = ModelCatalog.get_model_v2(space, gym.spaces.Discrete(2), 2, {"fcnet_hiddens": [8]})
    assert model._hidden_layers[0].in_features == obs_dim


@pytest.mark.parametrize("model_cls", [RLlibStyleModel, SuperStyleModel])
def test_custom_model_by_name_both_init_patterns(model_cls):
    ModelCatalog.register_custom_model(f"m_{model_cls.__name__}", model_cls)
    config = {"custom_model": f"m_{model_cls.__name__}"}
    model = ModelCatalog.get_model_v2(OBS, gym.spaces.Discrete(3), 3, config, name="pol")
    assert isinstance(model, model_cls) and model.name == "pol"
    assert model.num_outputs == 3 and model.obs_space == OBS
    assert len(list(model.parameters())) >= 2
    out, state = model({"obs": torch.randn(2, 4)}, [], None)
    assert out.shape == (2, 3) and state == []
    assert set(model.trainable_variables(as_dict=True)) == set(dict(model.named_parameters()))


def test_custom_model_class_gets_custom_model_config():
    config = {"custom_model": RLlibStyleModel, "custom_model_config": {"width": 5}}
    model = ModelCatalog.get_model_v2(OBS, gym.spaces.Discrete(3), 3, config)
    assert model.width == 5 and model.body.out_features == 5
    model({"obs": torch.randn(2, 4)}, [], None)
    assert model.value_function().shape == (2,)


def test_custom_model_without_kwargs_is_retried_without_them(caplog):
    # RLlib 1.13: a model that takes no custom kwargs reads model_config["custom_model_config"].
    config = {"custom_model": SuperStyleModel, "custom_model_config": {"width": 5}}
    model = ModelCatalog.get_model_v2(OBS, gym.spaces.Discrete(3), 3, config)
    assert isinstance(model, SuperStyleModel)
    assert "should accept its custom_model_config entries as **kwargs" in caplog.text


def test_custom_model_config_bad_kwarg_is_explained():
    class NeedsWidth(TorchModelV2):
        def __init__(self, obs_space, action_space, num_outputs, model_config, name, *, depth):
            super().__init__(obs_space, action_space, num_outputs, model_config, name)

    config = {"custom_model": NeedsWidth, "custom_model_config": {"width": 5}}
    with pytest.raises(TypeError, match="custom_model_config"):
        ModelCatalog.get_model_v2(OBS, gym.spaces.Discrete(3), 3, config)


def test_unknown_custom_model_name():
    with pytest.raises(ValueError, match="no_such_model"):
        ModelCatalog.get_model_v2(OBS, gym.spaces.Discrete(3), 3, {"custom_model": "no_such_model"})


def test_register_custom_model_rejects_non_models():
    with pytest.raises(TypeError, match="TorchModelV2"):
        ModelCatalog.register_custom_model("bad", nn.Linear)


def test_model_interface_is_mixed_in_with_kwargs():
    class QHead(TorchModelV2):
        def __init__(self, obs_space, action_space, num_outputs, model_config, name, *, q_hid):
            super().__init__(obs_space, action_space, num_outputs, model_config, name)
            self.q = nn.Linear(num_outputs, q_hid)

    model = ModelCatalog.get_model_v2(
        OBS, gym.spaces.Discrete(2), 6, {"fcnet_hiddens": [8]}, model_interface=QHead, q_hid=2
    )
    assert isinstance(model, QHead) and isinstance(model, FullyConnectedNetwork)
    features, _ = model({"obs": torch.randn(3, 4)}, [], None)
    assert model.q(features).shape == (3, 2)


def test_action_shape():
    assert ModelCatalog.get_action_shape(gym.spaces.Discrete(2)) == (np.int64, (None,))
    box = gym.spaces.Box(-1.0, 1.0, (3,))
    assert ModelCatalog.get_action_shape(box) == (np.float32, (None, 3))


def test_torch_modelv2_defaults():
    model = SuperStyleModel(OBS, gym.spaces.Discrete(2), 2, {}, "m")
    assert model.get_initial_state() == []
    assert model.is_time_major() is False
    loss = torch.tensor(1.0)
    assert model.custom_loss(loss, {}) is loss
    assert model.metrics() == {}
    assert len(model.variables()) == 2
    with pytest.raises(NotImplementedError, match="value_function"):
        model.value_function()
    with pytest.raises(NotImplementedError, match="load_state_dict"):
        model.import_from_h5("weights.h5")
    assert issubclass(TorchCategorical, TorchDistributionWrapper)


def test_get_preprocessor_for_space_and_for_an_env():
    import gymnasium

    space = gymnasium.spaces.Dict(
        {"a": gymnasium.spaces.Box(-1, 1, (3,)), "b": gymnasium.spaces.Discrete(4)}
    )
    prep = ModelCatalog.get_preprocessor_for_space(space)
    assert prep.shape == (7,)  # the Box flat, the Discrete one-hot
    assert ModelCatalog.get_preprocessor(gymnasium.make("CartPole-v1")).shape == (4,)
    # (Registered custom preprocessors: tests/models/test_custom_preprocessor.py.)
    with pytest.raises(ValueError, match="No custom preprocessor registered under 'mine'"):
        ModelCatalog.get_preprocessor_for_space(space, {"custom_preprocessor": "mine"})


def test_use_lstm_wraps_a_custom_model_as_rllib_1_13():
    # RLlib 1.13's lstm_auto_wrapping example: the custom model (built with
    # num_outputs=None, picking its own output size) feeds the LSTM wrapper.
    from corral.agents.ppo import PPOTrainer
    from corral.models.torch.recurrent_net import LSTMWrapper

    class Doubler(TorchModelV2, nn.Module):
        def __init__(self, obs_space, action_space, num_outputs, model_config, name):
            TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
            nn.Module.__init__(self)
            assert num_outputs is None
            self.num_outputs = int(np.prod(obs_space.shape))

        def forward(self, input_dict, state, seq_lens):
            return input_dict["obs_flat"] * 2.0, []

    space = gym.spaces.Box(-1.0, 1.0, (4,))
    config = {"custom_model": Doubler, "use_lstm": True, "lstm_cell_size": 8}
    model = ModelCatalog.get_model_v2(space, gym.spaces.Discrete(2), 2, config)
    assert isinstance(model, LSTMWrapper) and model.num_outputs == 2
    trainer = PPOTrainer(
        env="CartPole-v1",
        config={
            "num_workers": 0,
            "train_batch_size": 64,
            "sgd_minibatch_size": 32,
            "num_sgd_iter": 1,
            "model": {**config, "max_seq_len": 8},
        },
    )
    try:
        assert trainer.train()["timesteps_total"] >= 64
        assert isinstance(trainer.get_policy().model, LSTMWrapper)
        assert torch.is_tensor(trainer.get_policy().model.value_function())
    finally:
        trainer.stop()
