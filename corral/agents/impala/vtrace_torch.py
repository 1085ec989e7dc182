"""V-trace off-policy corrections on torch (Espeholt et al. 2018, arXiv:1802.01561, eq. 1).

The actors of an asynchronous learner sample with weights that lag the learner's: the
behaviour policy mu differs from the target policy pi. V-trace corrects the n-step value
targets and the policy-gradient advantages with truncated importance weights:

    delta_t = rho_t (r_t + gamma_t V(x_{t+1}) - V(x_t)),  rho_t = min(rho_bar, pi/mu)
    v_s - V(x_s) = delta_s + gamma_s c_s (v_{s+1} - V(x_{s+1})),  c_s = min(1, pi/mu)
    A_s = min(rho_bar_pg, pi/mu) (r_s + gamma_s v_{s+1} - V(x_s))

On-policy (pi = mu, thresholds >= 1) v_s is the n-step return bootstrapped at the end of
the rollout. The functions keep RLlib 1.13's names and time-major `[T, B, ...]` shapes;
`from_importance_weights_flat` (corral's) takes a flat batch of trajectory pieces of any
lengths, as corral's train batches are laid out.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import torch

from corral.models.torch.torch_action_dist import TorchCategorical


class VTraceReturns(NamedTuple):
    """V-trace value targets `vs` and policy-gradient advantages, both `[T, B]`."""

    vs: torch.Tensor
    pg_advantages: torch.Tensor


class VTraceFromLogitsReturns(NamedTuple):
    """`VTraceReturns` plus the log-probabilities and log importance weights used."""

    vs: torch.Tensor
    pg_advantages: torch.Tensor
    log_rhos: torch.Tensor
    behaviour_action_log_probs: Any
    target_action_log_probs: Any


def log_probs_from_logits_and_actions(
    policy_logits: torch.Tensor,
    actions: torch.Tensor,
    dist_class: type = TorchCategorical,
    model: Any = None,
) -> torch.Tensor:
    """log pi(a_t | x_t) `[T, B]` of `actions` `[T, B, ...]` under `policy_logits` `[T, B, ...]`."""
    return multi_log_probs_from_logits_and_actions([policy_logits], [actions], dist_class, model)[0]


def multi_log_probs_from_logits_and_actions(
    policy_logits: Sequence[torch.Tensor],
    actions: Sequence[torch.Tensor],
    dist_class: type,
    model: Any,
) -> list[torch.Tensor]:
    """Per action component: the `[T, B]` log-probabilities of its actions under its logits."""
    out = []
    for logits, acts in zip(policy_logits, actions):
        time_batch = tuple(acts.shape[:2])
        flat_logits = logits.reshape((-1, *logits.shape[2:]))
        flat_actions = acts.reshape((-1, *acts.shape[2:]))
        out.append(dist_class(flat_logits, model).logp(flat_actions).reshape(time_batch))
    return out


def get_log_rhos(
    target_action_log_probs: Sequence[torch.Tensor],
    behaviour_action_log_probs: Sequence[torch.Tensor],
) -> torch.Tensor:
    """log(pi/mu) of a (multi-)discrete action: the sum over its components."""
    return torch.stack(list(target_action_log_probs)).sum(0) - torch.stack(
        list(behaviour_action_log_probs)
    ).sum(0)


def from_logits(
    behaviour_policy_logits: torch.Tensor,
    target_policy_logits: torch.Tensor,
    actions: torch.Tensor,
    discounts: torch.Tensor,
    rewards: torch.Tensor,
    values: torch.Tensor,
    bootstrap_value: torch.Tensor,
    dist_class: type = TorchCategorical,
    model: Any = None,
    clip_rho_threshold: float | None = 1.0,
    clip_pg_rho_threshold: float | None = 1.0,
) -> VTraceFromLogitsReturns:
    """V-trace for a single action component, from the two policies' logits."""
    res = multi_from_logits(
        [behaviour_policy_logits],
        [target_policy_logits],
        [actions],
        discounts,
        rewards,
        values,
        bootstrap_value,
        dist_class,
        model,
        clip_rho_threshold=clip_rho_threshold,
        clip_pg_rho_threshold=clip_pg_rho_threshold,
    )
    return res._replace(
        behaviour_action_log_probs=res.behaviour_action_log_probs[0],
        target_action_log_probs=res.target_action_log_probs[0],
    )


