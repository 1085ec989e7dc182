"""DQN and its relatives: SimpleQ (plain DQN), DQN (Rainbow options), Ape-X and R2D2."""

from corral.agents.dqn.apex import APEX_DEFAULT_CONFIG, ApexTrainer
from corral.agents.dqn.dqn import DEFAULT_CONFIG, DQNTrainer
from corral.agents.dqn.dqn_torch_model import DQNTorchModel, NoisyLinear
from corral.agents.dqn.dqn_torch_policy import DQNTorchPolicy
from corral.agents.dqn.r2d2 import R2D2_DEFAULT_CONFIG, R2D2Trainer
from corral.agents.dqn.r2d2_torch_policy import R2D2TorchPolicy
from corral.agents.dqn.simple_q import SIMPLE_Q_DEFAULT_CONFIG, SimpleQTrainer

__all__ = [
    "APEX_DEFAULT_CONFIG",
    "DEFAULT_CONFIG",
    "R2D2_DEFAULT_CONFIG",
    "SIMPLE_Q_DEFAULT_CONFIG",
    "ApexTrainer",
    "DQNTorchModel",
    "DQNTorchPolicy",
    "DQNTrainer",
    "NoisyLinear",
    "R2D2TorchPolicy",
    "R2D2Trainer",
    "SimpleQTrainer",
]
