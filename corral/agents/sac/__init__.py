"""Soft Actor-Critic (continuous and discrete actions), and RNNSAC (recurrent SAC)."""

from corral.agents.sac.rnnsac import DEFAULT_CONFIG as RNNSAC_DEFAULT_CONFIG
from corral.agents.sac.rnnsac import RNNSACTrainer
from corral.agents.sac.rnnsac_torch_policy import RNNSACTorchPolicy
from corral.agents.sac.sac import DEFAULT_CONFIG, SACTrainer
from corral.agents.sac.sac_torch_policy import SACTorchPolicy

__all__ = [
    "DEFAULT_CONFIG",
    "RNNSAC_DEFAULT_CONFIG",
    "RNNSACTorchPolicy",
    "RNNSACTrainer",
    "SACTorchPolicy",
    "SACTrainer",
]
