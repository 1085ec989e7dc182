"""RLlib 1.13's module of IMPALA's torch policy: `VTraceTorchPolicy` (in
`impala_torch_policy`) and the functions RLlib 1.13 built it from.

`build_vtrace_loss`, `stats`, `choose_optimizer` and `setup_mixins` are the class's own
loss, stats, optimiser and schedules in RLlib's function form (for
`VTraceTorchPolicy.with_updates(loss_fn=...)` and `build_policy_class`). `VTraceLoss`
and `make_time_major` keep RLlib's time-major `[T, B]` form, for code that lays its
batches out so; the class itself runs V-trace on the trajectory pieces of a flat batch
(`impala_torch_policy.vtrace_targets`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import gymnasium as gym
import torch

from corral.agents.impala import vtrace_torch as vtrace
from corral.agents.impala.impala_torch_policy import (
    VTraceTorchPolicy,
    make_optimizer_for,
    vtrace_loss_terms,
)
from corral.policy.policy_template import class_loss, tower_stats
from corral.policy.torch_policy import (
    EntropyCoeffSchedule,
    LearningRateSchedule,
    TensorDict,
    TorchPolicy,
)


class VTraceLoss:
    """IMPALA's loss on time-major `[T, B, ...]` tensors (RLlib 1.13's `VTraceLoss`).

    Computes the V-trace returns (`vtrace_torch.multi_from_logits`) and the loss terms
    of `VTraceTorchPolicy` (`vtrace_loss_terms`), kept as attributes: `vtrace_returns`,
    `value_targets`, `pi_loss`, `vf_loss`, `entropy`, `mean_entropy`, `total_loss`.

    Args:
        actions: `[T, B, n]` actions (n components; 1 for a Discrete space).
        actions_logp: `[T, B]` log pi(a|x) of the current policy (with gradients).
        actions_entropy: `[T, B]` entropy of the current policy.
        dones: `[T, B]` whether each step ended its episode.
        behaviour_action_logp: `[T, B]` log mu(a|x) stored by the sampler.
        behaviour_logits: the behaviour policy's logits, one `[T, B, n_i]` per component.
        target_logits: the current policy's logits, the same shapes.
        discount: gamma.
        rewards: `[T, B]`.
        values: `[T, B]` V(x) (with gradients).
        bootstrap_value: `[B]` V after the last step.
        dist_class: the distribution class of one component's logits.
        model: the model (passed to `dist_class`).
        valid_mask: `[T, B]` 1 for real steps, 0 for padding (None: all real).
        config: the policy's config (unused; RLlib's signature).
        vf_loss_coeff: the value loss's weight.
        entropy_coeff: the entropy bonus's weight.
        clip_rho_threshold: V-trace's rho-bar.
        clip_pg_rho_threshold: the truncation of the policy-gradient weights.
    """

    def __init__(
        self,
        actions: torch.Tensor,
        actions_logp: torch.Tensor,
        actions_entropy: torch.Tensor,
        dones: torch.Tensor,
        behaviour_action_logp: torch.Tensor,
        behaviour_logits: Sequence[torch.Tensor],
        target_logits: Sequence[torch.Tensor],
        discount: float,
        rewards: torch.Tensor,
        values: torch.Tensor,
        bootstrap_value: torch.Tensor,
        dist_class: type,
        model: Any,
        valid_mask: torch.Tensor | None,
        config: dict,
        vf_loss_coeff: float = 0.5,
        entropy_coeff: float = 0.01,
        clip_rho_threshold: float | None = 1.0,
        clip_pg_rho_threshold: float | None = 1.0,
    ) -> None:
        weight = (
            torch.ones_like(actions_logp) if valid_mask is None else valid_mask.to(values.dtype)
        )
        self.vtrace_returns = vtrace.multi_from_logits(
            behaviour_policy_logits=behaviour_logits,
            target_policy_logits=target_logits,
            actions=torch.unbind(actions, dim=2),
            discounts=(1.0 - dones.float()) * discount,
            rewards=rewards,
            values=values.detach(),
            bootstrap_value=bootstrap_value.detach(),
            dist_class=dist_class,
            model=model,
            behaviour_action_log_probs=[behaviour_action_logp],
            clip_rho_threshold=clip_rho_threshold,
            clip_pg_rho_threshold=clip_pg_rho_threshold,
        )
        self.value_targets = self.vtrace_returns.vs
        self.total_loss, self.pi_loss, self.vf_loss, self.entropy = vtrace_loss_terms(
            actions_logp,
            lambda: actions_entropy,
            values,
            self.value_targets,
            self.vtrace_returns.pg_advantages,
            weight,
            vf_loss_coeff,
            entropy_coeff,
        )
        self.mean_entropy = self.entropy / weight.sum()


def make_time_major(
    policy: TorchPolicy,
    seq_lens: torch.Tensor | None,
    tensor: torch.Tensor | Sequence[torch.Tensor],
    drop_last: bool = False,
) -> Any:
    """A `[B * T, ...]` batch (or a list of them) as time-major `[T, B, ...]`.

    As in RLlib 1.13, the rows are B runs of T steps each: T is the padded sequence
    length of a recurrent policy (`len(tensor) // len(seq_lens)`), else the config's
    `rollout_fragment_length`. `drop_last` drops the last time step.
    """
    if isinstance(tensor, (list, tuple)):
        return [make_time_major(policy, seq_lens, t, drop_last) for t in tensor]
    assert isinstance(tensor, torch.Tensor)
    if policy.is_recurrent():
        if seq_lens is None:
            raise ValueError("make_time_major: a recurrent policy needs the batch's seq_lens.")
        b = int(seq_lens.shape[0])
        t = tensor.shape[0] // b
    else:
        t = int(policy.config["rollout_fragment_length"])
        b = tensor.shape[0] // t
    if b * t != tensor.shape[0]:
        raise ValueError(f"make_time_major: {tensor.shape[0]} rows are not {b} runs of {t} steps.")
    res = tensor.reshape(b, t, *tensor.shape[1:]).transpose(0, 1)
    return res[:-1] if drop_last else res


def build_vtrace_loss(
    policy: TorchPolicy, model: torch.nn.Module, dist_class: type, train_batch: TensorDict
) -> torch.Tensor:
    """RLlib 1.13's loss function: `VTraceTorchPolicy.loss` of `policy` (the total loss),
    its stats stored in `model.tower_stats` (read by `stats`)."""
    return class_loss(VTraceTorchPolicy, policy, model, dist_class, train_batch)


def stats(policy: TorchPolicy, train_batch: TensorDict) -> dict[str, Any]:
    """RLlib 1.13's stats function: the stats of the last `build_vtrace_loss`
    (`total_loss`, `policy_loss`, `vf_loss`, `entropy`, `vf_explained_var`, ...)."""
    return tower_stats(policy, train_batch)


def choose_optimizer(policy: TorchPolicy, config: dict) -> torch.optim.Optimizer:
    """RLlib 1.13's optimizer function: Adam or RMSProp by `opt_type`, as
    `VTraceTorchPolicy` makes it; `config` is the policy's (as RLlib passes it)."""
    return make_optimizer_for(policy)


def setup_mixins(
    policy: TorchPolicy, obs_space: gym.Space, action_space: gym.Space, config: dict
) -> None:
    """RLlib 1.13's `before_init`: the entropy-coefficient and learning-rate schedules
    (which `VTraceTorchPolicy.__init__` sets up too; calling this again restarts them at
    timestep 0, as in RLlib)."""
    EntropyCoeffSchedule.__init__(
        policy,  # type: ignore[arg-type]
        config["entropy_coeff"],
        config.get("entropy_coeff_schedule"),
    )
    LearningRateSchedule.__init__(policy, config["lr"], config.get("lr_schedule"))  # type: ignore[arg-type]


__all__ = [
    "VTraceLoss",
    "VTraceTorchPolicy",
    "build_vtrace_loss",
    "choose_optimizer",
    "make_time_major",
    "setup_mixins",
    "stats",
]
