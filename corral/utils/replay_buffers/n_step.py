"""n-step returns for off-policy TD learning (Sutton 1988; Mnih et al. 2016 sec. 4).

Row t of a trajectory becomes the transition (s_t, a_t, R_t, s_{t+k}) with
R_t = sum_{j<k} gamma^j r_{t+j} and k = min(n, steps left in the trajectory
within this batch): the sum stops at an episode end (the reward after a
terminal state is 0) and at the end of the sampled fragment (no rewards are
known beyond it). The target is then R_t + gamma^k (1 - terminated) Q(s_{t+k}),
so k is stored per row in the `n_step` column.
"""

from __future__ import annotations

import numpy as np

from corral.policy.sample_batch import SampleBatch

# Number of rewards summed into each row's n-step return (the bootstrap is
# discounted by gamma ** n_step).
N_STEP = "n_step"


def adjust_nstep(n_step: int, gamma: float, batch: SampleBatch) -> SampleBatch:
    """Rewrites `rewards`, `new_obs`, `terminateds` (and `truncateds`, `dones`) in place.

    The batch may hold several trajectories, told apart by `eps_id` (rows of
    one trajectory contiguous and in time order). Adds the `n_step` column.

    Raises:
        AssertionError: a trajectory is done before its last row (RLlib 1.13's error:
            "Unexpected done in middle of trajectory!"), e.g. a batch of several
            episodes without an `eps_id` column.
    """
    if n_step < 1:
        raise ValueError(f"n_step must be >= 1, got {n_step}.")
    count = batch.count
    rows = np.arange(count)
    if SampleBatch.EPS_ID in batch and count:
        eps = batch[SampleBatch.EPS_ID]
        ends = np.flatnonzero(np.append(eps[1:] != eps[:-1], True)) + 1
        # Exclusive end of the trajectory of each row.
        run_end = np.repeat(ends, np.diff(np.append(0, ends)))
    else:
        run_end = np.full(count, count)
    _check_done_only_at_ends(batch, run_end)
    k = np.minimum(n_step, run_end - rows)
    rewards = batch[SampleBatch.REWARDS]
    returns = np.zeros(count, np.float64)
    for j in range(n_step):
        valid = j < k
        returns[valid] += gamma**j * rewards[rows[valid] + j]
    last = rows + k - 1
    batch[SampleBatch.REWARDS] = returns.astype(rewards.dtype)
    for column in (
        SampleBatch.NEXT_OBS,
        SampleBatch.TERMINATEDS,
        SampleBatch.TRUNCATEDS,
        SampleBatch.DONES,
    ):
        if column in batch:
            batch[column] = batch[column][last]
    batch[N_STEP] = k.astype(np.int32)
    return batch


def _check_done_only_at_ends(batch: SampleBatch, run_end: np.ndarray) -> None:
    """Raises when a row before the last of its trajectory is done (terminated or
    truncated): its n-step return would run into the next episode."""
    done = None
    for column in (SampleBatch.DONES, SampleBatch.TERMINATEDS, SampleBatch.TRUNCATEDS):
        if column in batch:
            flags = np.asarray(batch[column], bool)
            done = flags if done is None else done | flags
    if done is None or not len(done):
        return
    middle = np.flatnonzero(done & (np.arange(len(done)) < run_end - 1))
    if len(middle):
        row = int(middle[0])
        # (RLlib 1.13 asserted this: its callers catch AssertionError.)
        raise AssertionError(
            f"Unexpected done in middle of trajectory! Row {row} is done, but its trajectory "
            f"goes on to row {int(run_end[row]) - 1}; adjust_nstep needs one episode per "
            "trajectory (several told apart by an eps_id column), done only in its last row."
        )
