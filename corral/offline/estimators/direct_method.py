"""The direct method and the doubly robust estimator, both on a fitted Q model (FQE).

- `DirectMethod` ("dm"): V_DM = V^pi(s_0) of each episode, read off the model alone.
- `DoublyRobust` ("dr"), step-wise (Jiang & Li 2016, eq. 10), from the last step back:

      V_DR(t) = V^pi(s_t) + rho_t (r_t + gamma V_DR(t + 1) - Q^pi(s_t, a_t)),  V_DR(T) = 0,

  unbiased when either the ratios or the model are right, with less variance than "is".

Each `process(batch)` first fits the model further on the batch (with the rows kept from
earlier batches, see `FQETorchModel.max_rows`), then estimates the batch's episodes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from corral.offline.estimators.fqe_torch_model import FQETorchModel
from corral.offline.estimators.off_policy_estimator import OffPolicyEstimate, OffPolicyEstimator
from corral.policy.sample_batch import MultiAgentBatch, SampleBatch


class DirectMethod(OffPolicyEstimator):
    """The direct-method estimate of each episode: the fitted V^pi of its first state ("dm").

    Args:
        policy: the target policy.
        gamma: the discount.
        name: the name the estimates are reported under.
        q_model_config: keyword arguments of `FQETorchModel` (hidden sizes, lr, n_iters...).
    """

    name = "dm"

    def __init__(
        self,
        policy: Any,
        gamma: float,
        name: str | None = None,
        q_model_config: dict | None = None,
    ) -> None:
        super().__init__(policy, gamma, name)
        self.model = FQETorchModel(policy, gamma, **(q_model_config or {}))
        self.last_train_stats: dict[str, float] = {}

    def process(self, batch: SampleBatch | MultiAgentBatch) -> None:
        self.check_can_estimate_for(batch)
        if isinstance(batch, MultiAgentBatch):
            batch = batch.policy_batches["default_policy"]
        self.last_train_stats = self.model.train(batch)
        self.new_estimates.extend(self.estimate(batch))

    def estimate_episode(self, episode: SampleBatch) -> OffPolicyEstimate:
        rewards = np.asarray(episode[SampleBatch.REWARDS], np.float64)
        v_prev = float(np.sum(self.discounts(len(rewards)) * rewards))
        v_dm = float(self.model.estimate_v(episode[SampleBatch.OBS][:1])[0])
        return OffPolicyEstimate(
            self.name, {"V_prev": v_prev, "V_DM": v_dm, "V_gain_est": v_dm / max(1e-8, v_prev)}
        )


class DoublyRobust(DirectMethod):
    """The step-wise doubly robust estimate of each episode ("dr")."""

    name = "dr"

    def estimate_episode(self, episode: SampleBatch) -> OffPolicyEstimate:
        rewards = np.asarray(episode[SampleBatch.REWARDS], np.float64)
        obs = episode[SampleBatch.OBS]
        rho = self.importance_ratios(episode)
        q = self.model.estimate_q(obs, episode[SampleBatch.ACTIONS])
        v = self.model.estimate_v(obs)
        v_dr = 0.0
        for t in range(len(rewards) - 1, -1, -1):
            v_dr = v[t] + rho[t] * (rewards[t] + self.gamma * v_dr - q[t])
        v_prev = float(np.sum(self.discounts(len(rewards)) * rewards))
        return OffPolicyEstimate(
            self.name,
            {"V_prev": v_prev, "V_DR": float(v_dr), "V_gain_est": float(v_dr) / max(1e-8, v_prev)},
        )
