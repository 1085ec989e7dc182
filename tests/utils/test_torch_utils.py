"""RLlib 1.13's `utils.torch_utils` and `utils.numpy` on known inputs."""

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.models.repeated_values import RepeatedValues
from corral.utils import numpy as rnp
from corral.utils import torch_utils as tu


def test_float_limits_and_one_hot():
    assert tu.FLOAT_MIN == -3.4e38 and tu.FLOAT_MAX == 3.4e38
    out = tu.one_hot(torch.tensor([0, 2]), gym.spaces.Discrete(3))
    assert out.tolist() == [[1, 0, 0], [0, 0, 1]]
    multi = tu.one_hot(torch.tensor([[1, 0]]), gym.spaces.MultiDiscrete([2, 3]))
    assert multi.tolist() == [[0, 1, 1, 0, 0]]
    with pytest.raises(ValueError, match="Unsupported space"):
        tu.one_hot(torch.tensor([0.0]), gym.spaces.Box(0, 1, (1,)))


def test_convert_to_torch_tensor_structures():
    data = {
        "a": np.arange(3, dtype=np.float64),
        "b": (np.int64(4), [1.5]),
        "info": np.array([{}, {}], dtype=object),
        "r": RepeatedValues(np.zeros((2, 3, 1)), np.array([1, 2]), 3),
    }
    out = tu.convert_to_torch_tensor(data)
    assert out["a"].dtype == torch.float32  # float64 becomes float32
    assert out["b"][0].item() == 4 and torch.is_tensor(out["b"][1][0])  # lists nest
    assert out["info"] is data["info"]
    assert isinstance(out["r"], RepeatedValues) and torch.is_tensor(out["r"].values)
    back = tu.convert_to_non_torch_type({"x": torch.ones(2), "y": torch.tensor(3.0)})
    assert isinstance(back["x"], np.ndarray) and back["y"] == 3.0


def test_sequence_mask_matches_tf():
    mask = tu.sequence_mask(torch.tensor([1, 3, 2]), maxlen=4)
    assert mask.dtype == torch.bool
    assert mask.int().tolist() == [[1, 0, 0, 0], [1, 1, 1, 0], [1, 1, 0, 0]]
    assert tu.sequence_mask(torch.tensor([2, 1])).shape == (2, 2)
    assert tu.sequence_mask(torch.tensor([2, 1]), time_major=True).shape == (2, 2)
    assert tu.sequence_mask(torch.tensor([1]), 2, dtype=torch.float32).dtype == torch.float32


def test_losses_norms_and_variance():
    x = torch.tensor([-2.0, 0.5, 3.0])
    np.testing.assert_allclose(tu.huber_loss(x).numpy(), [1.5, 0.125, 2.5])
    np.testing.assert_allclose(rnp.huber_loss(x.numpy()), [1.5, 0.125, 2.5])
    assert tu.l2_loss(x).item() == pytest.approx(0.5 * (4 + 0.25 + 9))
    assert tu.global_norm([torch.tensor([3.0]), torch.tensor([4.0])]).item() == pytest.approx(5)
    y = torch.tensor([1.0, 2.0, 3.0, 4.0])
    assert tu.explained_variance(y, y).item() == pytest.approx(1.0)
    assert tu.explained_variance(y, -10 * y).item() == -1.0
    v = torch.tensor([[1.0, float("-inf")], [3.0, 5.0]])
    assert tu.reduce_mean_ignore_inf(v).item() == pytest.approx(3.0)
    np.testing.assert_allclose(tu.reduce_mean_ignore_inf(v, 1).numpy(), [1.0, 4.0])
    logits = torch.tensor([[0.0, 0.0]])
    labels = torch.tensor([[1.0, 0.0]])
    assert tu.softmax_cross_entropy_with_logits(logits, labels).item() == pytest.approx(np.log(2))


def test_gradient_clipping_helpers():
    layer = torch.nn.Linear(3, 1)
    opt = torch.optim.SGD(layer.parameters(), lr=0.1)
    (layer(torch.ones(4, 3)) * 100).sum().backward()

    class Policy:
        config = {"grad_clip": 1.0}

    info = tu.apply_grad_clipping(Policy(), opt, None)
    assert info["grad_gnorm"] > 1.0
    assert tu.global_norm([p.grad for p in layer.parameters()]).item() <= 1.0 + 1e-5
    Policy.config = {"grad_clip": None}
    assert tu.apply_grad_clipping(Policy(), opt, None) == {}
    (layer(torch.ones(4, 3)) * 100).sum().backward()
    tu.minimize_and_clip(opt, clip_val=0.5)
    for p in layer.parameters():
        assert p.grad.norm().item() <= 0.5 + 1e-5


def test_flatten_inputs_and_td_errors():
    inputs = {"a": torch.tensor([1, 0]), "b": torch.ones(2, 2, 2)}
    spaces = {"a": gym.spaces.Discrete(2), "b": gym.spaces.Box(0, 1, (2, 2))}
    out = tu.flatten_inputs_to_1d_tensor(inputs, spaces)
    assert out.shape == (2, 6) and out[0, :2].tolist() == [0, 1]
    np_out = rnp.flatten_inputs_to_1d_tensor({k: v.numpy() for k, v in inputs.items()}, spaces)
    np.testing.assert_allclose(np_out, out.numpy())

    class Policy:
        model = torch.nn.Linear(1, 1)
        device = "cpu"

    Policy.model.tower_stats = {"td_error": torch.tensor([1.0, 3.0])}
    stats = tu.concat_multi_gpu_td_errors(Policy)
    assert stats["mean_td_error"].item() == 2.0 and Policy.td_error.tolist() == [1.0, 3.0]


