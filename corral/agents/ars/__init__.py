"""Augmented random search (ARS), on ES's machinery."""

from corral.agents.ars.ars import DEFAULT_CONFIG, ARSTrainer
from corral.agents.ars.ars_torch_policy import ARSTorchPolicy

__all__ = ["DEFAULT_CONFIG", "ARSTorchPolicy", "ARSTrainer"]
