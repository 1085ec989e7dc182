"""Off-policy estimators on synthetic batches whose answers are known by hand."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.offline.estimators import (
    DirectMethod,
    DoublyRobust,
    ImportanceSampling,
    OffPolicyEstimate,
    WeightedImportanceSampling,
    action_log_likelihood,
    make_estimators,
    summarize_estimates,
)
from corral.offline.estimators.runner import check_input_evaluation
from corral.policy.policy import Policy
from corral.policy.sample_batch import SampleBatch


@pytest.fixture(autouse=True)
def _one_torch_thread():
    """Small nets train faster on one thread (and do not fight other processes for cores)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


class TablePolicy(Policy):
    """Two actions; pi(a=1 | s) = p1[s] for an integer state stored as obs[0]."""

    def __init__(self, p1: list[float]) -> None:
        super().__init__(
            gym.spaces.Box(-np.inf, np.inf, (1,), np.float32), gym.spaces.Discrete(2), {}
        )
        self.p1 = np.asarray(p1, np.float64)

    def compute_log_likelihoods(self, actions, obs_batch):
        p = self.p1[np.asarray(obs_batch)[:, 0].astype(int)]
        return np.log(np.where(np.asarray(actions) == 1, p, 1.0 - p))

    def compute_actions(self, obs_batch, *args, **kwargs):
        raise NotImplementedError


def episode(states, actions, rewards, mu_probs, eps_id=0, **extra) -> SampleBatch:
    n = len(states)
    obs = np.asarray(states, np.float32).reshape(n, 1)
    next_obs = np.concatenate([obs[1:], obs[-1:]])
    terminated = np.zeros(n, bool)
    terminated[-1] = True
    return SampleBatch(
        {
            SampleBatch.OBS: obs,
            SampleBatch.NEXT_OBS: next_obs,
            SampleBatch.ACTIONS: np.asarray(actions, np.int64),
            SampleBatch.REWARDS: np.asarray(rewards, np.float32),
            SampleBatch.TERMINATEDS: terminated,
            SampleBatch.TRUNCATEDS: np.zeros(n, bool),
            SampleBatch.EPS_ID: np.full(n, eps_id, np.int64),
            **extra,
            SampleBatch.ACTION_PROB: np.asarray(mu_probs, np.float32),
        }
    )


def test_is_by_hand():
    # pi(a=1) = 0.8 in state 0, 0.4 in state 1.
    pi = TablePolicy([0.8, 0.4])
    batch = episode([0, 1, 0], [1, 0, 1], [1.0, 2.0, 3.0], [0.5, 0.5, 0.25])
    (est,) = ImportanceSampling(pi, gamma=0.5).estimate(batch)
    rho = [0.8 / 0.5, 0.6 / 0.5, 0.8 / 0.25]
    p = np.cumprod(rho)
    expected = 1.0 * p[0] + 0.5 * 2.0 * p[1] + 0.25 * 3.0 * p[2]
    assert est.estimator_name == "is"
    assert est.metrics["V_prev"] == pytest.approx(1.0 + 1.0 + 0.75)
    assert est.metrics["V_step_IS"] == pytest.approx(expected)
    assert est.metrics["V_gain_est"] == pytest.approx(expected / 2.75)


def test_action_logp_column_is_read_when_there_is_no_action_prob():
    pi = TablePolicy([0.8, 0.4])
    batch = episode([0, 1], [1, 1], [1.0, 1.0], [0.5, 0.5])
    del batch[SampleBatch.ACTION_PROB]
    batch[SampleBatch.ACTION_LOGP] = np.log(np.asarray([0.5, 0.5], np.float32))
    (est,) = ImportanceSampling(pi, gamma=1.0).estimate(batch)
    assert est.metrics["V_step_IS"] == pytest.approx(1.6 + 1.6 * 0.8, rel=1e-6)


def test_wis_normalises_by_the_running_mean_of_the_weights():
    pi = TablePolicy([0.8, 0.4])
    wis = WeightedImportanceSampling(pi, gamma=1.0)
    first = episode([0, 0], [1, 1], [1.0, 1.0], [0.5, 0.5], eps_id=1)  # rho 1.6, 1.6
    second = episode([0], [0], [1.0], [0.5], eps_id=2)  # rho 0.4
    est1, est2 = wis.estimate(SampleBatch.concat_samples([first, second]))
    # First episode alone: w_t = p_t, so each step counts with weight 1.
    assert est1.metrics["V_step_WIS"] == pytest.approx(2.0)
    # Second: w_0 = mean(1.6, 0.4) = 1.0 -> p_0 / w_0 = 0.4.
    assert est2.metrics["V_step_WIS"] == pytest.approx(0.4)
    assert est2.estimator_name == "wis"


def test_same_policy_gives_the_logged_return():
    pi = TablePolicy([0.7, 0.2])
    batch = episode([0, 1, 1, 0], [1, 0, 1, 0], [1.0, 0.0, 2.0, 1.0], [0.7, 0.8, 0.2, 0.3])
    for cls, key in [(ImportanceSampling, "V_step_IS"), (WeightedImportanceSampling, "V_step_WIS")]:
        (est,) = cls(pi, gamma=0.9).estimate(batch)
        assert est.metrics[key] == pytest.approx(est.metrics["V_prev"], rel=1e-6)


