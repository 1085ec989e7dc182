"""CQL on DQN: the TD loss plus the discrete conservative term (Kumar et al. 2020, eq. 4).

With finitely many actions the log-sum-exp is exact:

    loss = DQN's TD loss + min_q_weight * E_(s,a)~D[T log sum_a' exp(Q(s, a') / T) - Q(s, a)],

T = `temperature`: Q is pushed down on every action in proportion to softmax(Q / T) and up
on the logged action, so actions the data never takes cannot look better than it shows.
"""

from __future__ import annotations

from typing import Any

import torch

from corral.agents.dqn import DQNTorchPolicy
from corral.policy.sample_batch import SampleBatch
from corral.policy.torch_policy import TensorDict


def cql_dqn_term(q_values: torch.Tensor, actions: torch.Tensor, temperature: float) -> torch.Tensor:
    """E[T logsumexp(Q / T) - Q(s, a)] over a minibatch (`q_values` `[B, |A|]`)."""
    logsumexp = temperature * torch.logsumexp(q_values / temperature, dim=-1)
    q_data = q_values.gather(-1, actions.long().view(-1, 1)).squeeze(-1)
    return (logsumexp - q_data).mean()


class CQLDQNTorchPolicy(DQNTorchPolicy):
    """DQN's policy with CQL's conservative term added to the loss (Discrete actions)."""

    @staticmethod
    def get_default_config() -> dict:
        """CQL_DQN's `DEFAULT_CONFIG` (the keys this policy reads under another trainer)."""
        from corral.agents.cql.cql import CQL_DQN_DEFAULT_CONFIG

        return CQL_DQN_DEFAULT_CONFIG

    def loss(
        self, model: Any, dist_class: type, train_batch: TensorDict
    ) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        if self.q_config["num_atoms"] != 1:
            raise ValueError("CQL on DQN needs expected Q-values: set `num_atoms: 1`.")
        td_loss, stats = super().loss(model, dist_class, train_batch)
        q_values = model.q_values(model.q_logits(train_batch[SampleBatch.OBS]))
        term = cql_dqn_term(
            q_values, train_batch[SampleBatch.ACTIONS], float(self.config["temperature"])
        )
        total = td_loss + float(self.config["min_q_weight"]) * term
        stats = {
            **stats,
            "td_loss": td_loss.detach(),
            "cql_loss": term.detach(),
            "loss": total.detach(),
        }
        return total, stats
