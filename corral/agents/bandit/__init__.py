"""Linear contextual bandits: LinUCB and linear Thompson sampling."""

from corral.agents.bandit.bandit import DEFAULT_CONFIG, BanditLinTSTrainer, BanditLinUCBTrainer
from corral.agents.bandit.bandit_torch_policy import BanditTorchPolicy

__all__ = ["DEFAULT_CONFIG", "BanditLinTSTrainer", "BanditLinUCBTrainer", "BanditTorchPolicy"]