def test_flatten_inputs_one_hot_encodes_old_gym_spaces():
    old_gym = pytest.importorskip("gym")
    inputs = {"a": torch.tensor([3, 0]), "b": torch.tensor([[1, 0], [0, 2]])}
    spaces = {"a": old_gym.spaces.Discrete(4), "b": old_gym.spaces.MultiDiscrete([2, 3])}
    out = tu.flatten_inputs_to_1d_tensor(inputs, spaces)
    assert out.tolist() == [[0, 0, 0, 1, 0, 1, 1, 0, 0], [1, 0, 0, 0, 1, 0, 0, 0, 1]]
    np_out = rnp.flatten_inputs_to_1d_tensor({k: v.numpy() for k, v in inputs.items()}, spaces)
    np.testing.assert_array_equal(np_out, out.numpy())


def test_swish_and_seed():
    swish = tu.Swish()
    assert swish(torch.zeros(2)).tolist() == [0.0, 0.0]
    assert len(list(swish.parameters())) == 1
    try:
        tu.set_torch_seed(3)
        a = torch.rand(2)
        tu.set_torch_seed(3)
        assert torch.equal(a, torch.rand(2))
    finally:
        torch.use_deterministic_algorithms(False)


def test_numpy_helpers():
    np.testing.assert_allclose(rnp.one_hot(np.array([0, 2]), depth=3), [[1, 0, 0], [0, 0, 1]])
    assert rnp.one_hot(np.array([1, 0])).shape == (2, 2)
    assert rnp.softmax([0.0, 0.0]).tolist() == [0.5, 0.5]
    assert rnp.sigmoid(np.array(0.0)) == 0.5
    assert rnp.relu(np.array([-1.0, 2.0])).tolist() == [0.0, 2.0]
    layer = torch.nn.Linear(3, 2)
    x = np.ones((4, 3), np.float32)
    np.testing.assert_allclose(
        rnp.fc(x, layer.weight, layer.bias, framework="torch"),
        layer(torch.from_numpy(x)).detach().numpy(),
        rtol=1e-5,
    )
    out = rnp.convert_to_numpy({"a": torch.ones(2, dtype=torch.float64), "b": torch.tensor(1)})
    assert out["a"].dtype == np.float32 and out["b"] == 1
    joined = rnp.concat_aligned([np.ones((2, 3), np.float32), np.zeros((1, 3), np.float32)])
    assert joined.shape == (3, 3) and joined.ctypes.data % 64 == 0
    outputs, (c, h) = rnp.lstm(np.ones((1, 2, 3)), np.zeros((3 + 4, 16)), np.zeros(16))
    assert outputs.shape == (1, 2, 4) and c.shape == h.shape == (1, 4)
    frozen = rnp.make_action_immutable(np.ones(2))
    with pytest.raises(ValueError):
        frozen[0] = 2


def test_loss_term_builds_a_graph_only_for_a_non_zero_coefficient():
    x = torch.ones(3, requires_grad=True)
    assert tu.loss_term(0.5, lambda: (x * 2).sum()).requires_grad
    weighted_away = tu.loss_term(0.0, lambda: (x * 2).sum())
    assert not weighted_away.requires_grad and float(weighted_away) == 6.0
    with torch.no_grad():  # the caller's no_grad stays
        assert not tu.loss_term(0.5, lambda: (x * 2).sum()).requires_grad
    assert torch.is_grad_enabled()


def test_make_adam_is_fused_unless_the_options_pick_an_implementation():
    params = [torch.nn.Parameter(torch.zeros(3))]
    fused = tu.make_adam(params, {"eps": 1e-5}, lr=0.1)
    assert fused.defaults["fused"] is True and fused.defaults["foreach"] is None
    assert fused.defaults["eps"] == 1e-5 and fused.defaults["lr"] == 0.1
    for options in ({"foreach": True}, {"fused": False}):
        opt = tu.make_adam(params, options, lr=0.1)
        assert not opt.defaults["fused"], options
    with pytest.raises(TypeError, match="lr"):  # as `torch.optim.Adam(..., lr=, **{"lr": })`
        tu.make_adam(params, {"lr": 0.5}, lr=0.1)


def test_built_in_policies_make_fused_adams():
    from corral.agents.dqn import DQNTrainer
    from corral.agents.impala import ImpalaTrainer
    from corral.agents.ppo import PPOTrainer

    config = {"env": "CartPole-v1", "num_workers": 0}
    for cls, extra in (
        (PPOTrainer, {}),
        (DQNTrainer, {}),
        (ImpalaTrainer, {"opt_type": "adam"}),
    ):
        trainer = cls(config={**config, **extra})
        try:
            learner = trainer.learner_group.local_learner
            for opt in learner.optimizers.values():
                assert isinstance(opt, torch.optim.Adam), (cls, opt)
                assert all(g["fused"] for g in opt.param_groups), cls
        finally:
            trainer.stop()