def multi_from_logits(
    behaviour_policy_logits: Sequence[torch.Tensor],
    target_policy_logits: Sequence[torch.Tensor],
    actions: Sequence[torch.Tensor],
    discounts: torch.Tensor,
    rewards: torch.Tensor,
    values: torch.Tensor,
    bootstrap_value: torch.Tensor,
    dist_class: type,
    model: Any,
    behaviour_action_log_probs: Sequence[torch.Tensor] | None = None,
    clip_rho_threshold: float | None = 1.0,
    clip_pg_rho_threshold: float | None = 1.0,
) -> VTraceFromLogitsReturns:
    """V-trace for (multi-)discrete actions from the behaviour and target logits.

    `behaviour_action_log_probs`, when given, are used instead of recomputing mu's
    log-probabilities from its logits (the sampler stored them).
    """
    target_logp = multi_log_probs_from_logits_and_actions(
        target_policy_logits, actions, dist_class, model
    )
    if behaviour_action_log_probs is None:
        behaviour_logp = multi_log_probs_from_logits_and_actions(
            behaviour_policy_logits, actions, dist_class, model
        )
    else:
        behaviour_logp = list(behaviour_action_log_probs)
    log_rhos = get_log_rhos(target_logp, behaviour_logp)
    res = from_importance_weights(
        log_rhos,
        discounts,
        rewards,
        values,
        bootstrap_value,
        clip_rho_threshold=clip_rho_threshold,
        clip_pg_rho_threshold=clip_pg_rho_threshold,
    )
    return VTraceFromLogitsReturns(
        vs=res.vs,
        pg_advantages=res.pg_advantages,
        log_rhos=log_rhos,
        behaviour_action_log_probs=behaviour_logp,
        target_action_log_probs=target_logp,
    )


def from_importance_weights(
    log_rhos: torch.Tensor,
    discounts: torch.Tensor,
    rewards: torch.Tensor,
    values: torch.Tensor,
    bootstrap_value: torch.Tensor,
    clip_rho_threshold: float | None = 1.0,
    clip_pg_rho_threshold: float | None = 1.0,
) -> VTraceReturns:
    """V-trace targets from log importance weights log(pi(a_t|x_t) / mu(a_t|x_t)).

    Args:
        log_rhos: `[T, B]` log importance weights.
        discounts: `[T, B]` discount after each step (0 after an episode's last step).
        rewards: `[T, B]` rewards.
        values: `[T, B]` V(x_t) under the target policy's value function.
        bootstrap_value: `[B]` V(x_T), the value after the last step.
        clip_rho_threshold: rho-bar (truncation of the weights in the value targets);
            None: no truncation.
        clip_pg_rho_threshold: truncation of the weights in the policy-gradient
            advantages; None: no truncation.

    Returns:
        `VTraceReturns(vs, pg_advantages)`, `[T, B]`, without gradients (targets).
    """
    rank = log_rhos.dim()
    for name, tensor, want in (
        ("discounts", discounts, rank),
        ("rewards", rewards, rank),
        ("values", values, rank),
        ("bootstrap_value", bootstrap_value, rank - 1),
    ):
        if tensor.dim() != want:
            raise ValueError(
                f"V-trace: `{name}` must have rank {want} (log_rhos has shape "
                f"{tuple(log_rhos.shape)}), got shape {tuple(tensor.shape)}."
            )
    with torch.no_grad():
        rhos = torch.exp(log_rhos)
        clipped = rhos if clip_rho_threshold is None else rhos.clamp(max=clip_rho_threshold)
        cs = rhos.clamp(max=1.0)
        next_values = torch.cat([values[1:], bootstrap_value.unsqueeze(0)], dim=0)
        deltas = clipped * (rewards + discounts * next_values - values)
        # v_s - V(x_s), accumulated backwards in time.
        acc = torch.zeros_like(bootstrap_value)
        diffs = []
        for t in range(log_rhos.shape[0] - 1, -1, -1):
            acc = deltas[t] + discounts[t] * cs[t] * acc
            diffs.append(acc)
        vs = torch.stack(diffs[::-1]) + values
        next_vs = torch.cat([vs[1:], bootstrap_value.unsqueeze(0)], dim=0)
        pg_rhos = rhos if clip_pg_rho_threshold is None else rhos.clamp(max=clip_pg_rho_threshold)
        pg_advantages = pg_rhos * (rewards + discounts * next_vs - values)
    return VTraceReturns(vs=vs, pg_advantages=pg_advantages)


