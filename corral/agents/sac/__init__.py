"""Soft Actor-Critic (continuous and discrete actions)."""

from corral.agents.sac.sac import DEFAULT_CONFIG, SACTrainer
from corral.agents.sac.sac_torch_policy import SACTorchPolicy

__all__ = ["DEFAULT_CONFIG", "SACTorchPolicy", "SACTrainer"]
