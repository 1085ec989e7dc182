"""Step-wise importance sampling and its weighted form (Precup et al. 2000).

With rho_t = pi(a_t | s_t) / mu(a_t | s_t) and the cumulative ratio p_t = rho_0 ... rho_t,

- `ImportanceSampling` ("is"):  V_step_IS = sum_t gamma^t p_t r_t, unbiased;
- `WeightedImportanceSampling` ("wis"): V_step_WIS = sum_t gamma^t (p_t / w_t) r_t, where w_t
  is the mean of p_t over every episode seen so far that reached step t (RLlib 1.x's running
  normaliser): biased, consistent, far lower variance.

Both report `V_prev` (the logged discounted return, the behaviour policy's) and
`V_gain_est` (the estimate over `V_prev`), as RLlib 1.x did.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from corral.offline.estimators.off_policy_estimator import OffPolicyEstimate, OffPolicyEstimator
from corral.policy.sample_batch import SampleBatch


def _gain(estimate: float, v_prev: float) -> float:
    # RLlib 1.x's ratio, with its floor on the denominator.
    return estimate / max(1e-8, v_prev)


class ImportanceSampling(OffPolicyEstimator):
    """The step-wise importance-sampling estimate of each episode ("is")."""

    name = "is"

    def estimate_episode(self, episode: SampleBatch) -> OffPolicyEstimate:
        rewards = np.asarray(episode[SampleBatch.REWARDS], np.float64)
        p = np.cumprod(self.importance_ratios(episode))
        discounts = self.discounts(len(rewards))
        v_prev = float(np.sum(discounts * rewards))
        v_is = float(np.sum(discounts * p * rewards))
        return OffPolicyEstimate(
            self.name, {"V_prev": v_prev, "V_step_IS": v_is, "V_gain_est": _gain(v_is, v_prev)}
        )


class WeightedImportanceSampling(OffPolicyEstimator):
    """The step-wise weighted importance-sampling estimate of each episode ("wis").

    The normaliser w_t is a running mean over all episodes this estimator has processed,
    so early estimates are noisier than later ones (as in RLlib 1.x).
    """

    name = "wis"

    def __init__(self, policy: Any, gamma: float, name: str | None = None) -> None:
        super().__init__(policy, gamma, name)
        # Per step t: the sum of p_t over the episodes that reached t, and their number.
        self.filter_values = np.zeros(0, np.float64)
        self.filter_counts = np.zeros(0, np.float64)

    def _update_normaliser(self, p: np.ndarray) -> np.ndarray:
        n = len(p)
        if n > len(self.filter_values):
            grow = n - len(self.filter_values)
            self.filter_values = np.concatenate([self.filter_values, np.zeros(grow)])
            self.filter_counts = np.concatenate([self.filter_counts, np.zeros(grow)])
        self.filter_values[:n] += p
        self.filter_counts[:n] += 1.0
        return self.filter_values[:n] / self.filter_counts[:n]

    def estimate_episode(self, episode: SampleBatch) -> OffPolicyEstimate:
        rewards = np.asarray(episode[SampleBatch.REWARDS], np.float64)
        p = np.cumprod(self.importance_ratios(episode))
        w = self._update_normaliser(p)
        discounts = self.discounts(len(rewards))
        v_prev = float(np.sum(discounts * rewards))
        # A step where every episode so far had weight 0 contributes nothing.
        with np.errstate(divide="ignore", invalid="ignore"):
            weighted = np.where(w > 0, p / w, 0.0)
        v_wis = float(np.sum(discounts * weighted * rewards))
        return OffPolicyEstimate(
            self.name, {"V_prev": v_prev, "V_step_WIS": v_wis, "V_gain_est": _gain(v_wis, v_prev)}
        )