def from_importance_weights_flat(
    log_rhos: torch.Tensor,
    discounts: torch.Tensor,
    rewards: torch.Tensor,
    values: torch.Tensor,
    starts: torch.Tensor,
    bootstrap_values: torch.Tensor,
    clip_rho_threshold: float | None = 1.0,
    clip_pg_rho_threshold: float | None = 1.0,
) -> VTraceReturns:
    """V-trace over a flat batch of trajectory pieces of any lengths (corral's layout).

    Args:
        log_rhos, discounts, rewards, values: `[N]`, rows of the pieces one after another.
        starts: `[N]` bool, True where a piece begins (row 0 must be True).
        bootstrap_values: `[num_pieces]`, V after each piece's last step (unused where
            that step's discount is 0).
        clip_rho_threshold, clip_pg_rho_threshold: as for `from_importance_weights`.

    Returns:
        `VTraceReturns` with `[N]` tensors.

    The pieces are laid out time-major, one column each, padded to the longest. The slot
    right after a piece holds its bootstrap value with a zero importance weight and
    discount, so that the recursion of `from_importance_weights` bootstraps each piece
    from its own value and no padding leaks into the real steps.
    """
    n = log_rhos.shape[0]
    if n == 0:
        empty = log_rhos.new_zeros(0)
        return VTraceReturns(empty, empty)
    if not bool(starts[0]):
        raise ValueError("V-trace: `starts[0]` must be True (row 0 begins a piece).")
    piece = torch.cumsum(starts.long(), 0) - 1
    num_pieces = int(piece[-1]) + 1
    if bootstrap_values.shape != (num_pieces,):
        raise ValueError(
            f"V-trace: `bootstrap_values` must have shape ({num_pieces},) (one per piece), "
            f"got {tuple(bootstrap_values.shape)}."
        )
    first_row = torch.nonzero(starts).flatten()
    t_index = torch.arange(n) - first_row[piece]
    lengths = torch.bincount(piece, minlength=num_pieces)
    horizon = int(lengths.max()) + 1

    def lay_out(x: torch.Tensor, fill: float) -> torch.Tensor:
        grid = x.new_full((horizon, num_pieces), fill)
        grid[t_index, piece] = x
        return grid

    grid_values = lay_out(values, 0.0)
    grid_values[lengths, torch.arange(num_pieces)] = bootstrap_values.to(values.dtype)
    res = from_importance_weights(
        lay_out(log_rhos, float("-inf")),
        lay_out(discounts, 0.0),
        lay_out(rewards, 0.0),
        grid_values,
        values.new_zeros(num_pieces),
        clip_rho_threshold=clip_rho_threshold,
        clip_pg_rho_threshold=clip_pg_rho_threshold,
    )
    return VTraceReturns(res.vs[t_index, piece], res.pg_advantages[t_index, piece])
