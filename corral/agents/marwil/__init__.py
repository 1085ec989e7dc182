"""MARWIL and BC: imitation learning from offline data (advantage-weighted, or plain)."""

from corral.agents.marwil.bc import BC_DEFAULT_CONFIG, BCTrainer
from corral.agents.marwil.marwil import DEFAULT_CONFIG, MARWILTrainer
from corral.agents.marwil.marwil_torch_policy import MARWILTorchPolicy

__all__ = ["BC_DEFAULT_CONFIG", "DEFAULT_CONFIG", "BCTrainer", "MARWILTorchPolicy", "MARWILTrainer"]
