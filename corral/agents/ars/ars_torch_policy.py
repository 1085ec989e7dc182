"""`ARSTorchPolicy`: ES's policy (flat weights, its own observation filter, no loss)."""

from __future__ import annotations

from corral.agents.es.es_torch_policy import ESTorchPolicy


class ARSTorchPolicy(ESTorchPolicy):
    """The policy of `ARSTrainer`: `ESTorchPolicy` under ARS's name."""


__all__ = ["ARSTorchPolicy"]
