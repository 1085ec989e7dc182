"""RLlib 1.13's module of IMPALA's torch policy (`VTraceTorchPolicy`, in `impala_torch_policy`)."""

from corral.agents.impala.impala_torch_policy import VTraceTorchPolicy

__all__ = ["VTraceTorchPolicy"]
