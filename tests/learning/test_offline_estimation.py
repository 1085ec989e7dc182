"""Off-policy estimates of a known policy's return, from another policy's data, against the
return the policy really gets (measured by simulation).

The env is a ten-step contextual task: each step shows one of four contexts (one-hot) and
the time left; the right action is the context's parity and pays 1. The target policy is
right with probability 0.9, the behaviour policy that logged the data with 0.6, so the
logged return is a third below the target's and an estimator must correct for it.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
import torch

from corral.offline.estimators import (
    DirectMethod,
    DoublyRobust,
    ImportanceSampling,
    WeightedImportanceSampling,
    summarize_estimates,
)
from corral.policy.policy import Policy
from corral.policy.sample_batch import SampleBatch

HORIZON = 10
GAMMA = 0.99
OBS_SPACE = gym.spaces.Box(0.0, 1.0, (5,), np.float32)


class ParityPolicy(Policy):
    """Takes the context's parity with probability `p_right`, the other action otherwise."""

    def __init__(self, p_right: float) -> None:
        super().__init__(OBS_SPACE, gym.spaces.Discrete(2), {"gamma": GAMMA})
        self.p_right = p_right

    @staticmethod
    def right_action(obs: np.ndarray) -> np.ndarray:
        return np.argmax(obs[:, :4], axis=1) % 2

    def compute_log_likelihoods(self, actions, obs_batch):
        right = np.asarray(actions) == self.right_action(np.asarray(obs_batch))
        return np.log(np.where(right, self.p_right, 1.0 - self.p_right))

    def compute_actions(self, obs_batch, *args, **kwargs):
        raise NotImplementedError  # acting goes through `rollouts` below


def rollouts(p_right: float, episodes: int, seed: int) -> SampleBatch:
    """`episodes` episodes of the parity policy, as a logged batch (with action_prob)."""
    rng = np.random.default_rng(seed)
    n = episodes * HORIZON
    contexts = rng.integers(0, 4, (episodes, HORIZON + 1))
    t = np.arange(HORIZON + 1) / HORIZON
    obs_all = np.zeros((episodes, HORIZON + 1, 5), np.float32)
    obs_all[np.arange(episodes)[:, None], np.arange(HORIZON + 1)[None, :], contexts] = 1.0
    obs_all[..., 4] = 1.0 - t
    right = contexts[:, :HORIZON] % 2
    take_right = rng.random((episodes, HORIZON)) < p_right
    actions = np.where(take_right, right, 1 - right)
    terminated = np.zeros((episodes, HORIZON), bool)
    terminated[:, -1] = True
    return SampleBatch(
        {
            SampleBatch.OBS: obs_all[:, :HORIZON].reshape(n, 5),
            SampleBatch.NEXT_OBS: obs_all[:, 1:].reshape(n, 5),
            SampleBatch.ACTIONS: actions.reshape(n).astype(np.int64),
            SampleBatch.REWARDS: take_right.reshape(n).astype(np.float32),
            SampleBatch.TERMINATEDS: terminated.reshape(n),
            SampleBatch.TRUNCATEDS: np.zeros(n, bool),
            SampleBatch.EPS_ID: np.repeat(np.arange(episodes), HORIZON),
            SampleBatch.ACTION_PROB: np.where(take_right, p_right, 1 - p_right)
            .reshape(n)
            .astype(np.float32),
        }
    )


def discounted_return(batch: SampleBatch) -> float:
    rewards = batch[SampleBatch.REWARDS].reshape(-1, HORIZON)
    return float((rewards * GAMMA ** np.arange(HORIZON)).sum(1).mean())


@pytest.fixture
def one_torch_thread():
    """Small nets fit faster on one thread (and do not fight other processes for cores)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.mark.learning
@pytest.mark.usefixtures("one_torch_thread")
def test_is_wis_dm_dr_are_within_ten_percent_of_the_simulated_return():
    target = ParityPolicy(0.9)
    true_value = discounted_return(rollouts(0.9, 5000, seed=1))  # simulation
    logged = rollouts(0.6, 2000, seed=2)  # the behaviour policy's data
    behaviour_value = discounted_return(logged)
    estimates = {}
    for cls, key in [
        (ImportanceSampling, "V_step_IS"),
        (WeightedImportanceSampling, "V_step_WIS"),
        (DirectMethod, "V_DM"),
        (DoublyRobust, "V_DR"),
    ]:
        # FQE: 12 target refreshes, each one pass over the 20,000 rows.
        q_model = {"n_iters": 12, "minibatch_size": 512, "lr": 3e-3, "seed": 0}
        is_dm = issubclass(cls, DirectMethod)
        estimator = cls(target, GAMMA, q_model_config=q_model) if is_dm else cls(target, GAMMA)
        estimator.process(logged)
        summary = summarize_estimates(estimator.get_metrics())[estimator.name]
        estimates[estimator.name] = summary[key]
        assert summary["V_prev"] == pytest.approx(behaviour_value)
    errors = {k: v / true_value - 1.0 for k, v in estimates.items()}
    print(
        f"true (simulated) {true_value:.3f}, logged {behaviour_value:.3f}, estimates "
        + ", ".join(f"{k} {v:.3f} ({errors[k]:+.1%})" for k, v in estimates.items())
    )
    # The logged return is far off: the estimators have something to correct.
    assert behaviour_value < 0.75 * true_value
    for name, error in errors.items():
        assert abs(error) < 0.10, f"{name}: {estimates[name]:.3f} vs {true_value:.3f}"
