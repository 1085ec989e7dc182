"""The conv net: default filter stacks, custom stacks, heads, fast path, catalog choice."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.models import MODEL_DEFAULTS, ModelCatalog
from corral.models.torch.visionnet import VisionNetwork


def make(shape, num_outputs=6, **overrides):
    space = gym.spaces.Box(0, 255, shape, np.uint8)
    return VisionNetwork(
        space, gym.spaces.Discrete(6), num_outputs, {**MODEL_DEFAULTS, **overrides}, "v"
    )


@pytest.mark.parametrize("shape", [(84, 84, 4), (42, 42, 3), (84, 84, 1)])
def test_default_stacks_end_in_one_by_one(shape):
    model = make(shape)
    obs = torch.randint(0, 255, (5, *shape), dtype=torch.uint8)
    out, state = model({"obs": obs}, [], None)
    assert out.shape == (5, 6) and state == []
    assert model.value_function().shape == (5,)
    # The last conv layer has 256 channels on a 1 x 1 map: 256 features into the logits.
    assert model._logits.in_features == 256


def test_forward_inference_matches_forward():
    model = make((42, 42, 3), vf_share_layers=False)
    obs = torch.rand(4, 42, 42, 3) * 255
    out, _ = model({"obs": obs}, [], None)
    fast_out, fast_values = model.forward_inference(obs)
    torch.testing.assert_close(fast_out, out)
    torch.testing.assert_close(fast_values, model.value_function())
    torch.testing.assert_close(model.value_only(obs), fast_values)
    assert model._value_trunk is not None


def test_custom_filters_activation_and_post_fcnet_hiddens():
    model = make(
        (10, 10, 2),
        conv_filters=[[4, 3, 2], [8, [3, 3], 1]],
        conv_activation="tanh",
        post_fcnet_hiddens=[16],
    )
    out, _ = model({"obs": torch.rand(3, 10, 10, 2)}, [], None)
    assert out.shape == (3, 6)
    # same padding 10 -> 5, then valid 3x3: 3 x 3 x 8 = 72 features into the 16-unit layer.
    dense = [m for m in model._trunk if isinstance(m, torch.nn.Linear)]
    assert dense[0].in_features == 72 and dense[0].out_features == 16
    assert any(isinstance(m, torch.nn.Tanh) for m in model._trunk)


def _same_reference(model, images, filters):
    """The trunk's convolutions as RLlib's "same" stacks define them: zero-pad
    (extra on the right/bottom), then a padding-free convolution; the last is "valid"."""
    convs = [m for m in model._trunk if isinstance(m, torch.nn.Conv2d)]
    x = images.permute(0, 3, 1, 2).float()
    for i, (conv, (_, kernel, stride)) in enumerate(zip(convs, filters)):
        if i < len(convs) - 1:
            pads = []
            for n, k in zip(x.shape[2:], kernel):
                total = max((-(-n // stride) - 1) * stride + k - n, 0)
                pads.append((total // 2, total - total // 2))
            (top, bottom), (left, right) = pads
            x = torch.nn.functional.pad(x, (left, right, top, bottom))
        x = torch.relu(torch.nn.functional.conv2d(x, conv.weight, conv.bias, stride))
    return x.flatten(1)


@pytest.mark.parametrize(
    "shape, filters",
    [
        # The first layer's padding is even (the convolution's own), the second's odd
        # (a ZeroPad2d), as in RLlib's default stacks.
        ((84, 84, 4), [[16, [8, 8], 4], [32, [4, 4], 2], [256, [11, 11], 1]]),
        ((42, 42, 3), [[16, [4, 4], 2], [32, [4, 4], 2], [256, [11, 11], 1]]),
        # Even but different per axis (1 row, 2 columns each side), then odd on both.
        ((11, 9, 2), [[4, [3, 5], 1], [8, [4, 4], 2], [6, [3, 3], 1]]),
    ],
)
def test_same_padding_is_tensorflows_whether_even_or_odd(shape, filters):
    model = make(shape, conv_filters=filters)
    images = torch.randint(0, 255, (3, *shape), dtype=torch.uint8)
    features = model._trunk(model._images_of(images))
    torch.testing.assert_close(features, _same_reference(model, images, filters))
    evenly = [m for m in model._trunk if isinstance(m, torch.nn.Conv2d) and m.padding != (0, 0)]
    assert len(evenly) == 1  # the first layer pads itself


def test_parameter_names_keep_the_padding_layers_places():
    # Checkpoints name the trunk's parameters by layer index: an even padding's
    # placeholder keeps the layers where they were.
    names = [name for name, _ in make((84, 84, 4)).named_parameters()]
    assert names[:6] == [
        "_trunk.1.weight",
        "_trunk.1.bias",
        "_trunk.4.weight",
        "_trunk.4.bias",
        "_trunk.6.weight",
        "_trunk.6.bias",
    ]


def test_no_num_outputs_exposes_features():
    model = make((42, 42, 3), num_outputs=None)
    assert model.num_outputs == 256


def test_unknown_image_size_without_filters_names_the_shape():
    with pytest.raises(ValueError, match=r"\(64, 48, 3\)") as err:
        make((64, 48, 3))
    assert "conv_filters" in str(err.value)


def test_filters_that_shrink_the_image_to_nothing():
    with pytest.raises(ValueError, match="shrink"):
        make((8, 8, 1), conv_filters=[[4, 3, 2], [8, 9, 1]])


def test_catalog_picks_vision_net_for_images_only():
    image = gym.spaces.Box(0, 255, (42, 42, 3), np.uint8)
    flat = gym.spaces.Box(-1, 1, (2, 3), np.float32)
    act = gym.spaces.Discrete(2)
    assert isinstance(ModelCatalog.get_model_v2(image, act, 2, {}), VisionNetwork)
    assert not isinstance(ModelCatalog.get_model_v2(flat, act, 2, {}), VisionNetwork)


class _Frames(gym.Env):
    """42x42x3 uint8 frames in [0, 255], 10-step episodes."""

    observation_space = gym.spaces.Box(0, 255, (42, 42, 3), np.uint8)
    action_space = gym.spaces.Discrete(3)

    def __init__(self, config=None):
        self.t = 0
        self.rng = np.random.default_rng(0)

    def _obs(self):
        return self.rng.integers(0, 256, (42, 42, 3), dtype=np.uint8)

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.t += 1
        return self._obs(), 1.0, self.t >= 10, False, {}


class _FloatOnlyConvNet(VisionNetwork):
    """A user's subclass that does not say it casts integer frames."""

    accepts_integer_obs = False


