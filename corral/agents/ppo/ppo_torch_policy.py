"""PPO's policy: GAE postprocessing and the clipped surrogate loss.

Schulman et al. 2017, "Proximal Policy Optimization Algorithms"
(arXiv:1707.06347); advantages by GAE, Schulman et al. 2016 (arXiv:1506.02438).
The loss keeps RLlib 1.x's form: clipped surrogate + adaptive KL penalty +
clipped squared value error - entropy bonus.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch

from corral.core.learner.learner import SEQ_MASK
from corral.evaluation.postprocessing import (  # noqa: F401 - compute_advantages re-exported
    compute_advantages,
    compute_gae_for_sample_batch,
)
from corral.policy.sample_batch import SampleBatch
from corral.policy.torch_mixins import AdvantagesMixin, KLCoeffMixin
from corral.policy.torch_policy import (
    EntropyCoeffSchedule,
    LearningRateSchedule,
    TensorDict,
    TorchPolicy,
    default_path_hook,
)
from corral.utils.torch_utils import apply_grad_clipping, explained_variance, loss_term


class PPOTorchPolicy(
    AdvantagesMixin, LearningRateSchedule, EntropyCoeffSchedule, KLCoeffMixin, TorchPolicy
):
    """PPO: `postprocess_trajectory` adds GAE columns, `loss` is PPO's."""

    @staticmethod
    def get_default_config() -> dict:
        """PPO's `DEFAULT_CONFIG`: fills the keys this policy reads when it runs under
        another algorithm's trainer (RLlib 1.13's policy-template defaults)."""
        from corral.agents.ppo.ppo import DEFAULT_CONFIG

        return DEFAULT_CONFIG

    train_columns = (
        SampleBatch.OBS,
        SampleBatch.ACTIONS,
        SampleBatch.ACTION_LOGP,
        SampleBatch.ACTION_DIST_INPUTS,
        SampleBatch.VF_PREDS,
        SampleBatch.ADVANTAGES,
        SampleBatch.VALUE_TARGETS,
    )

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict) -> None:
        TorchPolicy.__init__(self, observation_space, action_space, config)
        KLCoeffMixin.__init__(self, config)
        LearningRateSchedule.__init__(self, config["lr"], config.get("lr_schedule"))
        EntropyCoeffSchedule.__init__(
            self, config["entropy_coeff"], config.get("entropy_coeff_schedule")
        )

    # -- loss ---------------------------------------------------------------

    def loss(
        self, model: torch.nn.Module, dist_class: type, train_batch: TensorDict
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        cfg = self.config
        dist_inputs, values = self.forward_train(train_batch)
        # Recurrent minibatches are padded sequences: average over real steps only.
        mask = train_batch.get(SEQ_MASK)
        mean = torch.mean if mask is None else (lambda t: t[mask].mean())
        curr = dist_class(dist_inputs, model)
        prev = dist_class(train_batch[SampleBatch.ACTION_DIST_INPUTS], model)
        actions = train_batch[SampleBatch.ACTIONS]
        advantages = train_batch[SampleBatch.ADVANTAGES]

        # Probability ratio r = pi(a|s) / pi_old(a|s) and the clipped objective
        # min(r A, clip(r, 1 - eps, 1 + eps) A)   (eq. 7 of the PPO paper).
        ratio = torch.exp(curr.logp(actions) - train_batch[SampleBatch.ACTION_LOGP])
        surrogate = torch.minimum(
            advantages * ratio,
            advantages * torch.clamp(ratio, 1 - cfg["clip_param"], 1 + cfg["clip_param"]),
        )
        # RLlib 1.x's KL and entropy terms (out of the graph where weighted by 0).
        kl = loss_term(self.kl_coeff, lambda: prev.kl(curr))
        entropy = loss_term(self.entropy_coeff, curr.entropy)
        total = -surrogate
        if self.entropy_coeff != 0.0:
            total = total - self.entropy_coeff * entropy
        if self.kl_coeff != 0.0:
            total = total + self.kl_coeff * kl

        targets = train_batch[SampleBatch.VALUE_TARGETS]
        if cfg["use_critic"]:
            # RLlib 1.x clips the squared error itself (not the value change).
            vf_loss = torch.clamp((values - targets) ** 2, 0.0, cfg["vf_clip_param"])
            total = total + cfg["vf_loss_coeff"] * vf_loss
        else:
            vf_loss = torch.zeros_like(total)
        total_loss = mean(total)
        with torch.no_grad():
            valid_targets, valid_values = (
                (targets, values) if mask is None else (targets[mask], values[mask])
            )
            stats = {
                "total_loss": total_loss,
                "policy_loss": -mean(surrogate),
                "vf_loss": mean(vf_loss),
                "vf_explained_var": explained_variance(valid_targets, valid_values),
                "kl": mean(kl),
                "entropy": mean(entropy),
                "entropy_coeff": self.entropy_coeff,
                "cur_kl_coeff": self.kl_coeff,
                "cur_lr": self.cur_lr,
            }
        return total_loss, stats

    # RLlib 1.13's PPOTorchPolicy overrode these two; corral's fast paths do their work
    # (`vf_preds` fetched in acting, `grad_clip` in the learner's step), so PPO keeps those
    # paths. A subclass overriding one gets these from `super()`, as in RLlib.
    @default_path_hook
    def extra_action_out(
        self,
        input_dict: dict[str, Any],
        state_batches: list[torch.Tensor],
        model: torch.nn.Module,
        action_dist: Any,
    ) -> dict[str, Any]:
        """The value predictions of the acting step's model call (`vf_preds`, which GAE
        reads): A3C's `vf_preds_fetches`."""
        from corral.agents.a3c.a3c_torch_policy import vf_preds_fetches

        return vf_preds_fetches(self, input_dict, state_batches, model, action_dist)

    @default_path_hook
    def extra_grad_process(
        self, local_optimizer: torch.optim.Optimizer, loss: torch.Tensor
    ) -> dict:
        """The gradients clipped to `grad_clip` (`apply_grad_clipping`: `grad_gnorm`).
        (RLlib 1.13's PPO names the optimizer `local_optimizer`, its TorchPolicy
        `optimizer`.)"""
        return apply_grad_clipping(self, local_optimizer, loss)

    def after_update(self, stats: dict[str, float]) -> dict[str, float]:
        """Adapts the KL coefficient to the mean KL of this update (RLlib's rule)."""
        kl = stats.get("kl")
        if kl is None or self.kl_coeff == 0.0:
            return {}
        return {"cur_kl_coeff": self.update_kl(float(kl))}

    def extra_state(self) -> dict[str, Any]:
        return {"kl_coeff": self.kl_coeff, "entropy_coeff": self.entropy_coeff}

    def set_extra_state(self, state: dict[str, Any]) -> None:
        self.kl_coeff = state.get("kl_coeff", self.kl_coeff)
        self.entropy_coeff = state.get("entropy_coeff", self.entropy_coeff)
