"""Model-agnostic meta-learning (MAML)."""

from corral.agents.maml.maml import DEFAULT_CONFIG, MAMLTrainer
from corral.agents.maml.maml_torch_policy import MAMLTorchPolicy

__all__ = ["DEFAULT_CONFIG", "MAMLTorchPolicy", "MAMLTrainer"]
