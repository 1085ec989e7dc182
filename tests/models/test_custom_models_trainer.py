"""Custom models and action distributions, registered by name, used through a Trainer."""

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from corral.agents.ppo import PPOTrainer
from corral.models import ModelCatalog
from corral.models.torch.torch_action_dist import TorchCategorical
from corral.models.torch.torch_modelv2 import TorchModelV2


class TinyModel(TorchModelV2, nn.Module):
    """RLlib 1.x style: both base initialisers, extra kwargs from custom_model_config."""

    built_with: list = []

    def __init__(self, obs_space, action_space, num_outputs, model_config, name, width=4):
        TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
        nn.Module.__init__(self)
        TinyModel.built_with.append(width)
        self.body = nn.Linear(int(np.prod(obs_space.shape)), width)
        self.pi = nn.Linear(width, num_outputs)
        self.vf = nn.Linear(width, 1)

    def forward(self, input_dict, state, seq_lens):
        self._h = torch.tanh(self.body(input_dict["obs"].float()))
        return self.pi(self._h), state

    def value_function(self):
        return self.vf(self._h).squeeze(-1)


class CountingCategorical(TorchCategorical):
    """A categorical that counts how often it is built."""

    built = 0

    def __init__(self, inputs, model=None):
        CountingCategorical.built += 1
        super().__init__(inputs, model)


def test_custom_model_and_action_dist_train_through_ppo():
    ModelCatalog.register_custom_model("tiny_model", TinyModel)
    ModelCatalog.register_custom_action_dist("counting_cat", CountingCategorical)
    TinyModel.built_with.clear()
    CountingCategorical.built = 0
    trainer = PPOTrainer(
        env="CartPole-v1",
        config={
            "num_workers": 0,
            "rollout_fragment_length": 32,
            "train_batch_size": 32,
            "sgd_minibatch_size": 16,
            "num_sgd_iter": 1,
            "model": {
                "custom_model": "tiny_model",
                "custom_model_config": {"width": 7},
                "custom_action_dist": "counting_cat",
            },
        },
    )
    try:
        result = trainer.train()
        model = trainer.get_policy().model
        assert isinstance(model, TinyModel) and model.body.out_features == 7
        assert TinyModel.built_with == [7]
        assert CountingCategorical.built > 0
        assert trainer.get_policy().dist_class is CountingCategorical
        assert result["timesteps_total"] == 32
        assert trainer.compute_single_action(np.zeros(4, np.float32)) in (0, 1)
    finally:
        trainer.stop()


def test_lstm_and_conv_configs_reach_the_catalog():
    image = gym.spaces.Box(0, 255, (42, 42, 3), np.uint8)
    model = ModelCatalog.get_model_v2(
        image, gym.spaces.Discrete(2), 2, {"conv_filters": [[4, 4, 2], [8, 21, 1]]}
    )
    assert model({"obs": torch.zeros(1, 42, 42, 3)}, [], None)[0].shape == (1, 2)
