"""QMIX's and VDN's mixers: the agents' chosen Q-values -> the team's Q-value Q_tot.

- `VDNMixer` (Sunehag et al. 2018, "Value-Decomposition Networks For Cooperative
  Multi-Agent Learning", arXiv:1706.05296): Q_tot = sum_a Q_a.
- `QMixer` (Rashid et al. 2018, "QMIX: Monotonic Value Function Factorisation for Deep
  Multi-Agent Reinforcement Learning", arXiv:1803.11485, section 4.1): a two-layer
  network over the agents' Q-values whose weights and biases hypernetworks compute from
  the global state s,

      h = elu(q^T |W_1(s)| + b_1(s)),   Q_tot = h^T |w_2(s)| + V(s),

  with |.| (absolute values) keeping every weight non-negative, so that
  dQ_tot / dQ_a >= 0 for every agent a (monotonicity: each agent's greedy action is
  the team's greedy action).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import torch
from torch import nn


class VDNMixer(nn.Module):
    """Q_tot = the sum of the agents' Q-values (no parameters, no state)."""

    def forward(self, agent_qs: torch.Tensor, states: torch.Tensor | None = None) -> torch.Tensor:
        """`[B, T, n_agents]` -> `[B, T, 1]` (`states` is not read)."""
        return agent_qs.sum(dim=-1, keepdim=True)


class QMixer(nn.Module):
    """QMIX's monotonic mixing network, its weights from hypernetworks on the state.

    Args:
        n_agents: agents mixed.
        state_shape: the shape (or size) of the global state fed to the hypernetworks.
        mixing_embed_dim: units of the mixing network's hidden layer.
    """

    def __init__(self, n_agents: int, state_shape: int | Sequence[int], mixing_embed_dim: int):
        super().__init__()
        self.n_agents = int(n_agents)
        self.embed_dim = int(mixing_embed_dim)
        self.state_dim = int(np.prod(state_shape))
        self.hyper_w_1 = nn.Linear(self.state_dim, self.embed_dim * self.n_agents)
        self.hyper_w_final = nn.Linear(self.state_dim, self.embed_dim)
        self.hyper_b_1 = nn.Linear(self.state_dim, self.embed_dim)
        # V(s): the state-dependent bias of the output, free of the sign constraint.
        self.V = nn.Sequential(
            nn.Linear(self.state_dim, self.embed_dim), nn.ReLU(), nn.Linear(self.embed_dim, 1)
        )

    def forward(self, agent_qs: torch.Tensor, states: torch.Tensor) -> torch.Tensor:
        """`agent_qs [B, T, n_agents]`, `states [B, T, state_dim]` -> Q_tot `[B, T, 1]`."""
        batch = agent_qs.shape[0]
        states = states.reshape(-1, self.state_dim)
        qs = agent_qs.reshape(-1, 1, self.n_agents)
        w_1 = torch.abs(self.hyper_w_1(states)).view(-1, self.n_agents, self.embed_dim)
        b_1 = self.hyper_b_1(states).view(-1, 1, self.embed_dim)
        hidden = nn.functional.elu(torch.bmm(qs, w_1) + b_1)
        w_final = torch.abs(self.hyper_w_final(states)).view(-1, self.embed_dim, 1)
        v = self.V(states).view(-1, 1, 1)
        return (torch.bmm(hidden, w_final) + v).view(batch, -1, 1)


__all__ = ["QMixer", "VDNMixer"]
