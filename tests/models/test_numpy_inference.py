"""The sampler's small batches in numpy (`NumpyLayers`): the same outputs as the torch
path to float32 rounding, on the parameters as they are now (stepped, replaced, moved,
copied), and torch wherever numpy does not apply."""

import copy

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch import nn

from corral.agents.dqn.dqn_torch_model import DQNTorchModel
from corral.models.torch.fcnet import FullyConnectedNetwork
from corral.models.torch.numpy_inference import MAX_LAYER_WORK, NumpyLayers

OBS = gym.spaces.Box(-1.0, 1.0, (4,), np.float32)
ACT = gym.spaces.Discrete(3)


def fcnet(**model) -> FullyConnectedNetwork:
    torch.manual_seed(0)
    return FullyConnectedNetwork(OBS, ACT, 3, {"fcnet_hiddens": [16, 16], **model}, "m")


def rows(n: int, seed: int = 0) -> torch.Tensor:
    return torch.from_numpy(np.random.default_rng(seed).uniform(-1, 1, (n, 4)).astype(np.float32))


def both_paths(model, obs: torch.Tensor) -> tuple[tuple, tuple]:
    """(numpy path's outputs, torch path's outputs): with gradients enabled the fast path
    runs in torch."""
    with torch.inference_mode():
        assert model._numpy.accepts(obs)
        fast = model.forward_inference(obs)
    with torch.enable_grad():
        assert not model._numpy.accepts(obs)
        slow = tuple(t.detach() for t in model.forward_inference(obs))
    return fast, slow


def assert_close(fast: tuple, slow: tuple) -> None:
    for a, b in zip(fast, slow, strict=True):
        assert a.dtype == b.dtype == torch.float32 and a.shape == b.shape
        np.testing.assert_allclose(a.numpy(), b.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "model",
    [
        {},
        {"vf_share_layers": False},
        {"fcnet_activation": "relu", "vf_share_layers": False},
        {"fcnet_activation": "linear"},
        {"fcnet_hiddens": []},
        {"no_final_linear": True},
        {"post_fcnet_hiddens": [8]},
    ],
)
def test_fcnet_small_batches_match_the_torch_path(model):
    m = fcnet(**model)
    for n in (1, 8):
        assert_close(*both_paths(m, rows(n)))
    with torch.inference_mode():
        values = m.value_only(rows(8))
    with torch.enable_grad():
        expected = m.value_only(rows(8)).detach()
    np.testing.assert_allclose(values.numpy(), expected.numpy(), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("dueling", [False, True])
def test_dqn_model_matches_the_torch_path(dueling):
    torch.manual_seed(0)
    m = DQNTorchModel(OBS, ACT, 3, {"fcnet_hiddens": [32]}, "q", q_hiddens=[16], dueling=dueling)
    assert_close(*both_paths(m, rows(4)))


def test_the_numpy_path_reads_the_weights_as_they_are_now():
    m = fcnet(vf_share_layers=False)
    obs = rows(8)
    before = both_paths(m, obs)[0][0].clone()
    # An optimiser's in-place step: the views see it.
    optimizer = torch.optim.Adam(m.parameters(), lr=0.1)
    logits, values = m.forward_inference(obs)
    (logits.sum() + values.sum()).backward()
    optimizer.step()
    fast, slow = both_paths(m, obs)
    assert_close(fast, slow)
    assert not torch.allclose(fast[0], before)
    # New tensors (load_state_dict(assign=True)) and a parameter replaced outright.
    m.load_state_dict({k: v * 2 for k, v in m.state_dict().items()}, assign=True)
    assert_close(*both_paths(m, obs))
    m._logits.weight = nn.Parameter(torch.ones_like(m._logits.weight))
    assert_close(*both_paths(m, obs))


def test_a_copy_views_its_own_weights():
    m = fcnet()
    obs = rows(2)
    both_paths(m, obs)  # the original has views
    target = copy.deepcopy(m)
    with torch.no_grad():
        for p in m.parameters():
            p.add_(1.0)
    fast, slow = both_paths(target, obs)
    assert_close(fast, slow)
    assert not torch.allclose(fast[0], both_paths(m, obs)[0][0])


def test_torch_runs_what_numpy_does_not():
    obs = rows(2)
    with torch.inference_mode():
        assert not fcnet(fcnet_activation="swish")._numpy.accepts(obs)  # an unknown activation
        torch.manual_seed(0)
        box = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        log_std = FullyConnectedNetwork(
            OBS, box, 4, {"fcnet_hiddens": [8], "free_log_std": True}, "m"
        )
        assert log_std._numpy is None  # the learned log-std is torch's
        wide = fcnet(fcnet_hiddens=[256, 256])
        assert wide._numpy.accepts(rows(MAX_LAYER_WORK // (256 * 256)))
        assert not wide._numpy.accepts(rows(MAX_LAYER_WORK // (256 * 256) + 1))  # BLAS threads
        m = fcnet()
        m.double()
        assert not m._numpy.accepts(obs)  # float64 weights
    torch.manual_seed(0)
    noisy = DQNTorchModel(OBS, ACT, 3, {"fcnet_hiddens": [8]}, "q", q_hiddens=[8], use_noisy=True)
    c51 = DQNTorchModel(OBS, ACT, 3, {"fcnet_hiddens": [8]}, "q", q_hiddens=[8], num_atoms=5)
    with torch.inference_mode():
        assert not noisy._numpy.accepts(obs)
    assert c51._numpy is None


def test_a_parametrization_added_later_hands_back_to_torch():
    m = fcnet()
    obs = rows(2)
    both_paths(m, obs)
    torch.nn.utils.parametrizations.weight_norm(m._logits)
    with torch.inference_mode():
        assert not m._numpy.accepts(obs)


def test_the_input_is_never_written():
    torch.manual_seed(0)
    layers = NumpyLayers(chain=[nn.Tanh(), nn.Linear(4, 4), nn.ReLU()])
    x = np.linspace(-2, 2, 8, dtype=np.float32).reshape(2, 4)
    before = x.copy()
    with torch.inference_mode():
        assert layers.accepts(torch.from_numpy(x))
    out = layers("chain", x)
    np.testing.assert_array_equal(x, before)
    linear = layers._modules["chain"][1]
    with torch.no_grad():
        expected = torch.relu(linear(torch.tanh(torch.from_numpy(before))))
    np.testing.assert_allclose(out, expected.numpy(), rtol=1e-5, atol=1e-6)
