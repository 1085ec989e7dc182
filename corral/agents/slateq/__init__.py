"""SlateQ (Ie et al. 2019): slate recommendation by decomposed Q-learning; `SlateQTrainer`,
its policy and networks."""

from corral.agents.slateq.slateq import DEFAULT_CONFIG, SlateQTrainer
from corral.agents.slateq.slateq_torch_model import (
    QValueModel,
    SlateQTorchModel,
    UserChoiceModel,
)
from corral.agents.slateq.slateq_torch_policy import SlateQTorchPolicy

__all__ = [
    "DEFAULT_CONFIG",
    "QValueModel",
    "SlateQTorchModel",
    "SlateQTorchPolicy",
    "SlateQTrainer",
    "UserChoiceModel",
]
