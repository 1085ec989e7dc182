"""Dreamer: model-based RL from images with a learnt world model (`DREAMERTrainer`)."""

from corral.agents.dreamer.dreamer import DEFAULT_CONFIG, DREAMERTrainer
from corral.agents.dreamer.dreamer_torch_policy import DreamerTorchPolicy

__all__ = ["DEFAULT_CONFIG", "DREAMERTrainer", "DreamerTorchPolicy"]
