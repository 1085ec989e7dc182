"""Behaviour cloning: MARWIL with `beta: 0` (maximise log pi(a|s) of the logged actions).

RLlib 1.13's BC is exactly this: the same trainer, policy and input handling as MARWIL,
with the advantage weights switched off (so no value function is trained either).
"""

from __future__ import annotations

from corral.agents.config import merge_trainer_configs
from corral.agents.marwil.marwil import DEFAULT_CONFIG, MARWILTrainer

BC_DEFAULT_CONFIG = merge_trainer_configs(
    DEFAULT_CONFIG,
    {
        # No advantage weighting: every logged action counts the same (pure imitation).
        "beta": 0.0,
        # No off-policy estimates by default (RLlib 1.13's BC reports none).
        "input_evaluation": [],
    },
)


class BCTrainer(MARWILTrainer):
    """Behaviour cloning (imitation learning) from offline data."""

    _name = "BC"
    _default_config = BC_DEFAULT_CONFIG

    def validate_config(self, config: dict) -> None:
        super().validate_config(config)
        if config["beta"] != 0.0:
            raise ValueError(
                f"BC is MARWIL with beta 0.0, got `beta: {config['beta']}`; use MARWILTrainer "
                "for advantage-weighted imitation."
            )
