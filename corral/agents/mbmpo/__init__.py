"""Model-based meta-policy optimisation (MB-MPO)."""

from corral.agents.mbmpo.mbmpo import DEFAULT_CONFIG, MBMPOTrainer
from corral.agents.mbmpo.mbmpo_torch_policy import MBMPOTorchPolicy

__all__ = ["DEFAULT_CONFIG", "MBMPOTorchPolicy", "MBMPOTrainer"]
