"""A2C, the synchronous advantage actor-critic, through the classic Trainer API.

`A2C_DEFAULT_CONFIG` keeps RLlib 1.x's A2C defaults (A3C's loss and settings,
sampled synchronously with 20-step fragments). One training step: sample
`train_batch_size` steps from the workers (advantages computed there), one
gradient step on the whole batch, push the weights to the workers.

A3C proper (workers computing gradients that the driver applies as they
arrive) is not built yet.
"""

from __future__ import annotations

from corral.agents.a3c.a3c_torch_policy import A3CTorchPolicy
from corral.agents.config import with_common_config
from corral.agents.pg.pg import sample_and_train_once
from corral.agents.trainer import Trainer
from corral.utils.config_spec import Bool, Float, Int, Optional, Schedule

A2C_DEFAULT_CONFIG = with_common_config(
    {
        # Use a critic (value function) as a baseline; required by GAE.
        "use_critic": True,
        # Use Generalized Advantage Estimation (GAE) with `lambda`.
        "use_gae": True,
        # The GAE lambda: 1.0 = Monte-Carlo returns, 0.0 = one-step TD.
        "lambda": 1.0,
        # Clip gradients to this global norm (None: no clipping).
        "grad_clip": 40.0,
        # Learning rate (the loss is summed over the batch, not averaged).
        "lr": 0.0001,
        # [[timestep, lr], ...] piecewise-linear learning-rate schedule (None: constant).
        "lr_schedule": None,
        # Weight of the value-function loss.
        "vf_loss_coeff": 0.5,
        # Weight of the entropy bonus.
        "entropy_coeff": 0.01,
        # [[timestep, coeff], ...] schedule for `entropy_coeff` (None: constant).
        "entropy_coeff_schedule": None,
        # Steps per fragment collected by each worker per env.
        "rollout_fragment_length": 20,
        # Minimum seconds per `train()` call (RLlib 1.x's A2C reports every 10 s).
        "min_iter_time_s": 10,
        # Gradient accumulation over microbatches of this many steps up to the
        # train batch (None: one pass over the whole batch). Not built yet.
        "microbatch_size": None,
    }
)

# Type and range of A2C's own keys (COMMON_CONFIG's are in COMMON_CONFIG_SPECS),
# checked when the trainer is built (see `corral.utils.config_spec`).
A2C_CONFIG_SPECS = {
    "use_critic": Bool(),
    "use_gae": Bool(),
    "lambda": Float(0, 1),
    "grad_clip": Optional(Float(0)),
    "lr_schedule": Schedule(Float(0)),
    "vf_loss_coeff": Float(0),
    "entropy_coeff": Float(0),
    "entropy_coeff_schedule": Schedule(Float(0)),
    "microbatch_size": Optional(Int(1)),
}


class A2CTrainer(Trainer):
    """Synchronous advantage actor-critic (arXiv:1602.01783)."""

    _name = "A2C"
    _default_config = A2C_DEFAULT_CONFIG
    _config_specs = A2C_CONFIG_SPECS
    _policy_class = A3CTorchPolicy

    def validate_config(self, config: dict) -> None:
        super().validate_config(config)
        if config["entropy_coeff"] < 0:
            raise ValueError(f"`entropy_coeff` must be >= 0.0, got {config['entropy_coeff']}.")
        if config["use_gae"] and not config["use_critic"]:
            raise ValueError("`use_gae=True` requires `use_critic=True`.")
        if config["microbatch_size"] is not None:
            raise NotImplementedError(
                f"microbatch_size={config['microbatch_size']} (gradient accumulation) is not "
                "implemented yet in corral; leave it None (one pass over the whole batch)."
            )

    def training_step(self) -> dict:
        return sample_and_train_once(self)
