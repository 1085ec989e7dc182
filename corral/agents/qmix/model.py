"""QMIX's agent network: one recurrent Q-network that every agent of a group shares.

Rashid et al. 2018 (arXiv:1803.11485, section 4.1): each agent's Q_a(tau_a, .) comes from
a DRQN (Hausknecht and Stone 2015): a linear layer with ReLU on the agent's observation,
a GRU cell carrying the agent's history, and a linear layer to one Q-value per action.
The agents share the weights; each agent has its own hidden state.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from corral.models.preprocessors import preprocessor_for_space
from corral.models.torch.torch_modelv2 import ModelConfigDict, TorchModelV2
from corral.policy.sample_batch import SampleBatch


class RNNModel(TorchModelV2, nn.Module):
    """One agent's step: `(obs [N, obs_size], h [N, H]) -> (Q [N, num_outputs], [h'])`.

    `model_config["lstm_cell_size"]` is H (RLlib's key for QMIX's GRU); `n_agents` (set
    by `QMixTorchPolicy`) is how many agents share the network: the initial state is one
    zero row per agent, `[n_agents, H]`.
    """

    def __init__(
        self,
        obs_space: gym.Space,
        action_space: gym.Space,
        num_outputs: int,
        model_config: ModelConfigDict,
        name: str,
    ) -> None:
        TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
        nn.Module.__init__(self)
        self.obs_size = _get_size(obs_space)
        self.rnn_hidden_dim = int(model_config["lstm_cell_size"])
        self.n_agents = int(model_config.get("n_agents", 1))
        self.fc1 = nn.Linear(self.obs_size, self.rnn_hidden_dim)
        self.rnn = nn.GRUCell(self.rnn_hidden_dim, self.rnn_hidden_dim)
        self.fc2 = nn.Linear(self.rnn_hidden_dim, num_outputs)

    def get_initial_state(self) -> list[Any]:
        return [np.zeros((self.n_agents, self.rnn_hidden_dim), np.float32)]

    def forward(
        self,
        input_dict: dict[str, Any],
        state: list[torch.Tensor],
        seq_lens: torch.Tensor | None,
    ) -> tuple[torch.Tensor, list[torch.Tensor]]:
        """One step of each row (agent): Q-values and the next hidden state."""
        obs = input_dict.get("obs_flat", input_dict[SampleBatch.OBS])
        x = nn.functional.relu(self.fc1(obs.float().reshape(obs.shape[0], -1)))
        h = self.rnn(x, state[0].reshape(-1, self.rnn_hidden_dim))
        return self.fc2(h), [h]

    def value_function(self) -> torch.Tensor:
        raise NotImplementedError("QMIX's agent network has no value function.")


def _get_size(space: gym.Space) -> int:
    """Values in one preprocessed (flattened, one-hot) observation of `space`."""
    return int(preprocessor_for_space(space).size)


__all__ = ["RNNModel"]
