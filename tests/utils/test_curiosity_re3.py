"""Curiosity (ICM) and RE3 explorations and `RE3UpdateCallbacks` (RLlib 1.13's)."""

from __future__ import annotations

import functools

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.agents.callbacks import RE3UpdateCallbacks
from corral.agents.ppo import DEFAULT_CONFIG, PPOTorchPolicy
from corral.policy.sample_batch import SampleBatch
from corral.utils.exploration import RE3, Curiosity, make_exploration
from corral.utils.exploration.random_encoder import (
    OBS_EMBEDS,
    MovingMeanStd,
    compute_states_entropy,
    update_beta,
)

N_STATES = 6
OBS_SPACE = gym.spaces.Box(0.0, 1.0, (N_STATES,), np.float32)
ACTIONS = gym.spaces.Discrete(3)
CURIOSITY = {
    "type": "Curiosity",
    "eta": 1.0,
    "lr": 0.01,
    "feature_dim": 16,
    "feature_net_config": {"fcnet_hiddens": [], "fcnet_activation": "relu"},
    "inverse_net_hiddens": [32],
    "forward_net_hiddens": [32],
    "sub_exploration": {"type": "StochasticSampling"},
}


def _policy(exploration_config: dict, **overrides) -> PPOTorchPolicy:
    config = {
        **DEFAULT_CONFIG,
        "num_workers": 0,
        "model": {"fcnet_hiddens": [16]},
        "exploration_config": exploration_config,
        **overrides,
    }
    return PPOTorchPolicy(OBS_SPACE, ACTIONS, config)


def _one_hot(states) -> np.ndarray:
    return np.eye(N_STATES, dtype=np.float32)[np.asarray(states)]


def _batch(states, next_states, actions, eps_id=None) -> SampleBatch:
    n = len(states)
    return SampleBatch(
        {
            SampleBatch.OBS: _one_hot(states),
            SampleBatch.NEXT_OBS: _one_hot(next_states),
            SampleBatch.ACTIONS: np.asarray(actions, np.int64),
            SampleBatch.REWARDS: np.ones(n, np.float32),
            SampleBatch.EPS_ID: np.zeros(n, np.int64) if eps_id is None else np.asarray(eps_id),
        }
    )


def _forward_l2(exploration: Curiosity, batch: SampleBatch) -> np.ndarray:
    obs = torch.as_tensor(np.concatenate([batch[SampleBatch.OBS], batch[SampleBatch.NEXT_OBS]]))
    with torch.no_grad():
        l2, _, _ = exploration._icm_losses(obs, torch.as_tensor(batch[SampleBatch.ACTIONS]))
    return l2.numpy()


# -- Curiosity ---------------------------------------------------------------


def test_curiosity_adds_eta_times_forward_loss_to_the_rewards():
    policy = _policy({**CURIOSITY, "eta": 0.5})
    exploration = policy.exploration
    assert isinstance(exploration, Curiosity)
    batch = _batch([0, 1, 2], [1, 2, 3], [0, 1, 2])
    expected = 1.0 + 0.5 * _forward_l2(exploration, batch)
    out = exploration.postprocess_trajectory(policy, batch)
    np.testing.assert_allclose(out[SampleBatch.REWARDS], expected, rtol=1e-5)
    assert out[SampleBatch.REWARDS].dtype == np.float32
    assert np.all(out[SampleBatch.REWARDS] > 1.0)
    assert exploration.get_info()["curiosity_intrinsic_reward_mean"] > 0


def test_icm_loss_falls_on_repeated_transitions_and_novel_ones_pay_more():
    torch.manual_seed(0)
    policy = _policy(CURIOSITY)
    exploration = policy.exploration
    seen = _batch([0, 1, 2, 0, 1, 2], [1, 2, 0, 1, 2, 0], [1, 1, 1, 1, 1, 1])
    before = _forward_l2(exploration, seen).mean()
    inverse = []
    for _ in range(200):
        exploration.postprocess_trajectory(policy, seen.copy())
        inverse.append(exploration.get_info()["curiosity_inverse_loss"])
    after = _forward_l2(exploration, seen).mean()
    assert after < 0.1 * before
    assert np.mean(inverse[-10:]) < np.mean(inverse[:10])
    # A transition never trained on earns a larger intrinsic reward.
    novel = _batch([4, 5], [5, 3], [2, 0])
    assert _forward_l2(exploration, novel).mean() > 5 * after
    # The ICM step leaves no gradients for the policy's optimizer to apply.
    assert all(p.grad is None for p in policy.model.parameters())


