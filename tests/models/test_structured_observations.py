"""Custom models get Dict/Tuple observations back in their structure (RLlib's
`restore_original_dimensions`), with the flat rows under `obs_flat`."""

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from corral.agents.ppo import PPOTrainer
from corral.models import ModelCatalog
from corral.models.preprocessors import preprocessor_for_space, restore_original_dimensions
from corral.models.torch.torch_modelv2 import TorchModelV2

DICT_SPACE = gym.spaces.Dict(
    {
        "position": gym.spaces.Box(-1, 1, (2, 3), np.float32),
        "mode": gym.spaces.Discrete(4),
        "pair": gym.spaces.Tuple((gym.spaces.Discrete(2), gym.spaces.Box(0, 1, (1,)))),
    }
)
SEEN: list = []


def test_restore_inverts_flatten():
    prep = preprocessor_for_space(DICT_SPACE)
    samples = [DICT_SPACE.sample() for _ in range(5)]
    flat = torch.from_numpy(prep.transform_batch(samples))
    restored = restore_original_dimensions(flat, prep.observation_space)
    assert restored["position"].shape == (5, 2, 3)
    np.testing.assert_allclose(restored["position"][1].numpy(), samples[1]["position"], rtol=1e-6)
    assert restored["mode"].argmax(-1).tolist() == [int(s["mode"]) for s in samples]
    assert restored["pair"][0].shape == (5, 2) and restored["pair"][1].shape == (5, 1)
    box = gym.spaces.Box(-1, 1, (4,))
    assert restore_original_dimensions(flat, box) is flat


class StructuredModel(TorchModelV2, nn.Module):
    def __init__(self, obs_space, action_space, num_outputs, model_config, name):
        TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
        nn.Module.__init__(self)
        self.policy = nn.Linear(6 + 4, num_outputs)
        self.value = nn.Linear(6 + 4, 1)

    def forward(self, input_dict, state, seq_lens):
        obs = input_dict["obs"]
        SEEN.append((type(obs), tuple(obs["position"].shape[1:]), input_dict["obs_flat"].shape))
        x = torch.cat([obs["position"].flatten(1), obs["mode"]], dim=-1)
        self._x = x
        return self.policy(x), state

    def value_function(self):
        return self.value(self._x).squeeze(-1)


class DictEnv(gym.Env):
    observation_space = DICT_SPACE
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        self.t = 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return self.observation_space.sample(), {}

    def step(self, action):
        self.t += 1
        return self.observation_space.sample(), float(action), self.t >= 10, False, {}


def test_custom_model_trains_on_structured_observations():
    ModelCatalog.register_custom_model("corral_test_structured", StructuredModel)
    SEEN.clear()
    config = {
        "num_workers": 0,
        "rollout_fragment_length": 20,
        "train_batch_size": 40,
        "sgd_minibatch_size": 20,
        "num_sgd_iter": 1,
        "model": {"custom_model": "corral_test_structured"},
    }
    trainer = PPOTrainer(config=config, env=DictEnv)
    try:
        result = trainer.train()
    finally:
        trainer.stop()
    assert np.isfinite(result["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"])
    assert SEEN and all(kind is dict and shape == (2, 3) for kind, shape, _ in SEEN)
    assert SEEN[0][2][1] == 6 + 4 + 2 + 1
