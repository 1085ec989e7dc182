"""VisionNetwork's default conv filters are RLlib 1.13's for every image size it had
defaults for (`get_filter_config`): VizDoom's 240x320 and 480x640, 96x96, 84x84, 42x42
and 10x10 images build without `conv_filters`."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.models.torch.visionnet import VisionNetwork, default_conv_filters
from corral.models.utils import get_filter_config


@pytest.mark.parametrize("shape", [(240, 320, 3), (96, 96, 3), (10, 10, 1)])
def test_rllib_default_sizes_build_and_run(shape):
    assert default_conv_filters(shape) == get_filter_config(shape)
    obs_space = gym.spaces.Box(0, 255, shape, np.uint8)
    model = VisionNetwork(obs_space, gym.spaces.Discrete(4), 4, {}, "vision")
    out, _ = model({"obs": torch.zeros(2, *shape)}, [], None)
    assert out.shape == (2, 4)
    assert model.value_function().shape == (2,)


def test_other_sizes_still_need_conv_filters():
    with pytest.raises(ValueError, match="conv_filters"):
        default_conv_filters((50, 70, 3))


def test_empty_conv_filters_pick_the_default_stack_as_in_rllib_1_13():
    # RLlib 1.13's VizDoom example sets `conv_filters: []`; its torch vision net read an
    # empty list as "the default for this image size", and so does the trainer here.
    from corral.agents.ppo import PPOTrainer
    from corral.tune.registry import register_env

    class Images(gym.Env):
        observation_space = gym.spaces.Box(0, 255, (42, 42, 3), np.uint8)
        action_space = gym.spaces.Discrete(2)

        def reset(self, *, seed=None, options=None):
            return self.observation_space.sample(), {}

        def step(self, action):
            return self.observation_space.sample(), 0.0, True, False, {}

    register_env("images_42", lambda _: Images())
    trainer = PPOTrainer(
        config={
            "model": {"conv_filters": []},
            "num_workers": 0,
            "train_batch_size": 8,
            "sgd_minibatch_size": 8,
        },
        env="images_42",
    )
    try:
        convs = [m for m in trainer.get_policy().model.modules() if isinstance(m, torch.nn.Conv2d)]
        assert [c.out_channels for c in convs][:3] == [f[0] for f in get_filter_config((42, 42))]
    finally:
        trainer.stop()