def test_curiosity_steps_once_per_trajectory_of_a_fragment():
    policy = _policy(CURIOSITY)
    exploration = policy.exploration
    calls = []
    step = exploration._optimizer.step
    exploration._optimizer.step = lambda *a, **k: calls.append(1) or step(*a, **k)
    batch = _batch([0, 1, 2, 3, 4], [1, 2, 3, 4, 5], [0, 0, 1, 1, 2], eps_id=[7, 7, 8, 8, 9])
    exploration.postprocess_trajectory(policy, batch)
    assert len(calls) == 3


def test_curiosity_acts_through_its_sub_exploration():
    policy = _policy(CURIOSITY)
    actions, _ = policy.compute_actions_from_obs(_one_hot([0, 1, 2, 3]), explore=True)
    assert actions.shape == (4,) and set(actions.tolist()) <= {0, 1, 2}
    assert policy.exploration.exploration_submodule.__class__.__name__ == "StochasticSampling"


def test_icm_weights_round_trip_through_a_policy_checkpoint(tmp_path):
    from corral.utils.checkpoints import read_weights_and_state

    policy = _policy(CURIOSITY)
    for _ in range(5):
        policy.exploration.postprocess_trajectory(policy, _batch([0, 1], [1, 2], [0, 1]))
    weights = policy.get_weights()
    icm = {k: v for k, v in weights.items() if k.startswith("_curiosity_")}
    assert {k.split(".")[0] for k in icm} == {
        "_curiosity_feature_net",
        "_curiosity_inverse_fcnet",
        "_curiosity_forward_fcnet",
    }
    policy.export_checkpoint(str(tmp_path), "p")
    assert (tmp_path / "p.safetensors").exists()
    restored = _policy(CURIOSITY)
    fresh = restored.get_weights()
    assert any(not np.array_equal(fresh[k], icm[k]) for k in icm)
    state = read_weights_and_state(
        str(tmp_path), weights_file="p.safetensors", state_file="p_state.json"
    )
    restored.set_state(state)
    for k, v in icm.items():
        np.testing.assert_array_equal(restored.get_weights()[k], v)
    batch = _batch([3], [4], [2])
    np.testing.assert_allclose(
        _forward_l2(restored.exploration, batch), _forward_l2(policy.exploration, batch)
    )


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"sub_exploration": None}, "sub_exploration"),
        ({"beta": 1.5}, "beta=1.5"),
        ({"eta": -1.0}, "eta=-1.0"),
        ({"lr": 0.0}, "lr=0.0"),
        ({"feature_dim": 0}, "feature_dim=0"),
        ({"forward_net_hiddens": [0]}, "layer sizes"),
    ],
)
def test_curiosity_config_errors_name_the_bad_value(change, match):
    with pytest.raises(ValueError, match=match):
        _policy({**CURIOSITY, **change})


def test_curiosity_refuses_setups_where_the_sampler_does_not_learn():
    with pytest.raises(ValueError, match="num_workers must be 0"):
        _policy(CURIOSITY, num_workers=2)
    with pytest.raises(ValueError, match="num_gpus"):
        _policy(CURIOSITY, num_gpus=1)
    with pytest.raises(ValueError, match="num_learners"):
        _policy(CURIOSITY, num_learners=2)
    with pytest.raises(ValueError, match="Discrete or MultiDiscrete"):
        make_exploration(
            CURIOSITY, gym.spaces.Box(-1, 1, (2,)), {"num_workers": 0}, torch.nn.Linear(2, 2)
        )
    with pytest.raises(TypeError, match="does not fit Curiosity"):
        _policy({**CURIOSITY, "etaa": 1.0})


