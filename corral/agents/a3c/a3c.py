"""A3C's `DEFAULT_CONFIG` (RLlib 1.13's values).

A3C itself (workers computing gradients that the driver applies as they arrive) is not
built; `A3CTrainer` is served as not built by `corral._surface`. The config is real
data, as RLlib 1.x scripts read it (`a3c.DEFAULT_CONFIG.copy()`); A2C
(`corral.agents.a3c.a2c`), the synchronous form, is built.
"""

from __future__ import annotations

from corral.agents.config import with_common_config

DEFAULT_CONFIG = with_common_config(
    {
        # Use a critic (value function) as a baseline; required by GAE.
        "use_critic": True,
        # Use Generalized Advantage Estimation (GAE) with `lambda`.
        "use_gae": True,
        # Steps per fragment collected by each worker per env.
        "rollout_fragment_length": 10,
        # The GAE lambda.
        "lambda": 1.0,
        # Clip gradients to this global norm.
        "grad_clip": 40.0,
        # Learning rate and its schedule.
        "lr": 0.0001,
        "lr_schedule": None,
        # Weight of the value-function loss.
        "vf_loss_coeff": 0.5,
        # Weight of the entropy bonus, and its schedule.
        "entropy_coeff": 0.01,
        "entropy_coeff_schedule": None,
        # Each `train()` call lasts at least this many seconds.
        "min_time_s_per_reporting": 5,
        # Workers sample asynchronously (A3C's point).
        "sample_async": True,
        "_disable_execution_plan_api": True,
    }
)
