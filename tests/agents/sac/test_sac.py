"""SAC: squashed-Gaussian log-probs, entropy targets, polyak math, discrete SAC, checkpoints."""

import math

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch.distributions import Normal, TanhTransform, TransformedDistribution

from corral.agents.off_policy import polyak_update
from corral.agents.registry import get_trainer_class
from corral.agents.sac import DEFAULT_CONFIG, SACTrainer
from corral.agents.sac.sac_torch_model import EnsembleMLP, resolve_target_entropy
from corral.agents.sac.sac_torch_policy import squashed_gaussian_sample

FAST = {
    "learning_starts": 32,
    "rollout_fragment_length": 16,
    "train_batch_size": 32,
    "training_intensity": 64,
    "min_iter_time_s": 0,
    "timesteps_per_iteration": 64,
    "Q_model": {"fcnet_hiddens": [16, 16]},
    "policy_model": {"fcnet_hiddens": [16, 16]},
}


def test_registry_and_rllib_defaults():
    assert get_trainer_class("SAC") is SACTrainer
    assert DEFAULT_CONFIG["twin_q"] is True
    assert DEFAULT_CONFIG["tau"] == 5e-3
    assert DEFAULT_CONFIG["learning_starts"] == 1500
    assert DEFAULT_CONFIG["Q_model"]["fcnet_hiddens"] == [256, 256]
    assert DEFAULT_CONFIG["optimization"]["entropy_learning_rate"] == 3e-4
    assert DEFAULT_CONFIG["replay_buffer_config"]["capacity"] == int(1e6)


def test_squashed_gaussian_logp_matches_torch_distributions():
    torch.manual_seed(0)
    mean, log_std = torch.randn(64, 3), torch.randn(64, 3).clamp(-2, 1)
    actions, logp = squashed_gaussian_sample(torch.cat([mean, log_std], -1))
    reference = TransformedDistribution(Normal(mean, log_std.exp()), [TanhTransform()])
    # Stay away from |a| = 1, where float32 atanh in the reference loses precision.
    mask = actions.abs().max(-1).values < 0.999
    expected = reference.log_prob(actions).sum(-1)
    torch.testing.assert_close(logp[mask], expected[mask], rtol=1e-4, atol=1e-3)
    assert actions.abs().max() <= 1.0


def test_squashed_gaussian_logp_by_hand():
    # One dimension, mean 0, std 1, deterministic: u = 0, a = 0, and log pi = log N(0; 0, 1).
    _, logp = squashed_gaussian_sample(torch.tensor([[0.0, 0.0]]), deterministic=True)
    assert logp.item() == pytest.approx(-0.5 * math.log(2 * math.pi), abs=1e-6)
    # u = 0.5: log pi = log N(0.5; 0.5, e^-1) - log(1 - tanh(0.5)^2).
    _, logp = squashed_gaussian_sample(torch.tensor([[0.5, -1.0]]), deterministic=True)
    expected = (1.0 - 0.5 * math.log(2 * math.pi)) - math.log(1 - math.tanh(0.5) ** 2)
    assert logp.item() == pytest.approx(expected, abs=1e-5)


def test_target_entropy_auto():
    assert resolve_target_entropy("auto", gym.spaces.Box(-1, 1, (3,))) == -3.0
    assert resolve_target_entropy("auto", gym.spaces.Discrete(4)) == pytest.approx(
        0.98 * math.log(4)
    )
    assert resolve_target_entropy(-0.5, gym.spaces.Box(-1, 1, (3,))) == -0.5


def test_polyak_update_math():
    torch.manual_seed(0)
    source, target = EnsembleMLP(2, 4, [8], 1, "relu"), EnsembleMLP(2, 4, [8], 1, "relu")
    before = [p.detach().clone() for p in target.parameters()]
    polyak_update(source, target, 0.1)
    for p_new, p_old, p_src in zip(target.parameters(), before, source.parameters()):
        torch.testing.assert_close(p_new, 0.1 * p_src + 0.9 * p_old)
    polyak_update(source, target, 1.0)
    for p_new, p_src in zip(target.parameters(), source.parameters()):
        torch.testing.assert_close(p_new, p_src)


def _member_mlp(x, weights, biases, e):
    """Member `e` of an `EnsembleMLP` (ReLU) written out as a plain MLP over `x`."""
    h = x
    for i, (w, b) in enumerate(zip(weights, biases)):
        h = h @ w[e] + b[e]
        if i < len(weights) - 1:
            h = torch.relu(h)
    return h


