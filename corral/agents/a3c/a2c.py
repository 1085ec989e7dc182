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
from corral.agents.on_policy import ActorCriticTrainer, with_actor_critic_config
from corral.utils.config_spec import Int, Optional

A2C_DEFAULT_CONFIG = with_actor_critic_config(
    {
        # Clip gradients to this global norm (None: no clipping).
        "grad_clip": 40.0,
        # Learning rate (the loss is summed over the batch, not averaged).
        "lr": 0.0001,
        # Weight of the value-function loss.
        "vf_loss_coeff": 0.5,
        # Weight of the entropy bonus.
        "entropy_coeff": 0.01,
        # Steps per fragment collected by each worker per env.
        "rollout_fragment_length": 20,
        # Minimum seconds per `train()` call (RLlib 1.x's A2C reports every 10 s).
        "min_iter_time_s": 10,
        # Gradient accumulation over microbatches of this many steps up to the
        # train batch (None: one pass over the whole batch). Not built yet.
        "microbatch_size": None,
    }
)

# Type and range of A2C's own keys (the actor-critic keys are in
# `ACTOR_CRITIC_CONFIG_SPECS`, COMMON_CONFIG's in COMMON_CONFIG_SPECS), checked when the
# trainer is built (see `corral.utils.config_spec`).
A2C_CONFIG_SPECS = {
    "microbatch_size": Optional(Int(1)),
}


class A2CTrainer(ActorCriticTrainer):
    """Synchronous advantage actor-critic (arXiv:1602.01783); the training step is
    `OnPolicyTrainer`'s (one update on each sampled batch)."""

    _name = "A2C"
    _default_config = A2C_DEFAULT_CONFIG
    _config_specs = A2C_CONFIG_SPECS
    _policy_class = A3CTorchPolicy
