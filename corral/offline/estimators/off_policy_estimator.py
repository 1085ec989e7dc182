"""`OffPolicyEstimator`: what a policy would earn, estimated from another policy's data.

RLlib 1.13's interface: an estimator is built for one policy and a discount, `process(batch)`
estimates every episode of an offline batch, `get_metrics()` hands over (and forgets) the
estimates made since the last call. Each estimate is an `OffPolicyEstimate`: the estimator's
name (its `input_evaluation` name) and a dict of numbers, which `train()` reports averaged
as `off_policy_estimator/<name>/<metric>` (see `corral.offline.estimators.summarize`).

The behaviour policy's probability of each logged action comes from the batch:
`action_prob`, or `exp(action_logp)` where only the log is stored (corral's samplers write
`action_logp`; RLlib's writers wrote both). The target policy's comes from
:func:`action_log_likelihood`.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import gymnasium as gym
import numpy as np
import torch

from corral.policy.sample_batch import MultiAgentBatch, SampleBatch
from corral.utils.deprecation import deprecation_warning


class OffPolicyEstimate(NamedTuple):
    """One estimate of one episode: `estimator_name` and its `metrics` (name -> number)."""

    estimator_name: str
    metrics: dict[str, float]


class OffPolicyEstimator:
    """Base class: estimates the discounted return of `policy` on batches it did not collect.

    Args:
        policy: the target policy (the one being evaluated).
        gamma: the discount of the returns estimated.
        name: the name the estimates are reported under (default: the class's `name`).
    """

    # The `input_evaluation` name of the estimator ("is", "wis", "dm", "dr").
    name = ""

    def __init__(self, policy: Any, gamma: float, name: str | None = None) -> None:
        if not 0.0 <= float(gamma) <= 1.0:
            raise ValueError(f"`gamma` of an off-policy estimator must be in [0, 1], got {gamma}")
        self.policy = policy
        self.gamma = float(gamma)
        self.name = name or self.name or type(self).__name__
        self.new_estimates: list[OffPolicyEstimate] = []

    @classmethod
    def create_from_io_context(cls, ioctx: Any) -> OffPolicyEstimator:
        """The estimator for the default policy of the worker of an `IOContext`."""
        worker = ioctx.worker
        policy = worker.get_policy()
        return cls(policy, policy.config["gamma"])

    def estimate(self, batch: SampleBatch | MultiAgentBatch) -> list[OffPolicyEstimate]:
        """One estimate per episode (run of equal `eps_id`) of `batch`."""
        self.check_can_estimate_for(batch)
        if isinstance(batch, MultiAgentBatch):
            batch = batch.policy_batches["default_policy"]
        return [self.estimate_episode(episode) for episode in batch.split_by_episode()]

    def estimate_episode(self, episode: SampleBatch) -> OffPolicyEstimate:
        """The estimate of one episode (or of the part of it the batch holds)."""
        raise NotImplementedError

    def process(self, batch: SampleBatch | MultiAgentBatch) -> None:
        """Estimates the episodes of `batch` and keeps the estimates for `get_metrics`."""
        self.new_estimates.extend(self.estimate(batch))

    def get_metrics(self) -> list[OffPolicyEstimate]:
        """The estimates made since the last call (each is handed over once)."""
        out, self.new_estimates = self.new_estimates, []
        return out

    def check_can_estimate_for(self, batch: Any) -> None:
        """Raises `ValueError` unless `batch` is single-agent with the behaviour's action
        probabilities (an off-policy estimate needs both)."""
        if isinstance(batch, MultiAgentBatch):
            if set(batch.policy_batches) != {"default_policy"}:
                raise ValueError(
                    "Off-policy estimation is not implemented for multi-agent batches "
                    f"(policies {sorted(batch.policy_batches)}); set `input_evaluation: []`."
                )
            return
        if SampleBatch.ACTION_PROB not in batch and SampleBatch.ACTION_LOGP not in batch:
            raise ValueError(
                "Off-policy estimation needs the behaviour policy's probability of each "
                f"action: the batch has neither `{SampleBatch.ACTION_PROB}` nor "
                f"`{SampleBatch.ACTION_LOGP}` (its columns: {sorted(batch)}); write the data "
                "with a policy that records them, or set `input_evaluation: []`."
            )

    def action_log_likelihood(self, batch: SampleBatch) -> np.ndarray:
        """log pi(a_t | s_t) under the target policy, for each row of `batch`."""
        return action_log_likelihood(
            self.policy, batch[SampleBatch.OBS], batch[SampleBatch.ACTIONS]
        )

    def action_prob(self, batch: SampleBatch) -> np.ndarray:
        """Deprecated in RLlib 1.13 (use `action_log_likelihood`): pi(a_t | s_t) under the
        target policy, for each row of `batch` (the probabilities, as 1.13's returned)."""
        deprecation_warning(
            old="OffPolicyEstimator.action_prob", new="action_log_likelihood", error=False
        )
        return np.exp(self.action_log_likelihood(batch))

    @classmethod
    def create(cls, ioctx: Any) -> OffPolicyEstimator:
        """Deprecated in RLlib 1.13: `create_from_io_context(ioctx)`."""
        deprecation_warning(
            old="OffPolicyEstimator.create", new="create_from_io_context", error=False
        )
        return cls.create_from_io_context(ioctx)

    def importance_ratios(self, episode: SampleBatch) -> np.ndarray:
        """rho_t = pi(a_t | s_t) / mu(a_t | s_t) for each step of an episode."""
        return np.exp(self.action_log_likelihood(episode) - behaviour_log_prob(episode))

    def discounts(self, n: int) -> np.ndarray:
        """gamma ** t for t = 0 .. n - 1."""
        return self.gamma ** np.arange(n, dtype=np.float64)


def behaviour_log_prob(batch: SampleBatch) -> np.ndarray:
    """log mu(a_t | s_t) of the logged actions: `action_logp`, else log of `action_prob`."""
    if SampleBatch.ACTION_LOGP in batch:
        return np.asarray(batch[SampleBatch.ACTION_LOGP], np.float64)
    with np.errstate(divide="ignore"):
        return np.log(np.asarray(batch[SampleBatch.ACTION_PROB], np.float64))


def action_log_likelihood(policy: Any, obs: Any, actions: Any) -> np.ndarray:
    """log pi(actions | obs) of a policy for a batch of (already preprocessed) observations:
    RLlib's `policy.compute_log_likelihoods(actions, obs_batch)` (a `TorchPolicy`'s: one
    forward pass), under the policy's own action space: actions logged by a run with
    `normalize_actions=True` are in [-1, 1].

    Raises:
        TypeError: the policy does not compute log-likelihoods.
    """
    try:
        out = policy.compute_log_likelihoods(np.asarray(actions), np.asarray(obs))
    except (AttributeError, NotImplementedError) as err:
        raise TypeError(
            f"Cannot compute action log-likelihoods of {type(policy).__name__}: it does not "
            "implement RLlib's `compute_log_likelihoods(actions, obs_batch)`."
        ) from err
    return np.asarray(out.detach().cpu() if torch.is_tensor(out) else out, np.float64)


def action_probs_all(policy: Any, obs: Any, action_space: gym.Space) -> np.ndarray:
    """pi(a | s) for every action `a` of a Discrete space: `[len(obs), n]`."""
    if not isinstance(action_space, gym.spaces.Discrete):
        raise TypeError(f"action_probs_all needs a Discrete action space, got {action_space}")
    n_rows = len(obs)
    columns = [
        action_log_likelihood(policy, obs, np.full(n_rows, a, np.int64))
        for a in range(int(action_space.n))
    ]
    return np.exp(np.stack(columns, axis=1))
