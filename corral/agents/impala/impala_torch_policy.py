"""IMPALA's policy: the V-trace actor-critic loss (Espeholt et al. 2018, eq. 1-4).

The loss keeps RLlib 1.13's form (`VTraceTorchPolicy`), summed over the train batch:

    -sum(log pi(a_s|x_s) A_s) + vf_loss_coeff * 0.5 * sum((V(x_s) - v_s)^2)
    - entropy_coeff * sum(H[pi(.|x_s)])

with the V-trace targets v_s and advantages A_s of `vtrace_torch` computed in the loss,
from the stored behaviour log-probabilities and the current policy.

corral's train batches hold trajectory pieces one after another (fragments of several
workers, envs and agents); `vtrace_targets` finds where each piece begins (a new
fragment, episode or agent, a gap in `t`, or after a terminal/truncated step) and
bootstraps each piece on its own: 0 after a terminal step; otherwise the value of the
piece's last step, which then only serves as the bootstrap (`vtrace_drop_last_ts=True`,
RLlib's default), or V(new_obs) of that step (`vtrace_drop_last_ts=False`). Recurrent
models (`use_lstm`) run V-trace over each padded sequence, bootstrapped from its last
step's value.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import torch

from corral.agents.impala.vtrace_torch import from_importance_weights_flat
from corral.core.learner.learner import SEQ_MASK
from corral.policy.sample_batch import SampleBatch
from corral.policy.torch_policy import (
    EntropyCoeffSchedule,
    LearningRateSchedule,
    TensorDict,
    TorchPolicy,
)
from corral.utils.torch_utils import explained_variance, loss_term, make_adam

# Column the driver adds to each sampled fragment (a number per fragment and use), so
# that two fragments laid side by side in a train batch are never taken for one piece.
UNROLL_ID = SampleBatch.UNROLL_ID


def make_optimizer_for(policy: TorchPolicy) -> torch.optim.Optimizer:
    """IMPALA's `opt_type`: Adam, or RMSProp with `decay` (its smoothing constant,
    TF's `decay` / torch's `alpha`), `momentum` and `epsilon`."""
    cfg = policy.config
    params = policy.model.parameters()
    if cfg["opt_type"] == "adam":
        return make_adam(params, lr=cfg["lr"])
    return torch.optim.RMSprop(
        params, lr=cfg["lr"], alpha=cfg["decay"], momentum=cfg["momentum"], eps=cfg["epsilon"]
    )


def piece_starts(batch: TensorDict) -> torch.Tensor:
    """True at each row that begins a trajectory piece of a flat (non-padded) batch."""
    n = batch[SampleBatch.REWARDS].shape[0]
    starts = torch.zeros(n, dtype=torch.bool)
    if n == 0:
        return starts
    starts[0] = True
    for column in (UNROLL_ID, SampleBatch.EPS_ID, SampleBatch.AGENT_INDEX):
        if column in batch:
            c = batch[column]
            starts[1:] |= c[1:] != c[:-1]
    if SampleBatch.T in batch and UNROLL_ID not in batch:
        # (Sampled pieces have unroll ids; a multi-agent row's `t` counts env steps,
        # which an agent may skip, so gaps in `t` only cut rows without them.)
        t = batch[SampleBatch.T]
        starts[1:] |= t[1:] != t[:-1] + 1
    ended = batch[SampleBatch.TERMINATEDS].bool()
    if SampleBatch.TRUNCATEDS in batch:
        ended = ended | batch[SampleBatch.TRUNCATEDS].bool()
    starts[1:] |= ended[:-1]
    return starts


def vtrace_targets(
    policy: TorchPolicy,
    batch: TensorDict,
    values: torch.Tensor,
    log_rhos: torch.Tensor,
    bootstrap_fn: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """V-trace value targets, policy-gradient advantages and the rows to train on.

    Args:
        policy: its config gives `gamma`, the clip thresholds and `vtrace_drop_last_ts`.
        batch: the train minibatch (flat, or padded sequences with `seq_mask`).
        values: V(x_s) of the value function trained, one per row.
        log_rhos: log(pi/mu) per row, pi the policy V-trace evaluates.
        bootstrap_fn: `fn(rows) -> V(new_obs)` at those rows (used when the last step of
            a cut piece is kept: `vtrace_drop_last_ts=False`, non-recurrent).

    Returns:
        (vs, pg_advantages, mask), each one per row; rows outside `mask` (padding, and
        the last steps that only bootstrap) have zeros and must not enter the loss.
    """
    cfg = policy.config
    n = values.shape[0]
    terminated = batch[SampleBatch.TERMINATEDS].bool()
    padded = batch.get(SEQ_MASK)
    if padded is not None:
        max_len = int(cfg["model"]["max_seq_len"])
        rows = torch.nonzero(padded).flatten()
        starts = (rows % max_len) == 0
        drop_last = True  # a recurrent V(new_obs) needs the state after the piece
    else:
        rows = torch.arange(n)
        starts = piece_starts(batch)
        drop_last = bool(cfg["vtrace_drop_last_ts"]) or bootstrap_fn is None
    if len(rows) == 0:
        zeros = values.new_zeros(n)
        return zeros, zeros, torch.zeros(n, dtype=torch.bool)
    ends = torch.ones(len(rows), dtype=torch.bool)
    ends[:-1] = starts[1:]
    piece = torch.cumsum(starts.long(), 0) - 1
    num_pieces = int(piece[-1]) + 1
    cut = ends & ~terminated[rows]
    values_d = values.detach()
    boot = values_d.new_zeros(num_pieces)
    keep = torch.ones(len(rows), dtype=torch.bool)
    if drop_last:
        boot[piece[cut]] = values_d[rows[cut]]
        keep = ~cut
    elif bool(cut.any()):
        assert bootstrap_fn is not None  # drop_last is forced without one
        boot[piece[cut]] = bootstrap_fn(rows[cut]).detach().to(values_d.dtype)
    kept = rows[keep]
    mask = torch.zeros(n, dtype=torch.bool)
    vs = values_d.new_zeros(n)
    advantages = values_d.new_zeros(n)
    if len(kept) == 0:
        return vs, advantages, mask
    kept_pieces = torch.unique_consecutive(piece[keep])
    gamma = float(cfg["gamma"])
    res = from_importance_weights_flat(
        log_rhos.detach()[kept],
        gamma * (~terminated[kept]).to(values_d.dtype),
        batch[SampleBatch.REWARDS][kept].to(values_d.dtype),
        values_d[kept],
        starts[keep],
        boot[kept_pieces],
        clip_rho_threshold=cfg["vtrace_clip_rho_threshold"],
        clip_pg_rho_threshold=cfg["vtrace_clip_pg_rho_threshold"],
    )
    vs[kept] = res.vs
    advantages[kept] = res.pg_advantages
    mask[kept] = True
    return vs, advantages, mask


def next_obs_values(model: torch.nn.Module, batch: TensorDict) -> Callable:
    """`fn(rows) -> V(new_obs[rows])` through `model`, without gradients (the bootstrap
    values of cut pieces; the caller has read the model's own outputs already)."""

    def values_at(rows: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            model({SampleBatch.OBS: batch[SampleBatch.NEXT_OBS][rows]}, [], None)
            return model.value_function()  # type: ignore[operator]

    return values_at


def vtrace_loss_terms(
    logp: torch.Tensor,
    entropy_fn: Callable[[], torch.Tensor],
    values: torch.Tensor,
    vs: torch.Tensor,
    advantages: torch.Tensor,
    weight: torch.Tensor,
    vf_loss_coeff: float,
    entropy_coeff: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """IMPALA's loss from the V-trace targets, summed over the rows weighted by `weight`
    (1 for a row to train on, 0 else), any shape.

    Args:
        logp: log pi(a_s|x_s) of the current policy.
        entropy_fn: `() -> H[pi(.|x_s)]` per row (not computed with autograd when
            `entropy_coeff` is 0).
        values: V(x_s) of the value function trained.
        vs: the V-trace value targets.
        advantages: the V-trace policy-gradient advantages.
        weight: the rows' weights.
        vf_loss_coeff: the value loss's weight.
        entropy_coeff: the entropy bonus's weight.

    Returns:
        (total, policy_loss, vf_loss, entropy): total = policy_loss + vf_loss_coeff *
        vf_loss - entropy_coeff * entropy, with policy_loss = -sum(logp A w),
        vf_loss = 0.5 sum(((V - vs) w)^2) and entropy = sum(H w).
    """
    pi_loss = -(logp * advantages * weight).sum()
    vf_loss = 0.5 * (((values - vs) * weight) ** 2).sum()
    entropy = loss_term(entropy_coeff, lambda: (entropy_fn() * weight).sum())
    total = pi_loss + vf_loss_coeff * vf_loss
    if entropy_coeff != 0.0:
        total = total - entropy_coeff * entropy
    return total, pi_loss, vf_loss, entropy


class VTraceTorchPolicy(LearningRateSchedule, EntropyCoeffSchedule, TorchPolicy):
    """IMPALA on torch: V-trace actor-critic loss, Adam or RMSProp (`opt_type`)."""

    postprocess_batched = True
    train_columns = None  # the loss reads eps_id, t, unroll_id, terminateds, ...

    @staticmethod
    def get_default_config() -> dict:
        """IMPALA's `DEFAULT_CONFIG` (for this policy under another algorithm's trainer)."""
        from corral.agents.impala.impala import DEFAULT_CONFIG

        return DEFAULT_CONFIG

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict) -> None:
        TorchPolicy.__init__(self, observation_space, action_space, config)
        LearningRateSchedule.__init__(self, config["lr"], config.get("lr_schedule"))
        EntropyCoeffSchedule.__init__(
            self, config["entropy_coeff"], config.get("entropy_coeff_schedule")
        )

    def make_optimizer(self) -> torch.optim.Optimizer:
        return make_optimizer_for(self)

    def loss(
        self, model: torch.nn.Module, dist_class: type, train_batch: TensorDict
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        cfg = self.config
        dist_inputs, values = self.forward_train(train_batch)
        dist = dist_class(dist_inputs, model)
        logp = dist.logp(train_batch[SampleBatch.ACTIONS])
        vs, advantages, mask = vtrace_targets(
            self,
            train_batch,
            values,
            logp.detach() - train_batch[SampleBatch.ACTION_LOGP],
            None if self.is_recurrent() else next_obs_values(model, train_batch),
        )
        weight = mask.to(values.dtype)
        total, pi_loss, vf_loss, entropy = vtrace_loss_terms(
            logp,
            dist.entropy,
            values,
            vs,
            advantages,
            weight,
            cfg["vf_loss_coeff"],
            self.entropy_coeff,
        )
        with torch.no_grad():
            stats = {
                "total_loss": total,
                "policy_loss": pi_loss,
                "vf_loss": vf_loss,
                "entropy": entropy / weight.sum().clamp(min=1.0),
                "entropy_coeff": self.entropy_coeff,
                "cur_lr": self.cur_lr,
                "vf_explained_var": explained_variance(vs[mask], values[mask]),
            }
        return total, stats

    def extra_state(self) -> dict[str, Any]:
        return {"entropy_coeff": self.entropy_coeff}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        self.entropy_coeff = state.get("entropy_coeff", self.entropy_coeff)
