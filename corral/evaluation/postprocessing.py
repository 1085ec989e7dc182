"""Postprocessing of sampled trajectories: advantages and value targets.

`compute_advantages` is the batched form of RLlib 1.x's function of the same
name (GAE, Schulman et al. 2016, arXiv:1506.02438, or discounted returns);
`compute_gae_for_sample_batch` applies it with a policy's config, as PPO's and
A2C's `postprocess_trajectory` do.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from corral.policy.sample_batch import SampleBatch


class Postprocessing:
    """Names of the columns postprocessing adds (RLlib's `Postprocessing` constants)."""

    ADVANTAGES = "advantages"
    VALUE_TARGETS = "value_targets"


def discount_cumsum(x: np.ndarray, gamma: float) -> np.ndarray:
    """y[t] = x[t] + gamma * y[t+1] (the discounted sum of `x` from each step on)."""
    x = np.asarray(x)
    out = np.empty(x.shape, np.result_type(x.dtype, np.float32))
    acc = np.zeros(x.shape[1:], out.dtype)
    for t in range(len(x) - 1, -1, -1):
        acc = x[t] + gamma * acc
        out[t] = acc
    return out


def compute_gae_for_sample_batch(
    policy: Any,
    sample_batch: SampleBatch,
    other_agent_batches: dict | None = None,
    episode: Any = None,
) -> SampleBatch:
    """`compute_advantages` with the policy's `gamma`, `lambda`, `use_gae`, `use_critic`
    (RLlib 1.13's postprocessing function's signature: `other_agent_batches` and
    `episode` are not read)."""
    cfg = policy.config
    return compute_advantages(
        sample_batch,
        policy,
        gamma=cfg["gamma"],
        lambda_=cfg["lambda"],
        use_gae=cfg["use_gae"],
        use_critic=cfg["use_critic"],
    )


def compute_advantages(
    rollout: SampleBatch,
    last_r: Any,
    gamma: float = 0.9,
    lambda_: float = 1.0,
    use_gae: bool = True,
    use_critic: bool = True,
) -> SampleBatch:
    """Adds `advantages` and `value_targets` to a batch of one or more trajectories
    (RLlib 1.13's signature and defaults).

    Args:
        rollout: the batch.
        last_r: RLlib's number: the value after the last step of ONE trajectory (0.0
            when it ended; see `_compute_advantages_last_r`). Or a policy, corral's form:
            trajectories are then runs of equal `eps_id`, and where one ends without
            being terminated (truncation, horizon, fragment cut) its return is
            bootstrapped with the policy's V(new_obs) of its last step, computed for
            all such ends in one pass (`policy.bootstrap_values`).
        gamma: the discount.
        lambda_: GAE's lambda.
        use_gae: advantages by GAE (else discounted returns minus the values).
        use_critic: the batch has value predictions (`vf_preds`).
    """
    batch, policy = rollout, last_r
    if _is_number(policy):
        return _compute_advantages_last_r(batch, float(policy), gamma, lambda_, use_gae, use_critic)
    n = batch.count
    rewards = batch[SampleBatch.REWARDS].astype(np.float64)
    terminated = batch[SampleBatch.TERMINATEDS]
    eps = batch[SampleBatch.EPS_ID]
    # cont[k]: step k+1 continues the trajectory of step k (a done step never
    # does, even when an agent comes back later in the same episode).
    cont = np.zeros(n, dtype=bool)
    cont[:-1] = (eps[1:] == eps[:-1]) & ~(terminated[:-1] | batch[SampleBatch.TRUNCATEDS][:-1])
    ends = np.flatnonzero(~cont & ~terminated)
    next_values = np.zeros(n, np.float64)
    if use_critic:
        vf = batch[SampleBatch.VF_PREDS].astype(np.float64)
        next_values[:-1] = np.where(cont[:-1], vf[1:], 0.0)
        if len(ends):
            next_values[ends] = policy.bootstrap_values(batch, ends)
    else:
        vf = np.zeros(n, np.float64)

    if use_gae:
        if not use_critic:
            raise ValueError("use_gae=True requires use_critic=True (GAE needs values).")
        # delta_t = r_t + gamma V(s_t+1) - V(s_t);  A_t = delta_t + gamma lambda A_t+1.
        deltas = rewards + gamma * next_values - vf
        advantages = _discounted_scan(deltas, cont, gamma * lambda_)
        targets = advantages + vf
    else:
        # Discounted returns, bootstrapped at cut ends.
        seeds = rewards.copy()
        seeds[ends] += gamma * next_values[ends]
        returns = _discounted_scan(seeds, cont, gamma)
        advantages = returns - vf
        targets = returns
    batch[SampleBatch.ADVANTAGES] = advantages.astype(np.float32)
    batch[SampleBatch.VALUE_TARGETS] = targets.astype(np.float32)
    if not use_critic:
        batch[SampleBatch.VF_PREDS] = np.zeros(n, np.float32)
    return batch


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float, np.number)) or (
        isinstance(value, np.ndarray) and value.ndim == 0
    )


def _compute_advantages_last_r(
    rollout: SampleBatch,
    last_r: float,
    gamma: float,
    lambda_: float,
    use_gae: bool,
    use_critic: bool,
) -> SampleBatch:
    """RLlib 1.x's single-trajectory `compute_advantages`, bootstrapped with `last_r`."""
    rewards = np.asarray(rollout[SampleBatch.REWARDS], np.float64)
    if use_gae:
        if not use_critic:
            raise ValueError("use_gae=True requires use_critic=True (GAE needs values).")
        values = np.append(np.asarray(rollout[SampleBatch.VF_PREDS], np.float64), last_r)
        deltas = rewards + gamma * values[1:] - values[:-1]
        advantages = discount_cumsum(deltas, gamma * lambda_)
        targets = advantages + values[:-1]
    else:
        returns = discount_cumsum(np.append(rewards, last_r), gamma)[:-1]
        if use_critic:
            advantages = returns - np.asarray(rollout[SampleBatch.VF_PREDS], np.float64)
            targets = returns
        else:
            advantages, targets = returns, np.zeros_like(returns)
    rollout[SampleBatch.ADVANTAGES] = advantages.astype(np.float32)
    rollout[SampleBatch.VALUE_TARGETS] = targets.astype(np.float32)
    return rollout


def adjust_nstep(n_step: int, gamma: float, batch: SampleBatch) -> SampleBatch:
    """n-step returns in place (RLlib's `adjust_nstep`); see
    `corral.utils.replay_buffers.n_step.adjust_nstep`."""
    from corral.utils.replay_buffers.n_step import adjust_nstep as _adjust

    return _adjust(n_step, gamma, batch)


def _discounted_scan(x: np.ndarray, cont: np.ndarray, discount: float) -> np.ndarray:
    """y_k = x_k + discount * y_k+1 within a trajectory (cont[k] links k to k+1)."""
    out = np.empty_like(x)
    xs, cs = x.tolist(), cont.tolist()
    acc = 0.0
    for k in range(len(xs) - 1, -1, -1):
        acc = xs[k] + (discount * acc if cs[k] else 0.0)
        out[k] = acc
    return out
