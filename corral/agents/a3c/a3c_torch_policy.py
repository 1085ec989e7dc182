"""A2C's policy: GAE (or discounted-return) advantages and the actor-critic loss.

Mnih et al. 2016 (arXiv:1602.01783). The loss keeps RLlib 1.x's A3C form,
summed over the batch (not averaged, so `lr` scales with the batch size):
-sum(log pi(a|s) A) + vf_loss_coeff * 0.5 * sum((V(s) - R)^2)
- entropy_coeff * sum(H[pi(.|s)]).
"""

from __future__ import annotations

import gymnasium as gym
import torch

from corral.core.learner.learner import SEQ_MASK
from corral.policy.sample_batch import SampleBatch
from corral.policy.torch_mixins import AdvantagesMixin
from corral.policy.torch_policy import (
    EntropyCoeffSchedule,
    LearningRateSchedule,
    TensorDict,
    TorchPolicy,
)
from corral.utils.torch_utils import explained_variance, loss_term


class A3CTorchPolicy(AdvantagesMixin, LearningRateSchedule, EntropyCoeffSchedule, TorchPolicy):
    """Advantage actor-critic: `postprocess_trajectory` adds advantages, `loss` is A3C's."""

    @staticmethod
    def get_default_config() -> dict:
        """A2C's `A2C_DEFAULT_CONFIG`: fills the keys this policy reads when it runs under
        another algorithm's trainer (RLlib 1.13's policy-template defaults)."""
        from corral.agents.a3c.a2c import A2C_DEFAULT_CONFIG

        return A2C_DEFAULT_CONFIG

    train_columns = (
        SampleBatch.OBS,
        SampleBatch.ACTIONS,
        SampleBatch.ADVANTAGES,
        SampleBatch.VALUE_TARGETS,
    )

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict) -> None:
        TorchPolicy.__init__(self, observation_space, action_space, config)
        LearningRateSchedule.__init__(self, config["lr"], config.get("lr_schedule"))
        EntropyCoeffSchedule.__init__(
            self, config["entropy_coeff"], config.get("entropy_coeff_schedule")
        )

    def loss(
        self, model: torch.nn.Module, dist_class: type, train_batch: TensorDict
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        cfg = self.config
        dist_inputs, values = self.forward_train(train_batch)
        dist = dist_class(dist_inputs, model)
        mask = train_batch.get(SEQ_MASK)

        def total(t: torch.Tensor) -> torch.Tensor:
            return t.sum() if mask is None else t[mask].sum()

        targets = train_batch[SampleBatch.VALUE_TARGETS]
        logp = dist.logp(train_batch[SampleBatch.ACTIONS])
        policy_loss = -total(logp * train_batch[SampleBatch.ADVANTAGES])
        entropy = loss_term(self.entropy_coeff, lambda: total(dist.entropy()))
        loss = policy_loss
        if self.entropy_coeff != 0.0:
            loss = loss - self.entropy_coeff * entropy
        if cfg["use_critic"]:
            vf_loss = 0.5 * total((values - targets) ** 2)
            loss = loss + cfg["vf_loss_coeff"] * vf_loss
        else:
            vf_loss = torch.zeros(())
        with torch.no_grad():
            valid_targets, valid_values = (
                (targets, values) if mask is None else (targets[mask], values[mask])
            )
            stats = {
                "policy_loss": policy_loss,
                "policy_entropy": entropy,
                "vf_loss": vf_loss,
                "vf_explained_var": explained_variance(valid_targets, valid_values),
                "entropy_coeff": self.entropy_coeff,
                "cur_lr": self.cur_lr,
            }
        return loss, stats
