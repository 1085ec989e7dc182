"""Action distributions against torch.distributions, which serves as the reference maths."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch.distributions import Categorical, Normal, kl_divergence

from corral.models.torch.torch_action_dist import (
    TorchBeta,
    TorchCategorical,
    TorchDeterministic,
    TorchDiagGaussian,
    TorchDirichlet,
    TorchMultiCategorical,
    TorchSquashedGaussian,
)


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


def test_categorical_logp_entropy_kl_match_torch():
    logits, other_logits = torch.randn(64, 5), torch.randn(64, 5)
    actions = torch.randint(0, 5, (64,))
    dist, other = TorchCategorical(logits), TorchCategorical(other_logits)
    ref, ref_other = Categorical(logits=logits), Categorical(logits=other_logits)
    torch.testing.assert_close(dist.logp(actions), ref.log_prob(actions), atol=1e-5, rtol=0)
    torch.testing.assert_close(dist.entropy(), ref.entropy(), atol=1e-5, rtol=0)
    torch.testing.assert_close(dist.kl(other), kl_divergence(ref, ref_other), atol=1e-5, rtol=0)


def test_categorical_masked_logits_stay_finite():
    logits = torch.tensor([[0.0, -float("inf"), 1.0], [2.0, 0.5, -float("inf")]])
    dist = TorchCategorical(logits)
    ref = Categorical(logits=logits)
    torch.testing.assert_close(dist.entropy(), ref.entropy(), atol=1e-5, rtol=0)
    assert torch.isfinite(dist.kl(TorchCategorical(logits))).all()
    for _ in range(200):
        sample = dist.sample()
        assert sample[0] != 1 and sample[1] != 2


def test_categorical_sample_frequencies_match_probs():
    probs = torch.tensor([0.1, 0.2, 0.3, 0.4])
    dist = TorchCategorical(probs.log().expand(40_000, 4))
    sample = dist.sample()
    assert sample.shape == (40_000,) and sample.dtype == torch.int64
    freq = torch.bincount(sample, minlength=4).float() / 40_000
    torch.testing.assert_close(freq, probs, atol=0.015, rtol=0)
    torch.testing.assert_close(dist.sampled_action_logp(), dist.logp(sample))


def test_categorical_deterministic_sample_is_argmax():
    logits = torch.randn(32, 6)
    dist = TorchCategorical(logits)
    assert torch.equal(dist.deterministic_sample(), logits.argmax(-1))
    assert torch.equal(dist.last_sample, logits.argmax(-1))


def test_categorical_temperature_scales_logits():
    logits = torch.randn(8, 3)
    dist = TorchCategorical(logits, temperature=2.0)
    ref = Categorical(logits=logits / 2.0)
    torch.testing.assert_close(dist.entropy(), ref.entropy(), atol=1e-5, rtol=0)


def test_sampled_action_logp_before_sample_raises():
    with pytest.raises(RuntimeError, match="before sample"):
        TorchCategorical(torch.zeros(2, 2)).sampled_action_logp()


def test_diag_gaussian_logp_entropy_kl_match_torch():
    # float64: with float32, log-densities near -100 differ from the reference by rounding alone.
    inputs, other_inputs = torch.randn(64, 6).double(), torch.randn(64, 6).double()
    actions = 3 * torch.randn(64, 3).double()
    dist, other = TorchDiagGaussian(inputs), TorchDiagGaussian(other_inputs)

    def ref(x):
        return Normal(x[:, :3], x[:, 3:].exp())

    torch.testing.assert_close(
        dist.logp(actions), ref(inputs).log_prob(actions).sum(-1), atol=1e-5, rtol=0
    )
    torch.testing.assert_close(dist.entropy(), ref(inputs).entropy().sum(-1), atol=1e-5, rtol=0)
    torch.testing.assert_close(
        dist.kl(other), kl_divergence(ref(inputs), ref(other_inputs)).sum(-1), atol=1e-5, rtol=0
    )


def test_diag_gaussian_sample_statistics_and_mean():
    mean, log_std = torch.tensor([1.0, -2.0]), torch.tensor([0.0, -1.0])
    dist = TorchDiagGaussian(torch.cat([mean, log_std]).expand(50_000, 4))
    sample = dist.sample()
    assert sample.shape == (50_000, 2)
    torch.testing.assert_close(sample.mean(0), mean, atol=0.03, rtol=0)
    torch.testing.assert_close(sample.std(0), log_std.exp(), atol=0.03, rtol=0)
    assert torch.equal(dist.deterministic_sample(), dist.mean)


def test_diag_gaussian_scalar_box_gives_flat_actions():
    space = gym.spaces.Box(-1.0, 1.0, shape=())
    dist = TorchDiagGaussian(torch.randn(5, 2), action_space=space)
    sample = dist.sample()
    assert sample.shape == (5,)
    assert dist.sampled_action_logp().shape == (5,)
    assert dist.deterministic_sample().shape == (5,)


def test_diag_gaussian_gradients_flow_to_inputs():
    inputs = torch.randn(4, 2, requires_grad=True)
    TorchDiagGaussian(inputs).logp(torch.zeros(4, 1)).sum().backward()
    assert inputs.grad is not None and torch.isfinite(inputs.grad).all()


def test_multi_categorical_sums_components():
    nvec = [3, 2, 4]
    logits, other_logits = torch.randn(16, 9), torch.randn(16, 9)
    space = gym.spaces.MultiDiscrete(nvec)
    dist = TorchMultiCategorical(logits, None, nvec, space)
    other = TorchMultiCategorical(other_logits, None, nvec, space)
    refs = [Categorical(logits=x) for x in torch.split(logits, nvec, dim=-1)]
    ref_others = [Categorical(logits=x) for x in torch.split(other_logits, nvec, dim=-1)]
    sample = dist.sample()
    assert sample.shape == (16, 3)
    assert (sample < torch.tensor(nvec)).all()
    expected_logp = sum(r.log_prob(sample[:, i]) for i, r in enumerate(refs))
    torch.testing.assert_close(dist.logp(sample), expected_logp, atol=1e-5, rtol=0)
    torch.testing.assert_close(dist.entropy(), sum(r.entropy() for r in refs), atol=1e-5, rtol=0)
    expected_kl = sum(kl_divergence(r, o) for r, o in zip(refs, ref_others))
    torch.testing.assert_close(dist.kl(other), expected_kl, atol=1e-5, rtol=0)
    expected_argmax = torch.stack([x.argmax(-1) for x in torch.split(logits, nvec, -1)], -1)
    assert torch.equal(dist.deterministic_sample(), expected_argmax)


def test_multi_categorical_restores_multi_dim_nvec():
    space = gym.spaces.MultiDiscrete(np.array([[2, 3], [4, 2]]))
    dist = TorchMultiCategorical(torch.randn(7, 11), action_space=space)
    assert dist.sample().shape == (7, 2, 2)
    assert dist.sampled_action_logp().shape == (7,)


def test_required_output_shapes():
    assert TorchCategorical.required_model_output_shape(gym.spaces.Discrete(7), {}) == 7
    box = gym.spaces.Box(-1, 1, (3,))
    assert TorchDiagGaussian.required_model_output_shape(box, {}) == 6
    assert TorchDeterministic.required_model_output_shape(box, {}) == 3
    md = gym.spaces.MultiDiscrete([3, 5])
    assert TorchMultiCategorical.required_model_output_shape(md, {}) == 8


def test_deterministic_returns_inputs():
    inputs = torch.randn(4, 3)
    dist = TorchDeterministic(inputs)
    assert torch.equal(dist.sample(), inputs)
    assert torch.equal(dist.sampled_action_logp(), torch.zeros(4))


# -- RLlib 1.13's squashed Gaussian, Beta and Dirichlet ---------------------------------


def test_squashed_gaussian_samples_in_bounds_and_scores_with_the_tanh_correction():
    inputs = torch.randn(256, 4)
    dist = TorchSquashedGaussian(inputs, low=-2.0, high=3.0)
    actions = dist.sample()
    assert actions.shape == (256, 2) and actions.min() >= -2.0 and actions.max() <= 3.0
    # Reference: the Gaussian's density of the unsquashed action, with the change of
    # variables of tanh and the affine map to [low, high].
    mean, log_std = inputs.chunk(2, dim=-1)
    raw = torch.atanh(((actions - (-2.0)) / 5.0 * 2.0 - 1.0).clamp(-1 + 1e-6, 1 - 1e-6))
    ref = Normal(mean, log_std.clamp(-5, 2).exp()).log_prob(raw).sum(-1)
    ref = ref - torch.log(1 - torch.tanh(raw) ** 2 + 1e-6).sum(-1)
    torch.testing.assert_close(dist.logp(actions), ref, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(dist.sampled_action_logp(), ref, atol=1e-4, rtol=1e-4)
    assert torch.allclose(dist.deterministic_sample(), (torch.tanh(mean) + 1) / 2 * 5 - 2)
    # Reparameterised: the sample carries the gradient (SAC's policy loss needs it).
    grad_inputs = inputs.clone().requires_grad_()
    TorchSquashedGaussian(grad_inputs).sample().sum().backward()
    assert grad_inputs.grad is not None and grad_inputs.grad.abs().sum() > 0
    # RLlib 1.13's sample_logp: a reparameterised sample with its log-likelihood.
    sampled, logp = TorchSquashedGaussian(grad_inputs, low=-2.0, high=3.0).sample_logp()
    assert sampled.min() >= -2.0 and sampled.max() <= 3.0
    # (The same as scoring the action, away from the bounds, where unsquashing an action
    # back loses the precision that the draw itself keeps.)
    inside = (sampled - 0.5).abs() < 2.0
    inside = inside.all(-1)
    torch.testing.assert_close(
        logp[inside], dist.logp(sampled).detach()[inside], atol=1e-3, rtol=1e-3
    )
    grad_inputs.grad = None
    logp.sum().backward()
    assert grad_inputs.grad is not None and grad_inputs.grad.abs().sum() > 0
    with pytest.raises(ValueError, match="no closed form"):
        dist.entropy()
    with pytest.raises(ValueError, match="low < high"):
        TorchSquashedGaussian(inputs, low=1.0, high=1.0)
    space = gym.spaces.Box(-1.0, 1.0, (3,), np.float32)
    assert TorchSquashedGaussian.required_model_output_shape(space, {}) == 6


def test_beta_matches_torch_and_scales_to_its_bounds():
    inputs, other_inputs = torch.randn(128, 6), torch.randn(128, 6)
    dist, other = TorchBeta(inputs, low=-1.0, high=1.0), TorchBeta(other_inputs, low=-1.0, high=1.0)
    alpha, beta = (torch.nn.functional.softplus(inputs) + 1.0).chunk(2, dim=-1)
    ref = torch.distributions.Beta(alpha, beta)
    actions = dist.sample()
    assert actions.shape == (128, 3) and actions.min() >= -1.0 and actions.max() <= 1.0
    unit = (actions + 1.0) / 2.0
    torch.testing.assert_close(dist.logp(actions), ref.log_prob(unit).sum(-1), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(dist.entropy(), ref.entropy().sum(-1))
    assert (dist.kl(other) >= 0).all() and torch.allclose(
        dist.kl(dist), torch.zeros(128), atol=1e-5
    )
    torch.testing.assert_close(dist.deterministic_sample(), ref.mean * 2.0 - 1.0)


def test_dirichlet_samples_on_the_simplex():
    inputs = torch.randn(64, 3) + 1.5  # (no component rounds to 0: logp clips those)
    dist = TorchDirichlet(inputs)
    actions = dist.sample()
    torch.testing.assert_close(actions.sum(-1), torch.ones(64))
    ref = torch.distributions.Dirichlet(inputs.exp() + 1e-7)
    torch.testing.assert_close(dist.logp(actions), ref.log_prob(actions), atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(dist.entropy(), ref.entropy())
    torch.testing.assert_close(dist.deterministic_sample(), torch.softmax(ref.concentration, -1))
    assert TorchDirichlet.required_model_output_shape(gym.spaces.Box(0, 1, (3,)), {}) == 3


def test_beta_trains_ppo_as_a_custom_action_dist():
    # (PPO reports its KL and entropy: a squashed Gaussian, which has neither in closed
    # form, does not fit PPO, in RLlib 1.13 either.)
    from corral.agents.ppo import PPOTrainer

    trainer = PPOTrainer(
        env="Pendulum-v1",
        config={
            "num_workers": 0,
            "rollout_fragment_length": 64,
            "train_batch_size": 64,
            "sgd_minibatch_size": 32,
            "num_sgd_iter": 1,
            "normalize_actions": False,
            "model": {"custom_action_dist": TorchBeta},
        },
    )
    try:
        result = trainer.train()
        assert np.isfinite(
            result["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"]
        )
        assert trainer.get_policy().dist_class is TorchBeta
    finally:
        trainer.stop()
