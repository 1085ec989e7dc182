"""MB-MPO's dynamics ensemble: it learns the dynamics (held-out error falls), its members
differ, its normalisation statistics are the data's, it predicts with model
``(worker_index - 1) % ensemble_size`` clipped to the observation space, and its state
round-trips exactly."""

from __future__ import annotations

import re

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.agents.mbmpo.model_ensemble import (
    DynamicsEnsembleCustomModel,
    TDModel,
    WeightNormLinear,
    denormalize,
    mean_std_stats,
    normalize,
    process_samples,
)
from corral.execution.common import STEPS_SAMPLED_COUNTER
from corral.policy.sample_batch import SampleBatch
from corral.utils.checkpoints import read_array_state, write_array_state
from corral.utils.error import UnsupportedSpaceException

OBS = gym.spaces.Box(-5.0, 5.0, (3,), np.float32)
ACT = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
CONFIG = {
    "ensemble_size": 3,
    "fcnet_hiddens": [32, 32],
    "lr": 1e-2,
    "train_epochs": 40,
    "batch_size": 100,
    "valid_split_ratio": 0.2,
    "normalize_data": True,
}
# Linear dynamics with an offset: new_obs = obs + MIX @ [obs, act] + 0.3.
MIX = np.array(
    [[0.1, 0.0, -0.2, 0.5, 0.0], [0.0, -0.1, 0.0, 0.0, 0.8], [0.2, 0.1, 0.0, -0.4, 0.3]],
    np.float32,
)


def transitions(n: int, seed: int) -> SampleBatch:
    rng = np.random.default_rng(seed)
    obs = rng.uniform(-2, 2, (n, 3)).astype(np.float32)
    act = rng.uniform(-1, 1, (n, 2)).astype(np.float32)
    new_obs = obs + np.concatenate([obs, act], 1) @ MIX.T + 0.3
    return SampleBatch(
        {SampleBatch.OBS: obs, SampleBatch.ACTIONS: act, SampleBatch.NEXT_OBS: new_obs}
    )


def make_ensemble(worker_index: int = 0, **overrides) -> DynamicsEnsembleCustomModel:
    return DynamicsEnsembleCustomModel(
        OBS, ACT, 3, {**CONFIG, **overrides}, "dynamics", worker_index=worker_index
    )


def member_errors(model: DynamicsEnsembleCustomModel, data: SampleBatch) -> list[float]:
    errors = []
    for i in range(model.num_models):
        model.sample_index = i
        predicted = model.predict_model_batches(data["obs"], data["actions"])
        errors.append(float(np.mean((predicted - data["new_obs"]) ** 2)))
    return errors


def test_fit_learns_the_dynamics_and_members_differ():
    torch.manual_seed(0)
    np.random.seed(0)
    model = make_ensemble()
    held_out = transitions(500, seed=1)
    before = member_errors(model, held_out)
    stats = model.fit(transitions(1000, seed=0))
    after = member_errors(model, held_out)
    # Every member predicts fresh transitions far better than before fitting.
    assert all(a < 0.05 * b for a, b in zip(after, before)), (before, after)
    assert stats[STEPS_SAMPLED_COUNTER] == 1000
    assert 1 <= stats["epochs"] <= CONFIG["train_epochs"]
    assert len(stats["valid_loss"]) == len(stats["train_loss"]) == 3
    # The members are different nets (own initialisation, own data split and order).
    predictions = []
    for i in range(3):
        model.sample_index = i
        predictions.append(model.predict_model_batches(held_out["obs"], held_out["actions"]))
    assert not np.allclose(predictions[0], predictions[1])
    assert not np.allclose(predictions[1], predictions[2])
    weights = [dict(m.named_parameters()) for m in model.dynamics_ensemble]
    assert any(not torch.equal(weights[0][k], weights[1][k]) for k in weights[0])


def test_validation_loss_falls_over_fits():
    torch.manual_seed(1)
    np.random.seed(1)
    model = make_ensemble(train_epochs=2)
    first = model.fit(transitions(200, seed=2))["valid_loss"]
    for seed in range(3, 7):
        last = model.fit(transitions(200, seed=seed))["valid_loss"]
    assert np.mean(last) < 0.5 * np.mean(first), (first, last)
    # The replay buffer keeps every transition so far (under its capacity).
    assert model.replay_buffer.count == 1000
    assert model.global_itr == 5


def test_replay_buffer_keeps_the_most_recent_transitions():
    model = make_ensemble(train_epochs=1)
    model.replay_buffer_max = 300
    model.fit(transitions(200, seed=0))
    newest = transitions(200, seed=1)
    model.fit(newest)
    assert model.replay_buffer.count == 300
    np.testing.assert_array_equal(model.replay_buffer["obs"][-200:], newest["obs"])