def _sampled(model):
    from corral.agents.ppo import PPOTrainer

    config = {
        "num_workers": 0,
        "num_envs_per_worker": 2,
        "rollout_fragment_length": 16,
        "train_batch_size": 32,
        "sgd_minibatch_size": 16,
        "num_sgd_iter": 1,
        "model": model,
        "seed": 0,
    }
    trainer = PPOTrainer(config=config, env=_Frames)
    try:
        batch = trainer.workers.local_worker().sample()
        result = trainer.train()
        return batch, result
    finally:
        trainer.stop()


def test_uint8_frames_stay_uint8_for_the_vision_net_and_train():
    """The default vision net casts frames itself, so batches keep the env's uint8
    (RLlib's layout too); the same env with a model that does not say so gets float32."""
    from corral.models.catalog import ModelCatalog

    batch, result = _sampled({"conv_filters": [[4, [4, 4], 2], [8, [21, 21], 1]]})
    assert batch["obs"].dtype == np.uint8 and batch["new_obs"].dtype == np.uint8
    assert int(batch["obs"].max()) > 200  # raw pixel values, not scaled
    assert np.isfinite(result["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"])

    ModelCatalog.register_custom_model("float_only_conv", _FloatOnlyConvNet)
    batch, _ = _sampled(
        {"custom_model": "float_only_conv", "conv_filters": [[4, [4, 4], 2], [8, [21, 21], 1]]}
    )
    assert batch["obs"].dtype == np.float32
