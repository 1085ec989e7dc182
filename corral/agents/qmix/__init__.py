"""QMIX (and VDN) for groups of cooperating agents: `QMixTrainer`, its policy and networks."""

from corral.agents.qmix.mixers import QMixer, VDNMixer
from corral.agents.qmix.model import RNNModel
from corral.agents.qmix.qmix import DEFAULT_CONFIG, QMixTrainer
from corral.agents.qmix.qmix_policy import QMixLoss, QMixTorchPolicy

__all__ = [
    "DEFAULT_CONFIG",
    "QMixLoss",
    "QMixTorchPolicy",
    "QMixTrainer",
    "QMixer",
    "RNNModel",
    "VDNMixer",
]