def test_normalisation_statistics_are_the_datas():
    model = make_ensemble(train_epochs=1)
    data = transitions(400, seed=3)
    model.fit(data)
    norms = model.normalizations
    np.testing.assert_allclose(norms["obs"][0], data["obs"].mean(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(norms["obs"][1], data["obs"].std(0), rtol=1e-5)
    delta = data["new_obs"] - data["obs"]
    np.testing.assert_allclose(norms["delta"][0], delta.mean(0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(norms["delta"][1], delta.std(0), rtol=1e-5)
    np.testing.assert_allclose(norms["actions"][1], data["actions"].std(0), rtol=1e-5)
    # They are buffers: the state dict (what workers and checkpoints get) carries them.
    state = model.state_dict()
    np.testing.assert_allclose(state["obs_mean"].numpy(), norms["obs"][0])
    # set_norms sets them.
    other = make_ensemble()
    other.set_norms(norms)
    np.testing.assert_allclose(other.normalizations["delta"][1], norms["delta"][1])
    # Without normalize_data there are none, and the model learns on raw values.
    raw = make_ensemble(normalize_data=False, train_epochs=1)
    raw.fit(data)
    assert raw.normalizations == {}


def test_normalize_helpers_and_constant_columns():
    data = {
        "obs": np.array([[1.0, 5.0], [3.0, 5.0]]),
        "actions": np.array([[0.0], [0.0]]),
        "new_obs": np.array([[2.0, 5.0], [5.0, 5.0]]),
    }
    stats = mean_std_stats(data)
    np.testing.assert_allclose(stats["obs"][0], [2.0, 5.0])
    # A column that does not vary gets std 1: normalising a new value stays finite.
    np.testing.assert_allclose(stats["obs"][1], [1.0, 1.0])
    np.testing.assert_allclose(stats["actions"][1], [1.0])
    np.testing.assert_allclose(stats["delta"][0], [1.5, 0.0])
    x = np.array([[4.0, 7.0]])
    np.testing.assert_allclose(denormalize(normalize(x, stats["obs"]), stats["obs"]), x)
    batch = process_samples({**data, "rewards": np.zeros(2)})
    assert sorted(batch) == ["actions", "new_obs", "obs"]


def test_predictions_are_clipped_to_the_observation_space():
    model = make_ensemble()
    with torch.no_grad():
        for member in model.dynamics_ensemble:
            member.model[-1].weight_g.zero_()
            member.model[-1].bias.fill_(100.0)
    predicted = model.predict_model_batches(np.zeros((4, 3)), np.zeros((4, 2)))
    np.testing.assert_array_equal(predicted, np.full((4, 3), 5.0, np.float32))
    assert predicted.dtype == np.float32


@pytest.mark.parametrize(("worker_index", "member"), [(0, 0), (1, 0), (2, 1), (3, 2), (4, 0)])
def test_each_worker_steps_its_own_member(worker_index, member):
    model = make_ensemble(worker_index=worker_index)
    assert model.sample_index == member
    x = torch.randn(5, 5)
    torch.testing.assert_close(model.forward(x), model.dynamics_ensemble[member](x))


def test_discrete_actions_are_one_hot():
    model = DynamicsEnsembleCustomModel(
        OBS, gym.spaces.Discrete(3), 3, {**CONFIG, "train_epochs": 1}, "d", worker_index=1
    )
    assert model.dynamics_ensemble[0].model[0].in_features == 3 + 3
    obs = np.zeros((4, 3), np.float32)
    actions = np.array([0, 1, 2, 1])
    model.fit({"obs": obs, "actions": actions, "new_obs": obs + actions[:, None]})
    np.testing.assert_array_equal(model.replay_buffer["actions"], np.eye(3)[actions])
    assert model.predict_model_batches(obs, actions).shape == (4, 3)


@pytest.mark.parametrize(
    ("obs_space", "act_space", "named"),
    [
        (gym.spaces.Discrete(4), ACT, "Discrete(4)"),
        (gym.spaces.Box(-1, 1, (2, 3)), ACT, "Box(-1.0, 1.0, (2, 3), float32)"),
        (OBS, gym.spaces.MultiDiscrete([2, 3]), "MultiDiscrete([2 3])"),
    ],
)
def test_unsupported_spaces_are_named(obs_space, act_space, named):
    with pytest.raises(UnsupportedSpaceException, match=re.escape(named)):
        DynamicsEnsembleCustomModel(obs_space, act_space, 3, CONFIG, "d", worker_index=0)


def test_tdmodel_layers_and_weight_norm():
    net = TDModel(5, 3, hidden_layers=(8, 4), weight_normalization=True)
    layers = [m for m in net.model if isinstance(m, WeightNormLinear)]
    assert [m.out_features for m in layers] == [8, 4, 3]
    # g * v / |v|: scaling v leaves the layer as it is, g scales each output row.
    x = torch.randn(2, 5)
    before = net(x)
    with torch.no_grad():
        layers[0].weight_v.mul_(3.0)
    torch.testing.assert_close(net(x), before)
    plain = TDModel(5, 3, hidden_layers=(8,))
    assert all(type(m) is torch.nn.Linear for m in plain.model if hasattr(m, "weight"))
    assert net(torch.zeros(2, 5)).shape == (2, 3)
    with pytest.raises(ValueError, match="at least one hidden layer"):
        TDModel(5, 3, hidden_layers=())


def test_state_round_trips_through_a_checkpoint_file(tmp_path):
    torch.manual_seed(2)
    np.random.seed(2)
    model = make_ensemble(train_epochs=5)
    model.fit(transitions(300, seed=4))
    write_array_state(str(tmp_path), "ensemble", {"m": model.get_ensemble_state()})
    restored = make_ensemble(train_epochs=5)
    restored.set_ensemble_state(read_array_state(str(tmp_path), "ensemble")["m"])
    data = transitions(50, seed=5)
    assert member_errors(restored, data) == member_errors(model, data)
    np.testing.assert_array_equal(restored.replay_buffer["new_obs"], model.replay_buffer["new_obs"])
    assert restored.global_itr == 1
    assert restored.fit_metrics == model.fit_metrics
    # The optimiser continues where it stopped: one more fit is the same in both.
    np.random.seed(3)
    torch.manual_seed(3)
    a = model.fit(transitions(100, seed=6))
    np.random.seed(3)
    torch.manual_seed(3)
    b = restored.fit(transitions(100, seed=6))
    assert a == b
