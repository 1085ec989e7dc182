"""DQN and its relatives: SimpleQ (plain DQN), DQN (Rainbow options) and Ape-X."""

from corral.agents.dqn.apex import APEX_DEFAULT_CONFIG, ApexTrainer
from corral.agents.dqn.dqn import DEFAULT_CONFIG, DQNTrainer
from corral.agents.dqn.dqn_torch_model import DQNTorchModel, NoisyLinear
from corral.agents.dqn.dqn_torch_policy import DQNTorchPolicy
from corral.agents.dqn.simple_q import SIMPLE_Q_DEFAULT_CONFIG, SimpleQTrainer

__all__ = [
    "APEX_DEFAULT_CONFIG",
    "DEFAULT_CONFIG",
    "SIMPLE_Q_DEFAULT_CONFIG",
    "ApexTrainer",
    "DQNTorchModel",
    "DQNTorchPolicy",
    "DQNTrainer",
    "NoisyLinear",
    "SimpleQTrainer",
]
