"""Proximal Policy Optimization."""

from corral.agents.ppo.appo import APPOTrainer
from corral.agents.ppo.ddppo import DDPPOTrainer
from corral.agents.ppo.ppo import DEFAULT_CONFIG, PPOConfig, PPOTrainer
from corral.agents.ppo.ppo_torch_policy import PPOTorchPolicy

__all__ = [
    "APPOTrainer",
    "DDPPOTrainer",
    "DEFAULT_CONFIG",
    "PPOConfig",
    "PPOTorchPolicy",
    "PPOTrainer",
]
