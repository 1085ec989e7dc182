"""CQL: conservative Q-learning from offline data, on SAC (Box actions) and on DQN (Discrete)."""

from corral.agents.cql.cql import (
    CQL_DEFAULT_CONFIG,
    CQL_DQN_DEFAULT_CONFIG,
    CQLDQNTrainer,
    CQLTrainer,
)
from corral.agents.cql.cql_dqn_torch_policy import CQLDQNTorchPolicy
from corral.agents.cql.cql_torch_policy import CQLTorchPolicy

__all__ = [
    "CQL_DEFAULT_CONFIG",
    "CQL_DQN_DEFAULT_CONFIG",
    "CQLDQNTorchPolicy",
    "CQLDQNTrainer",
    "CQLTorchPolicy",
    "CQLTrainer",
]
