"""The default MLP: shapes, config keys, initialisation and the sampler's fast paths."""

import gymnasium as gym
import pytest
import torch

from corral.models.torch.fcnet import FullyConnectedNetwork

OBS = gym.spaces.Box(-1.0, 1.0, shape=(4,))
DISCRETE = gym.spaces.Discrete(3)
BOX = gym.spaces.Box(-1.0, 1.0, shape=(2,))


def make(num_outputs=3, obs_space=OBS, action_space=DISCRETE, **config):
    cfg = {"fcnet_hiddens": [32, 16], "fcnet_activation": "tanh", "vf_share_layers": True}
    cfg.update(config)
    return FullyConnectedNetwork(obs_space, action_space, num_outputs, cfg, "test")


def n_params(model):
    return sum(p.numel() for p in model.parameters())


@pytest.mark.parametrize("share", [True, False])
@pytest.mark.parametrize(("action_space", "num_outputs"), [(DISCRETE, 3), (BOX, 4)])
def test_output_and_value_shapes(share, action_space, num_outputs):
    model = make(num_outputs, action_space=action_space, vf_share_layers=share)
    obs = torch.randn(5, 4)
    out, state = model({"obs": obs}, [], None)
    assert out.shape == (5, num_outputs) and state == []
    assert model.value_function().shape == (5,)
    assert model.num_outputs == num_outputs


def test_separate_value_branch_has_its_own_trunk():
    shared, separate = make(vf_share_layers=True), make(vf_share_layers=False)
    trunk = (4 * 32 + 32) + (32 * 16 + 16)
    assert n_params(shared) == trunk + (16 * 3 + 3) + (16 + 1)
    assert n_params(separate) == n_params(shared) + trunk


@pytest.mark.parametrize("share", [True, False])
def test_fast_paths_match_forward(share):
    model = make(vf_share_layers=share)
    obs = torch.randn(8, 4)
    out, _ = model({"obs": obs}, [], None)
    value = model.value_function()
    fast_out, fast_value = model.forward_inference(obs)
    torch.testing.assert_close(fast_out, out)
    torch.testing.assert_close(fast_value, value)
    torch.testing.assert_close(model.value_only(obs), value)


def test_separate_value_branch_does_not_depend_on_policy_trunk():
    model = make(vf_share_layers=False)
    obs = torch.randn(8, 4)
    before = model.value_only(obs)
    with torch.no_grad():
        for p in model._hidden_layers.parameters():
            p.add_(1.0)
    torch.testing.assert_close(model.value_only(obs), before)


def test_free_log_std_appends_state_independent_parameters():
    model = make(4, action_space=BOX, free_log_std=True)
    with torch.no_grad():
        model.log_std.copy_(torch.tensor([0.5, -0.5]))
    out, _ = model({"obs": torch.randn(6, 4)}, [], None)
    assert out.shape == (6, 4)
    assert torch.equal(out[:, 2:], torch.tensor([[0.5, -0.5]]).expand(6, 2))
    out.sum().backward()
    assert model.log_std.grad is not None
    assert model._logits.out_features == 2


def test_free_log_std_needs_even_outputs():
    with pytest.raises(ValueError, match="even"):
        make(3, free_log_std=True)


def test_orthogonal_init_and_zero_biases():
    model = make(vf_share_layers=False)
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert all(torch.count_nonzero(m.bias) == 0 for m in linears)

    def gram(layer):
        w = layer.weight
        return w @ w.T if w.shape[0] <= w.shape[1] else w.T @ w

    first = model._hidden_layers[0]
    torch.testing.assert_close(gram(first), 2.0 * torch.eye(4), atol=1e-5, rtol=0)
    torch.testing.assert_close(gram(model._logits), 1e-4 * torch.eye(3), atol=1e-7, rtol=0)
    torch.testing.assert_close(gram(model._value_branch), torch.eye(1), atol=1e-5, rtol=0)


@pytest.mark.parametrize("name", ["tanh", "relu", "swish", "silu", "elu", "linear", None])
def test_activations(name):
    model = make(fcnet_activation=name)
    assert model.forward_inference(torch.randn(2, 4))[0].shape == (2, 3)
    n_modules = len(model._hidden_layers)
    assert n_modules == (2 if name in ("linear", None) else 4)


def test_unknown_activation_names_valid_ones():
    with pytest.raises(ValueError, match="'sigmoidish'.*tanh"):
        make(fcnet_activation="sigmoidish")


def test_post_fcnet_hiddens_are_appended():
    model = make(post_fcnet_hiddens=[8])
    assert model._logits.in_features == 8


def test_no_final_linear_uses_last_hidden_as_output():
    model = make(5, fcnet_hiddens=[32, 7], no_final_linear=True)
    out, _ = model({"obs": torch.randn(3, 4)}, [], None)
    assert out.shape == (3, 5)
    assert model._hidden_layers[-2].out_features == 5


def test_no_outputs_returns_features():
    model = make(None)
    assert model.num_outputs == 16
    out, _ = model({"obs": torch.randn(3, 4)}, [], None)
    assert out.shape == (3, 16)


def test_multi_dim_observations_are_flattened():
    image = gym.spaces.Box(0, 255, shape=(3, 5, 2))
    model = make(obs_space=image)
    out, _ = model({"obs": torch.rand(4, 3, 5, 2)}, [], None)
    assert out.shape == (4, 3)
    assert model.value_only(torch.rand(4, 30)).shape == (4,)


def test_value_function_before_forward_raises():
    with pytest.raises(RuntimeError, match="before forward"):
        make().value_function()
