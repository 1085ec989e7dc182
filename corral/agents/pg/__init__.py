"""The vanilla policy gradient (REINFORCE)."""

from corral.agents.pg.pg import DEFAULT_CONFIG, PGConfig, PGTrainer
from corral.agents.pg.pg_torch_policy import PGTorchPolicy

__all__ = ["DEFAULT_CONFIG", "PGConfig", "PGTorchPolicy", "PGTrainer"]