def test_ensemble_matches_separate_mlps():
    torch.manual_seed(0)
    net = EnsembleMLP(2, 5, [7, 6], 1, "relu")
    x = torch.randn(9, 5)
    out = net(x)
    for e in range(2):
        torch.testing.assert_close(out[e], _member_mlp(x, net.weights, net.biases, e))


def test_ensemble_gradients_match_separate_mlps():
    # The members share their input: its gradient is the sum of each member's, and each
    # member's weights get the gradient of its own MLP.
    torch.manual_seed(0)
    net = EnsembleMLP(2, 5, [7, 6], 1, "relu")
    x = torch.randn(9, 5, requires_grad=True)
    scale = torch.linspace(-1.0, 2.0, 2 * 9).view(2, 9, 1)
    (net(x) * scale).sum().backward()
    x_ref = x.detach().clone().requires_grad_(True)
    params = [p.detach().clone().requires_grad_(True) for p in net.parameters()]
    n = len(net.weights)
    weights, biases = params[:n], params[n:]
    sum((_member_mlp(x_ref, weights, biases, e) * scale[e]).sum() for e in range(2)).backward()
    torch.testing.assert_close(x.grad, x_ref.grad)
    for p, ref in zip(net.parameters(), params):
        torch.testing.assert_close(p.grad, ref.grad)


def test_ensemble_members_evaluates_only_those():
    torch.manual_seed(0)
    net = EnsembleMLP(2, 5, [7, 6], 1, "relu")
    x = torch.randn(9, 5)
    full = net(x)
    for members in (slice(0, 1), slice(1, 2), slice(0, 2)):
        torch.testing.assert_close(net(x, members=members), full[members])
        torch.testing.assert_close(net(x, True, members), full[members])
    # Gradients reach the evaluated member only.
    net(x, members=slice(1, 2)).sum().backward()
    assert all(float(p.grad[0].abs().sum()) == 0.0 for p in net.parameters())
    assert all(float(p.grad[1].abs().sum()) > 0.0 for p in net.parameters())


def test_continuous_sac_trains_and_reports_losses():
    trainer = SACTrainer(config={**FAST, "seed": 0}, env="Pendulum-v1")
    try:
        result = trainer.train()
        stats = result["info"]["learner"]["default_policy"]["learner_stats"]
        for key in ("actor_loss", "critic_loss", "alpha_loss", "alpha_value"):
            assert np.isfinite(stats[key])
        assert result["timesteps_total"] >= 64
    finally:
        trainer.stop()


def test_discrete_sac_trains_one_iteration_on_cartpole():
    trainer = SACTrainer(config={**FAST, "seed": 0}, env="CartPole-v1")
    try:
        policy = trainer.get_policy()
        before = {k: v.copy() for k, v in policy.get_weights().items()}
        result = trainer.train()
        stats = result["info"]["learner"]["default_policy"]["learner_stats"]
        assert np.isfinite(stats["critic_loss"]) and np.isfinite(stats["actor_loss"])
        after = policy.get_weights()
        assert any(not np.array_equal(before[k], after[k]) for k in before)
        assert trainer.compute_single_action(np.zeros(4, np.float32), explore=False) in (0, 1)
    finally:
        trainer.stop()


def test_checkpoint_restore_gives_same_deterministic_actions(tmp_path):
    trainer = SACTrainer(config={**FAST, "seed": 1}, env="Pendulum-v1")
    obs = np.random.default_rng(0).uniform(-1, 1, (8, 3)).astype(np.float32)
    try:
        trainer.train()
        path = trainer.save(str(tmp_path))
        expected = [trainer.compute_single_action(o, explore=False) for o in obs]
        target = trainer.get_policy().target_q.state_dict()
    finally:
        trainer.stop()
    restored = SACTrainer(config={**FAST, "seed": 2}, env="Pendulum-v1")
    try:
        restored.restore(path)
        actual = [restored.compute_single_action(o, explore=False) for o in obs]
        np.testing.assert_array_equal(np.array(actual), np.array(expected))
        for k, v in restored.get_policy().target_q.state_dict().items():
            torch.testing.assert_close(v, target[k])
        restored.train()  # training continues from the restored state
    finally:
        restored.stop()


def test_unbuilt_options_raise():
    # (`_use_beta_distribution` is built: tests/agents/sac/test_sac_beta.py.)
    with pytest.raises(NotImplementedError, match="_disable_preprocessor_api"):
        SACTrainer(config={**FAST, "_disable_preprocessor_api": True}, env="Pendulum-v1")
