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


def compute_gae_for_sample_batch(policy: Any, sample_batch: SampleBatch) -> SampleBatch:
    """`compute_advantages` with the policy's `gamma`, `lambda`, `use_gae`, `use_critic`."""
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
    batch: SampleBatch,
    policy: Any,
    gamma: float,
    lambda_: float = 1.0,
    use_gae: bool = True,
    use_critic: bool = True,
) -> SampleBatch:
    """Adds `advantages` and `value_targets` to a batch of one or more trajectories.

    Trajectories are runs of equal `eps_id`. Where one ends without being
    terminated (truncation, horizon, fragment cut), the return is bootstrapped
    with V(new_obs) of its last step, computed for all such ends in one pass.
    """
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


def _discounted_scan(x: np.ndarray, cont: np.ndarray, discount: float) -> np.ndarray:
    """y_k = x_k + discount * y_k+1 within a trajectory (cont[k] links k to k+1)."""
    out = np.empty_like(x)
    xs, cs = x.tolist(), cont.tolist()
    acc = 0.0
    for k in range(len(xs) - 1, -1, -1):
        acc = xs[k] + (discount * acc if cs[k] else 0.0)
        out[k] = acc
    return out
