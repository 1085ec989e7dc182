"""SAC's `_use_beta_distribution`: Box actions from a Beta distribution on [-1, 1]."""

import gymnasium as gym
import numpy as np
import pytest
import torch
from torch.distributions import Beta

from corral.agents.cql import CQLTrainer
from corral.agents.sac import RNNSACTrainer, SACTrainer
from corral.agents.sac.sac_torch_policy import SACTorchPolicy, beta_sample
from corral.policy.sample_batch import SampleBatch

FAST = {
    "num_workers": 0,
    "learning_starts": 64,
    "rollout_fragment_length": 16,
    "train_batch_size": 32,
    "training_intensity": 64,
    "min_iter_time_s": 0,
    "timesteps_per_iteration": 128,
    "Q_model": {"fcnet_hiddens": [16, 16]},
    "policy_model": {"fcnet_hiddens": [16, 16]},
    "_use_beta_distribution": True,
    "seed": 0,
}


def test_beta_sample_is_a_scaled_beta_with_its_log_density():
    torch.manual_seed(0)
    inputs = torch.randn(256, 4)
    actions, logp = beta_sample(inputs)
    assert actions.shape == (256, 2)
    assert float(actions.min()) >= -1.0 and float(actions.max()) <= 1.0
    # Concentrations softplus(x) + 1; log pi is the Beta's density of (a + 1) / 2.
    conc = torch.nn.functional.softplus(inputs) + 1.0
    reference = Beta(conc[:, :2], conc[:, 2:])
    unit = ((actions + 1.0) / 2.0).clamp(1e-6, 1 - 1e-6)
    torch.testing.assert_close(logp, reference.log_prob(unit).sum(-1), rtol=1e-4, atol=1e-4)
    # Deterministic: the mean, scaled.
    mean, _ = beta_sample(inputs, deterministic=True)
    torch.testing.assert_close(mean, reference.mean * 2.0 - 1.0)


def test_beta_sample_is_reparameterised():
    inputs = torch.zeros(64, 2, requires_grad=True)
    actions, logp = beta_sample(inputs)
    (actions.sum() + logp.sum()).backward()
    assert inputs.grad is not None and torch.count_nonzero(inputs.grad) > 0


def test_sac_acts_in_bounds_over_the_whole_range_and_trains_with_finite_losses():
    trainer = SACTrainer(env="Pendulum-v1", config=FAST)
    try:
        policy = trainer.get_policy()
        assert policy.actor_sample is beta_sample and policy.model.use_beta_distribution
        assert policy.model.target_entropy == -1.0  # "auto": -dim(A), as for the Gaussian
        results = [trainer.train() for _ in range(3)]
        for result in results:
            stats = result["info"]["learner"]["default_policy"]["learner_stats"]
            for key in ("actor_loss", "critic_loss", "alpha_loss", "alpha_value", "entropy"):
                assert np.isfinite(stats[key]), (key, stats)
        # The policy's actions (normalised space) lie in [-1, 1] and use both halves of it.
        obs = np.random.default_rng(0).uniform(-1, 1, (512, 3)).astype(np.float32)
        actions, extra = policy.compute_actions_from_obs(obs, explore=True)
        assert actions.min() >= -1.0 and actions.max() <= 1.0
        assert actions.min() < -0.3 and actions.max() > 0.3
        assert np.all(np.isfinite(extra[SampleBatch.ACTION_LOGP]))
        # Unexplored actions are the Beta's mean; env actions are in Pendulum's [-2, 2].
        greedy, _ = policy.compute_actions_from_obs(obs[:8], explore=False)
        again, _ = policy.compute_actions_from_obs(obs[:8], explore=False)
        np.testing.assert_array_equal(greedy, again)
        for row in obs[:16]:
            action = trainer.compute_single_action(row, explore=True)
            assert -2.0 <= float(action[0]) <= 2.0
        # The policy's outputs are Beta inputs, not clamped as a log std would be.
        raw = policy.model.get_policy_output(torch.from_numpy(obs) * 50.0)
        assert raw.shape == (512, 2)
    finally:
        trainer.stop()


def test_gaussian_stays_the_default():
    trainer = SACTrainer(env="Pendulum-v1", config={**FAST, "_use_beta_distribution": False})
    try:
        policy = trainer.get_policy()
        assert policy.actor_sample is not beta_sample
        assert not policy.model.use_beta_distribution
    finally:
        trainer.stop()


def test_discrete_actions_ignore_it():
    trainer = SACTrainer(env="CartPole-v1", config=FAST)
    try:
        trainer.train()
        assert trainer.get_policy().discrete
    finally:
        trainer.stop()


@pytest.mark.parametrize("trainer_cls", [RNNSACTrainer, CQLTrainer])
def test_rnnsac_and_cql_refuse_it_by_name(trainer_cls):
    with pytest.raises(NotImplementedError, match="_use_beta_distribution"):
        trainer_cls(env="Pendulum-v1", config={"_use_beta_distribution": True})


def test_a_policy_without_it_built_refuses_it():
    class Sub(SACTorchPolicy):
        beta_distribution_built = False

    config = SACTrainer.merge_trainer_configs(SACTrainer.get_default_config(), FAST)
    space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    with pytest.raises(NotImplementedError, match="built for SAC only; Sub"):
        Sub(gym.spaces.Box(-1.0, 1.0, (3,), np.float32), space, config)