def test_curiosity_on_multidiscrete_actions():
    config = {**DEFAULT_CONFIG, "num_workers": 0, "exploration_config": CURIOSITY}
    policy = PPOTorchPolicy(OBS_SPACE, gym.spaces.MultiDiscrete([2, 3]), config)
    batch = _batch([0, 1], [1, 2], [0, 0])
    batch[SampleBatch.ACTIONS] = np.array([[0, 2], [1, 1]])
    out = policy.exploration.postprocess_trajectory(policy, batch)
    assert np.all(out[SampleBatch.REWARDS] > 1.0)


# -- RE3 -----------------------------------------------------------------------


def test_states_entropy_is_the_distance_to_the_kth_nearest_neighbour():
    # Points on a line at 0, 1, 3, 7: nearest other points at 1, 1, 2, 4; second
    # nearest at 3, 2, 3, 6.
    embeds = np.array([[0.0, 0.0], [1.0, 0.0], [3.0, 0.0], [7.0, 0.0]])
    np.testing.assert_allclose(compute_states_entropy(embeds, 2, 1), [1, 1, 2, 4], atol=1e-6)
    np.testing.assert_allclose(compute_states_entropy(embeds, 2, 2), [3, 2, 3, 6], atol=1e-6)
    # k beyond the batch: the farthest point; [..., embed_dim] batches are flattened.
    np.testing.assert_allclose(compute_states_entropy(embeds, 2, 10), [7, 6, 4, 7], atol=1e-6)
    np.testing.assert_allclose(
        compute_states_entropy(embeds.reshape(2, 2, 2), 2, 1), [1, 1, 2, 4], atol=1e-6
    )
    assert compute_states_entropy(embeds[:1], 2, 3).tolist() == [0.0]


def test_beta_schedule():
    assert update_beta("constant", 0.2, 0.1, 7) == 0.2
    assert update_beta("linear_decay", 0.2, 0.1, 0) == pytest.approx(0.2)
    assert update_beta("linear_decay", 0.2, 0.1, 3) == pytest.approx(0.2 * 0.9**3)
    with pytest.raises(ValueError, match="'cosine'"):
        update_beta("cosine", 0.2, 0.1, 1)


def test_moving_mean_std_matches_the_whole_stream():
    rms = MovingMeanStd(epsilon=1e-8)
    rng = np.random.default_rng(0)
    parts = [rng.normal(3.0, 2.0, 50), rng.normal(-1.0, 0.5, 80)]
    for part in parts:
        rms(part)
    whole = np.concatenate(parts)
    assert rms.mean == pytest.approx(whole.mean(), rel=1e-4)
    assert rms.std == pytest.approx(whole.std(), rel=1e-4)
    # The output: the inputs over the updated running std, log(x / std + 1).
    fresh = MovingMeanStd()
    out = fresh(np.array([0.0, 2.0]))
    np.testing.assert_allclose(out, np.log(np.array([0.0, 2.0]) / fresh.std + 1.0))
    assert fresh.std == pytest.approx(1.0, rel=1e-3)  # the batch's variance is 1 too


def test_re3_embeds_observations_with_a_frozen_encoder_in_the_weights():
    policy = _policy({"type": "RE3", "embeds_dim": 8, "sub_exploration": None})
    exploration = policy.exploration
    assert isinstance(exploration, RE3)
    # Default sub-exploration for Discrete actions: epsilon-greedy.
    assert type(exploration.exploration_submodule).__name__ == "EpsilonGreedy"
    batch = _batch([0, 1, 1], [1, 2, 2], [0, 0, 0])
    out = exploration.postprocess_trajectory(policy, batch)
    embeds = out[OBS_EMBEDS]
    assert embeds.shape == (3, 8) and embeds.dtype == np.float32
    np.testing.assert_array_equal(embeds[1], embeds[2])
    assert not np.array_equal(embeds[0], embeds[1])
    encoder = [k for k in policy.get_weights() if k.startswith("_re3_encoder_net.")]
    assert encoder
    assert not any(p.requires_grad for p in policy.model._re3_encoder_net.parameters())


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"beta_schedule": "cosine"}, "beta_schedule='cosine'"),
        ({"k_nn": 0}, "k_nn=0"),
        ({"embeds_dim": 0}, "embeds_dim=0"),
        ({"rho": 2.0}, "rho=2.0"),
        ({"beta": -0.1}, "beta=-0.1"),
    ],
)
def test_re3_config_errors_name_the_bad_value(change, match):
    with pytest.raises(ValueError, match=match):
        _policy({"type": "RE3", "sub_exploration": {"type": "StochasticSampling"}, **change})
    if "beta_schedule" in change or "k_nn" in change:
        with pytest.raises(ValueError, match=match.split("=")[0]):
            RE3UpdateCallbacks(**change)


