"""QMIX: its mixers, action masks, losses, checkpoints and config errors."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.agents.qmix import (
    DEFAULT_CONFIG,
    QMixer,
    QMixLoss,
    QMixTorchPolicy,
    QMixTrainer,
    RNNModel,
    VDNMixer,
)
from corral.agents.registry import get_trainer_class
from corral.env.multi_agent_env import ENV_STATE
from corral.utils.error import UnsupportedSpaceException
from tests.fixtures.two_step_game import GroupedTwoStepGame

N_ACTIONS = 4


def _policy(mask: bool = True, state: bool = True, **config) -> QMixTorchPolicy:
    agent = {"obs": gym.spaces.Box(-1.0, 1.0, (3,), np.float32)}
    if mask:
        agent["action_mask"] = gym.spaces.Box(0.0, 1.0, (N_ACTIONS,), np.float32)
    if state:
        agent[ENV_STATE] = gym.spaces.Box(-1.0, 1.0, (5,), np.float32)
    obs_space = gym.spaces.Tuple([gym.spaces.Dict(agent)] * 2)
    act_space = gym.spaces.Tuple([gym.spaces.Discrete(N_ACTIONS)] * 2)
    return QMixTorchPolicy(obs_space, act_space, {**DEFAULT_CONFIG, **config})


def _group_obs(policy: QMixTorchPolicy, masks: np.ndarray) -> np.ndarray:
    """Preprocessed group observations with the given `[N, 2, N_ACTIONS]` masks."""
    rng = np.random.default_rng(0)
    rows = []
    for m in masks:
        agent = [
            {
                "obs": rng.uniform(-1, 1, 3).astype(np.float32),
                "action_mask": m[i].astype(np.float32),
                ENV_STATE: np.full(5, 0.5, np.float32),
            }
            for i in range(2)
        ]
        rows.append(policy.preprocessor.transform(tuple(agent)))
    return np.stack(rows)


def test_qmixer_is_monotonic_in_every_agent_q():
    torch.manual_seed(0)
    mixer = QMixer(n_agents=3, state_shape=7, mixing_embed_dim=8)
    qs = torch.randn(16, 5, 3, requires_grad=True)
    states = torch.randn(16, 5, 7)
    q_tot = mixer(qs, states)
    assert q_tot.shape == (16, 5, 1)
    (grad,) = torch.autograd.grad(q_tot.sum(), qs)
    assert (grad >= 0).all()
    assert (grad > 0).any()


def test_vdn_mixer_sums():
    qs = torch.tensor([[[1.0, 2.0, -0.5]]])
    assert torch.equal(VDNMixer()(qs, None), torch.tensor([[[2.5]]]))


def test_rnn_model_shares_weights_and_keeps_one_state_per_agent():
    space = gym.spaces.Box(-1, 1, (3,), np.float32)
    model = RNNModel(space, gym.spaces.Discrete(2), 2, {"lstm_cell_size": 8, "n_agents": 2}, "m")
    (h0,) = model.get_initial_state()
    assert h0.shape == (2, 8)
    q, (h,) = model({"obs": torch.ones(4, 3)}, [torch.zeros(4, 8)], None)
    assert q.shape == (4, 2) and h.shape == (4, 8)


def test_exploration_and_greedy_actions_respect_action_masks():
    policy = _policy()
    assert policy.has_action_mask and policy.has_env_global_state
    rng = np.random.default_rng(1)
    masks = (rng.uniform(size=(200, 2, N_ACTIONS)) < 0.5).astype(np.float32)
    masks[np.arange(200), :, rng.integers(0, N_ACTIONS, 200)] = 1.0  # >= 1 allowed
    obs = _group_obs(policy, masks)
    # At the start epsilon is 1: every action is drawn at random.
    explored, extra = policy.compute_actions_from_obs(obs, explore=True)
    greedy, _ = policy.compute_actions_from_obs(obs, explore=False)
    assert extra["state_out_0"].shape == (200, 2, 64)
    for actions in (explored, greedy):
        assert actions.shape == (200, 2)
        chosen = masks[np.arange(200)[:, None], np.arange(2)[None, :], actions.astype(int)]
        assert (chosen == 1).all()
    # The random draws cover the allowed actions (not always the greedy one).
    assert (explored != greedy).any()


def test_no_allowed_action_is_an_error():
    policy = _policy()
    masks = np.ones((1, 2, N_ACTIONS), np.float32)
    masks[0, 1] = 0
    with pytest.raises(ValueError, match="allows no action"):
        policy.compute_actions_from_obs(_group_obs(policy, masks), explore=False)


def test_targets_take_the_best_allowed_next_action():
    torch.manual_seed(0)
    policy = _policy(mixer=None, double_q=False, gamma=1.0)
    loss_fn: QMixLoss = policy.qmix_loss
    b, t, n = 1, 2, 2
    obs, next_obs = torch.randn(b, t, n, 3), torch.randn(b, t, n, 3)
    # Action 0 is by far the best for the target network ...
    with torch.no_grad():
        policy.target_model.fc2.bias[0] = 1e3

    def targets(next_mask: torch.Tensor) -> torch.Tensor:
        return loss_fn(
            torch.zeros(b, t),
            torch.zeros(b, t, n, dtype=torch.long),
            torch.zeros(b, t),
            torch.ones(b, t),
            obs,
            next_obs,
            torch.ones(b, t, n, N_ACTIONS),
            next_mask,
        )[4]

    allowed = torch.ones(b, t, n, N_ACTIONS)
    assert targets(allowed).min() > 500
    # ... but never allowed next: the targets value the best allowed action instead.
    allowed[..., 0] = 0
    assert targets(allowed).abs().max() < 100


def test_loss_trains_the_mixer_and_ignores_padding():
    policy = _policy(mask=False, state=False)
    batch = {
        "obs": torch.randn(5, policy.preprocessor.size),
        "new_obs": torch.randn(5, policy.preprocessor.size),
        "actions": torch.randint(0, N_ACTIONS, (5, 2)).float(),
        "rewards": torch.tensor([0.0, 1.0, 0.0, 0.0, 2.0]),
        "terminateds": torch.tensor([False, True, False, False, True]),
        "eps_id": torch.tensor([7, 7, 9, 9, 9]),
        "agent_index": torch.zeros(5, dtype=torch.long),
        "t": torch.tensor([0, 1, 0, 1, 2]),
    }
    source, real, num_seqs, length = policy._sequence_layout(batch)
    assert (num_seqs, length) == (2, 3)
    assert real.tolist() == [[True, True, False], [True, True, True]]
    loss, stats = policy.loss(policy.model, policy.dist_class, batch)
    loss.backward()
    assert policy.mixer is not None
    assert any(p.grad is not None and p.grad.abs().sum() > 0 for p in policy.mixer.parameters())
    assert set(stats) >= {"loss", "td_error_abs", "q_taken_mean", "target_mean"}


def _config(**overrides) -> dict:
    return {
        "env": GroupedTwoStepGame,
        "env_config": {"one_hot_state_encoding": True, "separate_state_space": True},
        "seed": 0,
        "replay_buffer_config": {"learning_starts": 20},
        "timesteps_per_iteration": 40,
        "min_time_s_per_reporting": 0,
        "target_network_update_freq": 20,
        **overrides,
    }


def test_registry_and_checkpoint_round_trip(tmp_path):
    assert get_trainer_class("QMIX") is QMixTrainer
    trainer = QMixTrainer(config=_config())
    try:
        result = trainer.train()
        assert result["info"]["learner"]["default_policy"]["learner_stats"]["loss"] >= 0
        path = trainer.save(str(tmp_path))
        policy = trainer.get_policy()
        weights = policy.get_weights()
        assert any(k.startswith("mixer.") for k in weights)
        state = policy.get_state()
    finally:
        trainer.stop()
    restored = QMixTrainer(config=_config(seed=1))
    try:
        restored.restore(path)
        other = restored.get_policy()
        for k, v in weights.items():
            np.testing.assert_array_equal(other.get_weights()[k], v)
        for k, v in state["weights"].items():
            np.testing.assert_array_equal(other.get_state()["weights"][k], v)
        restored.train()
    finally:
        restored.stop()


@pytest.mark.parametrize(
    ("overrides", "error", "match"),
    [
        ({"mixer": "sum"}, ValueError, "mixer"),
        ({"mixing_embed_dim": 0}, ValueError, "mixing_embed_dim"),
        ({"replay_buffer_config": {"type": "MultiAgentReplayBuffer"}}, ValueError, "Simple"),
        ({"store_buffer_in_checkpoints": True}, ValueError, "store_buffer_in_checkpoints"),
        ({"exploration_config": {"type": "StochasticSampling"}}, ValueError, "EpsilonGreedy"),
    ],
)
def test_config_errors(overrides, error, match):
    with pytest.raises(error, match=match):
        QMixTrainer(config=_config(**overrides))


def test_spaces_must_be_tuples_of_discrete_actions():
    box = gym.spaces.Box(-1, 1, (3,), np.float32)
    with pytest.raises(UnsupportedSpaceException, match="Tuple observation space"):
        QMixTorchPolicy(box, gym.spaces.Discrete(2), dict(DEFAULT_CONFIG))
    with pytest.raises(UnsupportedSpaceException, match="same Discrete"):
        QMixTorchPolicy(
            gym.spaces.Tuple([box, box]),
            gym.spaces.Tuple([gym.spaces.Discrete(2), gym.spaces.Discrete(3)]),
            dict(DEFAULT_CONFIG),
        )
    with pytest.raises(ValueError, match="action_mask's shape"):
        agent = gym.spaces.Dict({"obs": box, "action_mask": gym.spaces.Box(0, 1, (5,))})
        QMixTorchPolicy(
            gym.spaces.Tuple([agent, agent]),
            gym.spaces.Tuple([gym.spaces.Discrete(2)] * 2),
            dict(DEFAULT_CONFIG),
        )
