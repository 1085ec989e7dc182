"""The linear contextual bandits: the closed-form regression, UCB and TS scoring, the
policy's updates and regret, and the trainers end to end (training, checkpoints)."""

import os

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.agents.bandit import (
    DEFAULT_CONFIG,
    BanditLinTSTrainer,
    BanditLinUCBTrainer,
    BanditTorchPolicy,
)
from corral.agents.bandit.bandit_torch_model import (
    DiscreteLinearModel,
    DiscreteLinearModelThompsonSampling,
    DiscreteLinearModelUCB,
    OnlineLinearRegression,
    ParametricLinearModelThompsonSampling,
    ParametricLinearModelUCB,
)
from corral.agents.bandit.bandit_torch_policy import (
    REGRET,
    BanditPolicyOverrides,
    init_cum_regret,
)
from corral.agents.registry import get_trainer_class
from corral.policy.sample_batch import SampleBatch
from corral.policy.torch_policy import TorchPolicy
from corral.utils.error import UnsupportedSpaceException
from corral.utils.exploration import ThompsonSampling, UpperConfidenceBound

QUIET = {"seed": 0, "log_level": "ERROR"}


class TwoContextBandit(gym.Env):
    """RLlib's SimpleContextualBandit: context (c, -c) with c = +-1; arm 0 pays 10 for
    c = 1, arm 2 for c = -1, arm 1 always 0 (the others -10). One step per episode."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(3)
    PAYOFFS = {1.0: (10.0, 0.0, -10.0), -1.0: (-10.0, 0.0, 10.0)}

    def __init__(self, config=None):
        self.context = 1.0

    def _obs(self):
        return np.array([self.context, -self.context], np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.context = float(self.np_random.choice([-1.0, 1.0]))
        return self._obs(), {}

    def step(self, action):
        reward = self.PAYOFFS[self.context][int(action)]
        return self._obs(), reward, True, False, {"regret": 10.0 - reward}


class ItemBandit(gym.Env):
    """Five items with random features each step; an item pays `features @ theta`."""

    THETA = np.array([1.0, -0.5, 0.3])
    observation_space = gym.spaces.Dict({"item": gym.spaces.Box(-1, 1, (5, 3), np.float32)})
    action_space = gym.spaces.Discrete(5)

    def __init__(self, config=None):
        self.items = np.zeros((5, 3), np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.items = self.np_random.uniform(-1, 1, (5, 3)).astype(np.float32)
        return {"item": self.items}, {}

    def step(self, action):
        payoffs = self.items @ self.THETA
        regret = float(payoffs.max() - payoffs[action])
        return {"item": self.items}, float(payoffs[action]), True, False, {"regret": regret}


def _policy(exploration, obs_space=TwoContextBandit.observation_space, action_space=None, **model):
    config = {
        **DEFAULT_CONFIG,
        "exploration_config": {"type": exploration},
        "model": {**DEFAULT_CONFIG["model"], **model},
    }
    return BanditTorchPolicy(obs_space, action_space or gym.spaces.Discrete(3), config)


# -- the regression --------------------------------------------------------------------


def test_closed_form_update_is_least_squares():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(60, 4))
    y = x @ np.array([0.5, -1.0, 2.0, 0.1]) + rng.normal(scale=0.1, size=60)
    lam, alpha = 0.5, 2.0
    reg = OnlineLinearRegression(4, alpha=alpha, lambda_=lam)
    for rows in np.array_split(np.arange(60), 3):  # in pieces: the sums are the same
        reg.partial_fit(torch.tensor(x[rows], dtype=torch.float32), torch.tensor(y[rows]))
    # Ridge regression = least squares on the data stacked over sqrt(lambda) I.
    stacked_x = np.vstack([x, np.sqrt(lam) * np.eye(4)])
    stacked_y = np.concatenate([y, np.zeros(4)])
    expected, *_ = np.linalg.lstsq(stacked_x, stacked_y, rcond=None)
    np.testing.assert_allclose(reg.theta.numpy(), expected, rtol=1e-4, atol=1e-4)
    precision = lam * np.eye(4) + x.T @ x
    np.testing.assert_allclose(reg.precision.numpy(), precision, rtol=1e-5)
    np.testing.assert_allclose(reg.f.numpy(), x.T @ y, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(
        reg.covariance.numpy(), alpha * np.linalg.inv(precision), rtol=1e-3, atol=1e-6
    )


def test_batched_update_equals_row_by_row():
    rng = np.random.default_rng(1)
    x = torch.tensor(rng.normal(size=(20, 3)), dtype=torch.float32)
    y = torch.tensor(rng.normal(size=20), dtype=torch.float32)
    batched, rows = OnlineLinearRegression(3), OnlineLinearRegression(3)
    batched.partial_fit(x, y)
    for i in range(20):
        rows.partial_fit(x[i], y[i : i + 1])
    for name, value in batched.state_dict().items():
        torch.testing.assert_close(value, rows.state_dict()[name], rtol=1e-4, atol=1e-5)


def test_regression_rejects_wrong_inputs():
    reg = OnlineLinearRegression(3)
    with pytest.raises(ValueError, match="3 features"):
        reg(torch.zeros(2, 4))
    with pytest.raises(ValueError, match="2 feature rows but 3 rewards"):
        reg.partial_fit(torch.zeros(2, 3), torch.zeros(3))
    with pytest.raises(ValueError, match="lambda_"):
        OnlineLinearRegression(3, lambda_=0.0)


def test_ucb_bonus_shrinks_as_the_arm_is_pulled():
    reg = OnlineLinearRegression(2, alpha=1.0)
    x = torch.tensor([[1.0, 0.5]])
    bonuses = [float(reg.get_ucbs(x))]
    for _ in range(5):
        reg.partial_fit(x, torch.tensor([1.0]))
        bonuses.append(float(reg.get_ucbs(x)))
    assert all(later < earlier for earlier, later in zip(bonuses, bonuses[1:])), bonuses
    # LinUCB's width sqrt(x^T alpha A^-1 x), A = I + 5 x x^T.
    a = np.eye(2) + 5 * x.numpy().T @ x.numpy()
    expected = np.sqrt(x.numpy() @ np.linalg.inv(a) @ x.numpy().T).item()
    assert bonuses[-1] == pytest.approx(expected, rel=1e-4)


def test_ucb_model_adds_the_confidence_width():
    model = _policy("UpperConfidenceBound", alpha=4.0).model
    assert isinstance(model, DiscreteLinearModelUCB)
    arms = model.regressions()
    arms[0].partial_fit(torch.tensor([[1.0, -1.0]] * 3), torch.tensor([5.0] * 3))
    x = torch.tensor([[1.0, -1.0], [-1.0, 1.0]])
    scores, _ = model({"obs": x}, [], None)
    greedy = model.predict(x)
    widths = torch.stack([arm.get_ucbs(x) for arm in arms], dim=-1)
    torch.testing.assert_close(scores, greedy + widths)
    # alpha scales the covariance: the width of an unpulled arm is sqrt(alpha * |x|^2).
    assert float(widths[0, 1]) == pytest.approx(np.sqrt(4.0 * 2.0), rel=1e-5)


def test_thompson_samples_vary_and_concentrate():
    torch.manual_seed(0)
    reg = OnlineLinearRegression(2, alpha=1.0)
    before = reg.sample_theta(4000)
    assert before.std(dim=0).min() > 0.9  # the prior N(0, I)
    rng = np.random.default_rng(0)
    x = torch.tensor(rng.normal(size=(400, 2)), dtype=torch.float32)
    reg.partial_fit(x, x @ torch.tensor([1.0, -2.0]))
    after = reg.sample_theta(4000)
    assert after.std(dim=0).max() < 0.1  # ~ 1 / sqrt(400)
    assert after.std(dim=0).min() > 0.0  # still samples, not the mean
    torch.testing.assert_close(after.mean(dim=0), reg.theta, atol=0.01, rtol=0)
    torch.testing.assert_close(reg.theta, torch.tensor([1.0, -2.0]), atol=0.02, rtol=0)


def test_thompson_model_scores_with_one_draw_per_row():
    torch.manual_seed(0)
    model = _policy("ThompsonSampling").model
    assert isinstance(model, DiscreteLinearModelThompsonSampling)
    x = torch.tensor([[1.0, -1.0]] * 50)
    scores, _ = model({"obs": x}, [], None)
    assert scores.shape == (50, 3)
    assert scores[:, 0].std() > 0.5  # the prior's spread: rows differ
    torch.testing.assert_close(model.predict(x), torch.zeros(50, 3))  # the mean


def test_the_exploration_picks_the_model():
    assert type(_policy("StochasticSampling").model) is DiscreteLinearModel
    assert isinstance(_policy("ThompsonSampling").exploration, ThompsonSampling)
    assert isinstance(_policy("UpperConfidenceBound").exploration, UpperConfidenceBound)
    items = ItemBandit.observation_space
    from corral.models.preprocessors import preprocessor_for_space

    flat = preprocessor_for_space(items).observation_space
    ts = _policy("ThompsonSampling", obs_space=items, action_space=gym.spaces.Discrete(5))
    assert isinstance(ts.model, ParametricLinearModelThompsonSampling)
    ucb = _policy("UpperConfidenceBound", obs_space=items, action_space=gym.spaces.Discrete(5))
    assert isinstance(ucb.model, ParametricLinearModelUCB)
    assert ucb.model.feature_dim == 3 and flat.shape == (15,)


def test_the_policy_needs_discrete_arms_feature_vectors_and_item_features():
    with pytest.raises(UnsupportedSpaceException, match="Discrete"):
        _policy("UpperConfidenceBound", action_space=gym.spaces.Box(-1, 1, (2,)))
    no_items = gym.spaces.Dict({"user": gym.spaces.Box(-1, 1, (3,))})
    with pytest.raises(UnsupportedSpaceException, match="'item'"):
        _policy("UpperConfidenceBound", obs_space=no_items)
    with pytest.raises(UnsupportedSpaceException, match="image"):
        _policy("ThompsonSampling", obs_space=gym.spaces.Box(0, 255, (42, 42, 3)))


# -- the policy ------------------------------------------------------------------------


def _context_batch(n=40, with_infos=True):
    rng = np.random.default_rng(0)
    contexts = rng.choice([-1.0, 1.0], size=n)
    actions = rng.integers(0, 3, n)
    rewards = np.array([TwoContextBandit.PAYOFFS[c][a] for c, a in zip(contexts, actions)])
    batch = SampleBatch(
        {
            SampleBatch.OBS: np.stack([contexts, -contexts], axis=1).astype(np.float32),
            SampleBatch.ACTIONS: actions,
            SampleBatch.REWARDS: rewards.astype(np.float32),
        }
    )
    if with_infos:
        batch[SampleBatch.INFOS] = [{"regret": 10.0 - r} for r in rewards]
    return batch, rewards


def test_learn_on_batch_fits_each_pulled_arm_and_sums_the_regret():
    policy = _policy("UpperConfidenceBound")
    batch, rewards = _context_batch()
    info = policy.learn_on_batch(batch)
    assert info["learner_stats"]["cumulative_regret"] == pytest.approx(np.sum(10.0 - rewards))
    assert info["learner_stats"]["update_latency"] >= 0
    obs, actions = batch[SampleBatch.OBS], batch[SampleBatch.ACTIONS]
    for arm, regression in enumerate(policy.model.regressions()):
        x = obs[actions == arm].astype(np.float64)
        np.testing.assert_allclose(regression.precision.numpy(), np.eye(2) + x.T @ x, rtol=1e-5)
    # The greedy action is now the best arm of each context.
    actions, _, _ = policy.compute_actions(np.array([[1, -1], [-1, 1]], np.float32), explore=False)
    assert actions.tolist() == [0, 2]


def test_a_batch_without_regret_trains_without_the_metric():
    policy = _policy("ThompsonSampling")
    batch, _ = _context_batch(with_infos=False)
    info = policy.learn_on_batch(batch)
    assert "cumulative_regret" not in info["learner_stats"]
    assert policy.model.regressions()[0].precision.trace() > 2.0


def test_the_overrides_bring_learn_on_batch_to_a_policy_of_ones_own():
    # RLlib 1.13 mixed `BanditPolicyOverrides` into its bandit policies; a policy of one's
    # own with the bandit model gets the update and the regret from it.
    class BanditModelPolicy(TorchPolicy):
        make_model = BanditTorchPolicy.make_model
        make_optimizer = BanditTorchPolicy.make_optimizer

        def __init__(self, observation_space, action_space, config):
            super().__init__(observation_space, action_space, config)
            init_cum_regret(self)

    class OwnBanditPolicy(BanditPolicyOverrides, BanditModelPolicy):
        pass

    assert BanditTorchPolicy.learn_on_batch is BanditPolicyOverrides.learn_on_batch
    config = {**DEFAULT_CONFIG, "exploration_config": {"type": "UpperConfidenceBound"}}
    policy = OwnBanditPolicy(TwoContextBandit.observation_space, gym.spaces.Discrete(3), config)
    batch, rewards = _context_batch()
    stats = policy.learn_on_batch(batch)["learner_stats"]
    assert stats["cumulative_regret"] == pytest.approx(np.sum(10.0 - rewards))
    x = batch[SampleBatch.OBS][batch[SampleBatch.ACTIONS] == 1].astype(np.float64)
    precision = policy.model.regressions()[1].precision.numpy()
    np.testing.assert_allclose(precision, np.eye(2) + x.T @ x, rtol=1e-5)


def test_postprocessing_reads_the_episode_regret():
    class Episode:
        def last_info_for(self, agent_id=None):
            return {"regret": 2.5}

    policy = _policy("UpperConfidenceBound")
    batch, _ = _context_batch(n=1, with_infos=False)
    assert policy.postprocess_trajectory(batch, None, Episode())[REGRET].tolist() == [2.5]
    assert REGRET not in policy.postprocess_trajectory(_context_batch(1, False)[0], None, None)


# -- the trainers ----------------------------------------------------------------------


def test_defaults_are_rllib_1_13s():
    for name, exploration in (
        ("BanditLinUCB", "UpperConfidenceBound"),
        ("BanditLinTS", "ThompsonSampling"),
    ):
        config = get_trainer_class(name).get_default_config()
        assert config["exploration_config"] == {"type": exploration}
        assert config["rollout_fragment_length"] == 1
        assert config["train_batch_size"] == 1
        assert config["timesteps_per_iteration"] == 100
        assert config["num_workers"] == 0


@pytest.mark.parametrize("trainer_class", [BanditLinUCBTrainer, BanditLinTSTrainer])
def test_trainer_learns_a_two_context_bandit(trainer_class):
    trainer = trainer_class(config={**QUIET, "model": {"alpha": 0.5}}, env=TwoContextBandit)
    try:
        for _ in range(3):
            result = trainer.train()
        assert result["timesteps_total"] == 300
        assert result["episodes_total"] == 300
        stats = result["info"]["learner"]["default_policy"]["learner_stats"]
        # Every step's regret, summed: at most 20 per step, and the bandit learned.
        assert 0 < stats["cumulative_regret"] < 20 * 300 / 4
        obs = [np.array([1.0, -1.0], np.float32), np.array([-1.0, 1.0], np.float32)]
        greedy = [trainer.compute_single_action(o, explore=False) for o in obs]
        assert greedy == [0, 2]
        assert trainer.get_policy().model.model_config["alpha"] == 0.5
    finally:
        trainer.stop()


def test_trainer_with_item_features_and_a_remote_worker():
    trainer = BanditLinUCBTrainer(config={**QUIET, "num_workers": 1}, env=ItemBandit)
    try:
        for _ in range(3):
            trainer.train()
        theta = trainer.get_policy().model.arm.theta
        torch.testing.assert_close(
            theta, torch.tensor(ItemBandit.THETA, dtype=torch.float32), atol=0.01, rtol=0
        )
        # The worker acts with the driver's statistics.
        remote = trainer.workers.remote_workers()[0]
        weights = remote.call("get_weights").result(timeout=30)
        np.testing.assert_array_equal(weights["default_policy"]["arm.theta"], theta.numpy())
    finally:
        trainer.stop()


def test_checkpoint_round_trips_the_statistics(tmp_path):
    trainer = BanditLinTSTrainer(config=QUIET, env=TwoContextBandit)
    restored = BanditLinTSTrainer(config=QUIET, env=TwoContextBandit)
    try:
        trainer.train()
        path = trainer.save(str(tmp_path))
        folder = path if os.path.isdir(path) else os.path.dirname(path)
        files = [f for _, _, names in os.walk(folder) for f in names]
        assert "weights.safetensors" in files
        assert not [f for f in files if f.endswith((".pkl", ".pickle"))]
        restored.restore(path)
        before = trainer.get_policy().model.state_dict()
        after = restored.get_policy().model.state_dict()
        assert set(before) == {
            f"arms.{i}.{k}" for i in range(3) for k in ("precision", "f", "covariance", "theta")
        }
        for name, value in before.items():
            torch.testing.assert_close(after[name], value, rtol=0, atol=0)
        assert restored.get_policy().cumulative_regret == trainer.get_policy().cumulative_regret
        # Training goes on from the restored statistics.
        pulls = float(after["arms.0.precision"].trace())
        restored.train()
        assert (
            sum(
                float(restored.get_policy().model.state_dict()[f"arms.{i}.precision"].trace())
                for i in range(3)
            )
            > pulls
        )
    finally:
        trainer.stop()
        restored.stop()


def test_data_parallel_learners_are_refused():
    with pytest.raises(ValueError, match="num_learners"):
        BanditLinUCBTrainer(config={**QUIET, "num_learners": 2}, env=TwoContextBandit)


def test_unknown_model_keys_are_still_typos():
    with pytest.raises(ValueError, match="alpah"):
        BanditLinUCBTrainer(config={**QUIET, "model": {"alpah": 1.0}}, env=TwoContextBandit)
