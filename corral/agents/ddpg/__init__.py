"""DDPG and TD3 (deterministic policy gradient with target networks), and Ape-X DDPG."""

from corral.agents.ddpg.apex import APEX_DDPG_DEFAULT_CONFIG, ApexDDPGTrainer
from corral.agents.ddpg.ddpg import DEFAULT_CONFIG, DDPGTrainer
from corral.agents.ddpg.ddpg_torch_policy import DDPGTorchPolicy
from corral.agents.ddpg.td3 import TD3_DEFAULT_CONFIG, TD3Trainer

__all__ = [
    "APEX_DDPG_DEFAULT_CONFIG",
    "DEFAULT_CONFIG",
    "ApexDDPGTrainer",
    "DDPGTorchPolicy",
    "DDPGTrainer",
    "TD3Trainer",
    "TD3_DEFAULT_CONFIG",
]
