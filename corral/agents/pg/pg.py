"""The vanilla policy gradient (REINFORCE) through the classic Trainer API.

`DEFAULT_CONFIG` keeps RLlib 1.x's PG defaults (no remote workers, lr 4e-4,
200-step batches). One training step (`OnPolicyTrainer`'s): sample
`train_batch_size` steps, one gradient step on the whole batch, push the weights to the
workers.
"""

from __future__ import annotations

from corral.agents.config import with_common_config
from corral.agents.on_policy import OnPolicyTrainer, sample_and_train_once
from corral.agents.pg.pg_torch_policy import PGTorchPolicy
from corral.agents.trainer_config import PGConfig  # noqa: F401 - RLlib 1.13's path
from corral.utils.config_spec import Float, Schedule

DEFAULT_CONFIG = with_common_config(
    {
        # No remote workers by default: PG's updates are cheap, sampling is the work.
        "num_workers": 0,
        # Learning rate.
        "lr": 0.0004,
        # [[timestep, lr], ...] piecewise-linear learning-rate schedule (None: constant).
        "lr_schedule": None,
    }
)

# Type and range of PG's own keys (COMMON_CONFIG's are in COMMON_CONFIG_SPECS).
CONFIG_SPECS = {"lr_schedule": Schedule(Float(0))}


class PGTrainer(OnPolicyTrainer):
    """Policy gradient with discounted returns (REINFORCE, Williams 1992)."""

    _name = "PG"
    _default_config = DEFAULT_CONFIG
    _config_specs = CONFIG_SPECS
    _policy_class = PGTorchPolicy


# `sample_and_train_once` (the training step of PG and A2C) lives in
# `corral.agents.on_policy`; re-exported for code that imports it from here.
__all__ = ["DEFAULT_CONFIG", "PGConfig", "PGTrainer", "sample_and_train_once"]
