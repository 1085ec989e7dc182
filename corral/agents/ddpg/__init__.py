"""DDPG and TD3 (deterministic policy gradient with target networks)."""

from corral.agents.ddpg.ddpg import DEFAULT_CONFIG, DDPGTrainer
from corral.agents.ddpg.ddpg_torch_policy import DDPGTorchPolicy
from corral.agents.ddpg.td3 import TD3_DEFAULT_CONFIG, TD3Trainer

__all__ = ["DEFAULT_CONFIG", "DDPGTorchPolicy", "DDPGTrainer", "TD3Trainer", "TD3_DEFAULT_CONFIG"]
