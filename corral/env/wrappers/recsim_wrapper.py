"""RLlib 1.13's deprecated path of the RecSim wrappers: use `corral.env.wrappers.recsim`.

Re-exports the names RLlib 1.13's ``recsim_wrapper`` module re-exports, and logs a
deprecation warning on import (as RLlib's does).
"""

from __future__ import annotations

from corral.env.wrappers.recsim import (
    MultiDiscreteToDiscreteActionWrapper,
    RecSimObservationSpaceWrapper,
    RecSimResetWrapper,
    make_recsim_env,
)
from corral.utils.deprecation import deprecation_warning

deprecation_warning(
    old="corral.env.wrappers.recsim_wrapper",
    new="corral.env.wrappers.recsim",
    error=False,
)

__all__ = [
    "MultiDiscreteToDiscreteActionWrapper",
    "RecSimObservationSpaceWrapper",
    "RecSimResetWrapper",
    "make_recsim_env",
]
