"""Advantage actor-critic: A3C (asynchronous gradients) and A2C (synchronous)."""

from corral.agents.a3c.a2c import A2C_DEFAULT_CONFIG, A2CTrainer
from corral.agents.a3c.a3c import DEFAULT_CONFIG, A3CTrainer
from corral.agents.a3c.a3c_torch_policy import A3CTorchPolicy

__all__ = [
    "A2C_DEFAULT_CONFIG",
    "DEFAULT_CONFIG",
    "A2CTrainer",
    "A3CTorchPolicy",
    "A3CTrainer",
]
