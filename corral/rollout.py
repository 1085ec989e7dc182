"""RLlib 1.13's old ``rllib rollout`` script: ``ray.rllib.rollout`` -> ``corral.rollout``.

RLlib 1.13 renamed it ``evaluate`` and kept this module for old imports: importing it
warns that it is deprecated, and it re-exports :mod:`corral.evaluate`'s pieces.
"""

from __future__ import annotations

from corral import evaluate
from corral.evaluate import RolloutSaver, rollout, run
from corral.utils.deprecation import deprecation_warning

__all__ = ["RolloutSaver", "rollout", "run"]

deprecation_warning(old="rllib rollout", new="rllib evaluate", error=False)

if __name__ == "__main__":
    evaluate.main()
