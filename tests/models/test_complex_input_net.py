"""ComplexInputNetwork: Dict/Tuple observations with image parts (RLlib 1.13's default
model for them)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import torch

from corral.agents.ppo import PPOTrainer
from corral.models.catalog import ModelCatalog
from corral.models.preprocessors import get_preprocessor
from corral.models.torch.complex_input_net import ComplexInputNetwork
from corral.models.torch.fcnet import FullyConnectedNetwork
from corral.models.torch.recurrent_net import LSTMWrapper
from corral.tune.registry import register_env

SPACE = gym.spaces.Dict(
    {
        "camera": gym.spaces.Box(0, 255, (42, 42, 3), np.uint8),
        "speed": gym.spaces.Box(-1.0, 1.0, (2,), np.float32),
        "gear": gym.spaces.Discrete(3),
    }
)


def _flat_space():
    return get_preprocessor(SPACE)(SPACE).observation_space


def test_the_catalog_picks_it_for_a_dict_with_an_image():
    model = ModelCatalog.get_model_v2(_flat_space(), gym.spaces.Discrete(2), 2, {})
    assert isinstance(model, ComplexInputNetwork)
    assert isinstance(model.parts[0], torch.nn.Module) and model._is_image == [True, False, False]
    vectors = gym.spaces.Dict({"a": gym.spaces.Box(-1, 1, (3,)), "b": gym.spaces.Discrete(2)})
    flat = get_preprocessor(vectors)(vectors).observation_space
    assert isinstance(
        ModelCatalog.get_model_v2(flat, gym.spaces.Discrete(2), 2, {}), FullyConnectedNetwork
    )


def test_each_part_reaches_its_own_net():
    flat_space = _flat_space()
    model = ComplexInputNetwork(
        flat_space,
        gym.spaces.Discrete(2),
        4,
        {"fcnet_hiddens": [8], "post_fcnet_hiddens": [16]},
        "m",
    )
    prep = get_preprocessor(SPACE)(SPACE)
    obs = np.stack([prep.transform(SPACE.sample()) for _ in range(5)])
    logits, _ = model({"obs": torch.as_tensor(obs)}, [], None)
    assert logits.shape == (5, 4) and model.value_function().shape == (5,)
    # Changing only the image changes the output through the conv trunk.
    other = obs.copy()
    other[:, : 42 * 42 * 3] = 0.0
    assert not torch.allclose(model({"obs": torch.as_tensor(other)}, [], None)[0], logits)
    features = ComplexInputNetwork(flat_space, gym.spaces.Discrete(2), None, {}, "f")
    assert features.num_outputs == features({"obs": torch.as_tensor(obs)}, [], None)[0].shape[1]


class CameraEnv(gym.Env):
    observation_space = SPACE
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.t = 0
        return self.observation_space.sample(), {}

    def step(self, action):
        self.t += 1
        return self.observation_space.sample(), float(action), self.t >= 10, False, {}


def test_ppo_trains_on_a_dict_observation_with_an_image():
    register_env("camera-env", lambda ctx: CameraEnv())
    for model_config in ({}, {"use_lstm": True, "lstm_cell_size": 8, "max_seq_len": 5}):
        trainer = PPOTrainer(
            env="camera-env",
            config={
                "num_workers": 0,
                "rollout_fragment_length": 40,
                "train_batch_size": 40,
                "sgd_minibatch_size": 20,
                "num_sgd_iter": 1,
                "model": model_config,
            },
        )
        try:
            result = trainer.train()
            model = trainer.get_policy().model
            inner = model.base if isinstance(model, LSTMWrapper) else model
            assert isinstance(inner, ComplexInputNetwork)
            assert result["timesteps_total"] == 40
        finally:
            trainer.stop()