def test_re3_callbacks_add_the_scaled_entropy_to_rewards_and_advantages():
    embeds = np.array([[0.0], [1.0], [3.0], [7.0]], np.float32)
    batch = SampleBatch(
        {
            OBS_EMBEDS: embeds,
            SampleBatch.REWARDS: np.zeros(4, np.float32),
            SampleBatch.ADVANTAGES: np.ones(4, np.float32),
            SampleBatch.VALUE_TARGETS: np.full(4, 2.0, np.float32),
        }
    )
    callbacks = RE3UpdateCallbacks(embeds_dim=1, k_nn=1, beta=0.5, beta_schedule="constant")
    callbacks.on_learn_on_batch(policy=None, train_batch=batch, result={})
    distances = np.array([1.0, 1.0, 2.0, 4.0])
    # The running std after the first batch: of the prior (1e-4 samples, var 1) and it.
    bonus = 0.5 * np.log(distances / callbacks._rms.std + 1.0)
    np.testing.assert_allclose(batch[SampleBatch.REWARDS], bonus, rtol=1e-5)
    np.testing.assert_allclose(batch[SampleBatch.ADVANTAGES], 1.0 + bonus, rtol=1e-5)
    np.testing.assert_allclose(batch[SampleBatch.VALUE_TARGETS], 2.0 + bonus, rtol=1e-5)
    assert batch[SampleBatch.REWARDS][3] > batch[SampleBatch.REWARDS][0]
    with pytest.raises(ValueError, match="obs_embeds"):
        callbacks.on_learn_on_batch(
            policy=None, train_batch=SampleBatch({"rewards": np.zeros(2)}), result={}
        )


def test_re3_callbacks_decay_beta_with_the_training_iteration(monkeypatch):
    monkeypatch.setattr(RE3UpdateCallbacks, "_step", 0)
    callbacks = RE3UpdateCallbacks(
        embeds_dim=1, k_nn=1, beta=1.0, rho=0.5, beta_schedule="linear_decay"
    )
    callbacks.on_train_result(trainer=None, result={"training_iteration": 2})
    assert RE3UpdateCallbacks._step == 2
    batch = SampleBatch(
        {OBS_EMBEDS: np.array([[0.0], [1.0]], np.float32), "rewards": np.zeros(2, np.float32)}
    )
    callbacks.on_learn_on_batch(policy=None, train_batch=batch, result={})
    expected = 0.25 * np.log(1.0 / callbacks._rms.std + 1.0)
    np.testing.assert_allclose(batch["rewards"], [expected, expected], rtol=1e-5)


def test_ppo_trains_with_re3_and_its_callbacks():
    from corral.agents.ppo import PPOTrainer

    callbacks = functools.partial(RE3UpdateCallbacks, embeds_dim=8, k_nn=5, beta=0.1)
    trainer = PPOTrainer(
        env="CartPole-v1",
        config={
            "num_workers": 1,
            "train_batch_size": 200,
            "rollout_fragment_length": 100,
            "sgd_minibatch_size": 50,
            "num_sgd_iter": 1,
            "model": {"fcnet_hiddens": [8]},
            "callbacks": callbacks,
            "exploration_config": {
                "type": "RE3",
                "embeds_dim": 8,
                "sub_exploration": {"type": "StochasticSampling"},
            },
            "log_level": "ERROR",
        },
    )
    try:
        rms = []
        original = RE3UpdateCallbacks.on_learn_on_batch

        def spy(self, **kwargs):
            original(self, **kwargs)
            rms.append(self._rms.count)

        RE3UpdateCallbacks.on_learn_on_batch = spy
        try:
            result = trainer.train()
        finally:
            RE3UpdateCallbacks.on_learn_on_batch = original
        assert result["timesteps_total"] >= 200
        assert rms and rms[-1] >= 200
    finally:
        trainer.stop()
