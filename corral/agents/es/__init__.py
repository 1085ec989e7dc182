"""Evolution strategies (ES), and the machinery ARS shares with it."""

from corral.agents.es.es import DEFAULT_CONFIG, ESTrainer
from corral.agents.es.es_torch_policy import ESTorchPolicy

__all__ = ["DEFAULT_CONFIG", "ESTorchPolicy", "ESTrainer"]