def bandit_batch(n: int, mu1: float, seed: int = 0) -> SampleBatch:
    """One-step episodes: state 0; action 1 pays 1, action 0 pays 0."""
    rng = np.random.default_rng(seed)
    actions = (rng.random(n) < mu1).astype(np.int64)
    return SampleBatch(
        {
            SampleBatch.OBS: np.zeros((n, 1), np.float32),
            SampleBatch.NEXT_OBS: np.zeros((n, 1), np.float32),
            SampleBatch.ACTIONS: actions,
            SampleBatch.REWARDS: actions.astype(np.float32),
            SampleBatch.TERMINATEDS: np.ones(n, bool),
            SampleBatch.TRUNCATEDS: np.zeros(n, bool),
            SampleBatch.EPS_ID: np.arange(n),
            SampleBatch.ACTION_PROB: np.where(actions == 1, mu1, 1 - mu1).astype(np.float32),
        }
    )


def test_dm_and_dr_on_a_bandit_find_the_target_value():
    # Target takes action 1 with 0.9 -> V = 0.9; behaviour with 0.3 (V_prev ~ 0.3).
    pi = TablePolicy([0.9])
    batch = bandit_batch(2000, 0.3)
    q_model = {"n_iters": 5, "sgd_steps_per_iter": 200, "minibatch_size": 128, "seed": 0}
    dm = DirectMethod(pi, gamma=0.99, q_model_config=q_model)
    dm.process(batch)
    estimates = dm.get_metrics()
    assert len(estimates) == 2000 and dm.get_metrics() == []
    summary = summarize_estimates(estimates)["dm"]
    assert summary["V_DM"] == pytest.approx(0.9, abs=0.03)
    assert summary["V_prev"] == pytest.approx(0.3, abs=0.05)
    # The fitted Q values are the mean rewards per action: 0 and 1.
    q = dm.model.estimate_q(np.zeros((2, 1), np.float32), np.array([0, 1]))
    np.testing.assert_allclose(q, [0.0, 1.0], atol=0.03)

    dr = DoublyRobust(pi, gamma=0.99, q_model_config=q_model)
    dr.process(batch)
    assert summarize_estimates(dr.get_metrics())["dr"]["V_DR"] == pytest.approx(0.9, abs=0.03)


def test_dr_with_a_wrong_model_is_rescued_by_the_ratios():
    # An untrained-looking model (Q = 0 everywhere): DR reduces to IS, unbiased.
    pi = TablePolicy([0.9])
    batch = bandit_batch(4000, 0.3, seed=1)
    dr = DoublyRobust(pi, gamma=1.0, q_model_config={"n_iters": 1, "seed": 0})
    dr.model.train(batch.slice(0, 1))
    for p in dr.model.q.parameters():
        p.data.zero_()
    is_mean = np.mean([e.metrics["V_step_IS"] for e in ImportanceSampling(pi, 1.0).estimate(batch)])
    dr_mean = np.mean([e.metrics["V_DR"] for e in dr.estimate(batch)])
    assert dr_mean == pytest.approx(is_mean, rel=1e-6)
    assert is_mean == pytest.approx(0.9, abs=0.06)


def test_summary_averages_each_metric_per_estimator():
    estimates = [
        OffPolicyEstimate("is", {"V_prev": 1.0, "V_step_IS": 2.0}),
        OffPolicyEstimate("is", {"V_prev": 3.0, "V_step_IS": 4.0}),
        OffPolicyEstimate("wis", {"V_prev": 1.0, "V_step_WIS": 5.0}),
    ]
    assert summarize_estimates(estimates) == {
        "is": {"V_prev": 2.0, "V_step_IS": 3.0},
        "wis": {"V_prev": 1.0, "V_step_WIS": 5.0},
    }


def test_batch_without_behaviour_probabilities_is_refused():
    batch = episode([0], [1], [1.0], [0.5])
    del batch[SampleBatch.ACTION_PROB]
    with pytest.raises(ValueError, match="action_prob"):
        ImportanceSampling(TablePolicy([0.5]), 0.9).estimate(batch)


def test_unknown_method_and_bad_gamma_are_refused():
    with pytest.raises(ValueError, match="'iss'"):
        check_input_evaluation(["is", "iss"])
    with pytest.raises(ValueError, match="gamma"):
        ImportanceSampling(TablePolicy([0.5]), 1.5)


class _Worker:
    def __init__(self, config, policy):
        self.config = config
        self._policy = policy

    def get_policy(self):
        return self._policy


def test_make_estimators_from_the_config():
    pi = TablePolicy([0.5])
    pi.config = {"gamma": 0.5}
    worker = _Worker({"input": "/data", "input_evaluation": ["is", "simulation", "dr"]}, pi)
    estimators = make_estimators(worker)
    assert [type(e) for e in estimators] == [ImportanceSampling, DoublyRobust]
    assert estimators[0].gamma == 0.5
    # Sampling the env: nothing to estimate.
    assert make_estimators(_Worker({"input": "sampler", "input_evaluation": ["is"]}, pi)) == []


def test_torch_policy_log_likelihoods_match_its_distribution():
    from corral.agents.pg import PGTorchPolicy
    from corral.agents.pg.pg import DEFAULT_CONFIG

    obs_space = gym.spaces.Box(-1, 1, (3,), np.float32)
    policy = PGTorchPolicy(obs_space, gym.spaces.Discrete(3), dict(DEFAULT_CONFIG))
    obs = np.random.default_rng(0).uniform(-1, 1, (5, 3)).astype(np.float32)
    actions = np.array([0, 1, 2, 1, 0])
    _, extra = policy.compute_actions_from_obs(obs, explore=True)
    logits = extra[SampleBatch.ACTION_DIST_INPUTS]
    log_softmax = logits - np.log(np.exp(logits).sum(1, keepdims=True))
    np.testing.assert_allclose(
        action_log_likelihood(policy, obs, actions), log_softmax[np.arange(5), actions], rtol=1e-5
    )
