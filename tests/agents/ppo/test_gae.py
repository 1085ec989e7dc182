"""GAE and discounted returns against hand computations."""

import numpy as np
import pytest

from corral.agents.ppo.ppo_torch_policy import compute_advantages
from corral.policy.sample_batch import SampleBatch


class ConstantValuePolicy:
    """value(new_obs) = 10 for every observation (the bootstrap value)."""

    def bootstrap_values(self, batch, rows):
        return np.full(len(rows), 10.0, np.float32)


def batch(rewards, vf, eps, terminated):
    n = len(rewards)
    return SampleBatch(
        {
            SampleBatch.REWARDS: np.array(rewards, np.float32),
            SampleBatch.VF_PREDS: np.array(vf, np.float32),
            SampleBatch.EPS_ID: np.array(eps),
            SampleBatch.TERMINATEDS: np.array(terminated, bool),
            SampleBatch.TRUNCATEDS: np.zeros(n, bool),
            SampleBatch.NEXT_OBS: np.zeros((n, 2), np.float32),
        }
    )


def gae_by_hand(rewards, vf, last_value, gamma, lam):
    values = list(vf) + [last_value]
    adv, acc = [], 0.0
    for t in reversed(range(len(rewards))):
        delta = rewards[t] + gamma * values[t + 1] - values[t]
        acc = delta + gamma * lam * acc
        adv.insert(0, acc)
    return np.array(adv)


def test_gae_two_trajectories_terminated_and_cut():
    gamma, lam = 0.9, 0.8
    # Episode 1 terminates after 3 steps; episode 2 is cut after 2 steps.
    b = batch([1, 2, 3, 4, 5], [0.5, 1.0, 1.5, 2.0, 2.5], [1, 1, 1, 2, 2], [0, 0, 1, 0, 0])
    out = compute_advantages(b, ConstantValuePolicy(), gamma, lam)
    expected = np.concatenate(
        [
            gae_by_hand([1, 2, 3], [0.5, 1.0, 1.5], 0.0, gamma, lam),
            gae_by_hand([4, 5], [2.0, 2.5], 10.0, gamma, lam),
        ]
    )
    np.testing.assert_allclose(out[SampleBatch.ADVANTAGES], expected, rtol=1e-5)
    np.testing.assert_allclose(
        out[SampleBatch.VALUE_TARGETS], expected + np.array([0.5, 1.0, 1.5, 2.0, 2.5]), rtol=1e-5
    )


def test_discounted_returns_without_gae():
    gamma = 0.5
    b = batch([1, 1, 1], [0, 0, 0], [3, 3, 3], [0, 0, 0])
    out = compute_advantages(b, ConstantValuePolicy(), gamma, use_gae=False)
    # Cut trajectory: bootstrapped with V = 10 after the last step.
    expected = [1 + 0.5 * (1 + 0.5 * (1 + 0.5 * 10)), 1 + 0.5 * (1 + 0.5 * 10), 1 + 0.5 * 10]
    np.testing.assert_allclose(out[SampleBatch.VALUE_TARGETS], expected, rtol=1e-6)


def test_gae_requires_critic():
    b = batch([1], [0], [1], [1])
    with pytest.raises(ValueError, match="use_critic"):
        compute_advantages(b, ConstantValuePolicy(), 0.9, use_gae=True, use_critic=False)
