"""The vanilla policy gradient's policy: discounted returns and -E[log pi(a|s) R].

Williams 1992 (REINFORCE). As in RLlib 1.x's PG there is no baseline: the
advantage of a step is its discounted return within the sampled trajectory.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import torch

from corral.core.learner.learner import SEQ_MASK
from corral.policy.sample_batch import SampleBatch
from corral.policy.torch_mixins import AdvantagesMixin
from corral.policy.torch_policy import LearningRateSchedule, TensorDict, TorchPolicy


class PGTorchPolicy(AdvantagesMixin, LearningRateSchedule, TorchPolicy):
    """REINFORCE: `postprocess_trajectory` adds discounted returns, `loss` is -mean(logp R)."""

    @staticmethod
    def get_default_config() -> dict:
        """PG's `DEFAULT_CONFIG`: fills the keys this policy reads when it runs under
        another algorithm's trainer (RLlib 1.13's policy-template defaults)."""
        from corral.agents.pg.pg import DEFAULT_CONFIG

        return DEFAULT_CONFIG

    train_columns = (SampleBatch.OBS, SampleBatch.ACTIONS, SampleBatch.ADVANTAGES)

    def __init__(self, observation_space: gym.Space, action_space: gym.Space, config: dict) -> None:
        TorchPolicy.__init__(self, observation_space, action_space, config)
        LearningRateSchedule.__init__(self, config["lr"], config.get("lr_schedule"))

    def advantage_settings(self) -> dict[str, Any]:
        """Discounted returns, no baseline. Returns of fragments cut mid-episode stop at
        the cut (no value to bootstrap from), as in RLlib 1.x;
        batch_mode="complete_episodes" avoids it."""
        return {"use_gae": False, "use_critic": False}

    def loss(
        self, model: torch.nn.Module, dist_class: type, train_batch: TensorDict
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        dist_inputs, _ = self.forward_train(train_batch)
        logp = dist_class(dist_inputs, model).logp(train_batch[SampleBatch.ACTIONS])
        weighted = logp * train_batch[SampleBatch.ADVANTAGES]
        mask = train_batch.get(SEQ_MASK)
        policy_loss = -(weighted.mean() if mask is None else weighted[mask].mean())
        return policy_loss, {"policy_loss": policy_loss.detach(), "cur_lr": self.cur_lr}


def pg_torch_loss(
    policy: Any, model: torch.nn.Module, dist_class: type, train_batch: TensorDict
) -> torch.Tensor:
    """RLlib 1.13's PG loss function, ``-mean(log pi(a|s) * advantages)``, for
    ``build_policy_class(loss_fn=...)`` / ``PGTorchPolicy.with_updates(loss_fn=...)``.

    Stores the loss in ``model.tower_stats["policy_loss"]`` (read by :func:`pg_loss_stats`).
    """
    dist_inputs, _ = model(train_batch)
    log_probs = dist_class(dist_inputs, model).logp(train_batch[SampleBatch.ACTIONS])
    policy_loss = -torch.mean(log_probs * train_batch[SampleBatch.ADVANTAGES])
    stats = getattr(model, "tower_stats", None)
    if isinstance(stats, dict):
        stats["policy_loss"] = policy_loss
    return policy_loss


def pg_loss_stats(policy: Any, train_batch: TensorDict) -> dict[str, torch.Tensor]:
    """RLlib 1.13's PG stats function: ``{"policy_loss": mean over towers}``."""
    losses = policy.get_tower_stats("policy_loss")
    return {"policy_loss": torch.mean(torch.stack([torch.as_tensor(x) for x in losses]))}
