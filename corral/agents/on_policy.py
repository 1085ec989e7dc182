"""The on-policy training step shared by PG, A2C and PPO, and the actor-critic config
block A2C and PPO merge in (`with_actor_critic_config`).

One `training_step` (`sample_and_train_once`): sample `train_batch_size` steps from the
workers (postprocessed there: returns or GAE advantages), let the algorithm prepare the
batch (`before_learning`, e.g. PPO standardises the advantages), train on it
(`sgd_settings`: one update on the whole batch, or PPO's epochs of minibatches), push the
new weights to the workers. An algorithm states only what differs.
"""

from __future__ import annotations

from typing import Any

from corral.agents.config import PartialTrainerConfigDict, TrainerConfigDict, with_common_config
from corral.agents.config_merge import merge_trainer_configs
from corral.agents.trainer import Trainer
from corral.execution.common import NUM_ENV_STEPS_SAMPLED
from corral.execution.rollout_ops import sample_train_batch
from corral.execution.train_ops import learner_results_per_iteration, update_learners
from corral.policy.sample_batch import MultiAgentBatch
from corral.utils.config_spec import Bool, Float, Optional, Rule, Schedule, check_rules

# The keys of the actor-critic algorithms (A2C, PPO), merged into their DEFAULT_CONFIGs
# by `with_actor_critic_config`; an algorithm states only the values it changes. The
# comment above each key is its documentation.
ACTOR_CRITIC_CONFIG: PartialTrainerConfigDict = {
    # Use a critic (value function) as a baseline; required by GAE.
    "use_critic": True,
    # Use Generalized Advantage Estimation (GAE) with `lambda`.
    "use_gae": True,
    # The GAE lambda: 1.0 = Monte-Carlo returns, 0.0 = one-step TD.
    "lambda": 1.0,
    # [[timestep, lr], ...] piecewise-linear learning-rate schedule (None: constant).
    "lr_schedule": None,
    # Weight of the value-function loss.
    "vf_loss_coeff": 1.0,
    # Weight of the entropy bonus.
    "entropy_coeff": 0.0,
    # [[timestep, coeff], ...] schedule for `entropy_coeff` (None: constant).
    "entropy_coeff_schedule": None,
    # Clip gradients to this global norm (None: no clipping).
    "grad_clip": None,
}

# Type and range of the keys of `ACTOR_CRITIC_CONFIG`, checked when the trainer is built.
ACTOR_CRITIC_CONFIG_SPECS = {
    "use_critic": Bool(),
    "use_gae": Bool(),
    "lambda": Float(0, 1),
    "lr_schedule": Schedule(Float(0)),
    "vf_loss_coeff": Float(0),
    "entropy_coeff": Float(0),
    "entropy_coeff_schedule": Schedule(Float(0)),
    "grad_clip": Optional(Float(0)),
}


def with_actor_critic_config(extra_config: PartialTrainerConfigDict) -> TrainerConfigDict:
    """`COMMON_CONFIG` + `ACTOR_CRITIC_CONFIG` + an algorithm's own keys (and the values
    it changes): how A2C and PPO build their `DEFAULT_CONFIG`s."""
    return with_common_config(
        merge_trainer_configs(ACTOR_CRITIC_CONFIG, extra_config, allow_unknown_configs=True)
    )


def sample_and_train_once(
    trainer: Trainer,
    before_learning: Any = None,
    **sgd_settings: Any,
) -> dict:
    """One synchronous round: `train_batch_size` steps, trained on, weights pushed out.

    Args:
        trainer: the trainer.
        before_learning: fn(batch) run on the `MultiAgentBatch` before the update.
        **sgd_settings: `update_learners`' `num_epochs`, `minibatch_size` and
            `shuffle_batch_per_epoch` (default: one update on the whole batch).

    Returns:
        The learner info dict (RLlib 1.x's `train_one_step` on the batch
        `synchronous_parallel_sample` collects); empty when called from a `train()`
        iteration of a step marked `learner_results_per_iteration`, which reduces its
        updates' results at its end.
    """
    batch = sample_train_batch(trainer)
    if before_learning is not None:
        before_learning(batch)
    results = update_learners(trainer, batch, **sgd_settings)
    trainer.workers.sync_weights(global_vars={"timestep": trainer._counters[NUM_ENV_STEPS_SAMPLED]})
    return trainer.learner_info_from(results)


class OnPolicyTrainer(Trainer):
    """A trainer that learns from the batch it has just sampled (PG, A2C, PPO)."""

    def validate_config(self, config: dict) -> None:
        """Also the algorithm's `_config_rules` (checks across keys)."""
        super().validate_config(config)
        check_rules(config, type(self))

    def sgd_settings(self) -> dict[str, Any]:
        """How the learners train on a batch: one update on all of it (PPO: epochs of
        shuffled minibatches)."""
        return {"num_epochs": 1, "minibatch_size": None}

    def before_learning(self, batch: MultiAgentBatch) -> None:
        """Prepares the sampled batch for training, in place (default: nothing)."""

    @learner_results_per_iteration
    def training_step(self) -> dict:
        return sample_and_train_once(self, self.before_learning, **self.sgd_settings())


class ActorCriticTrainer(OnPolicyTrainer):
    """An on-policy trainer with a critic: the keys of `ACTOR_CRITIC_CONFIG` (A2C, PPO)."""

    _config_specs = ACTOR_CRITIC_CONFIG_SPECS
    _config_rules = (
        Rule(
            lambda c: c["use_critic"] or not c["use_gae"],
            "`use_gae=True` requires `use_critic=True`.",
        ),
    )


__all__ = [
    "ACTOR_CRITIC_CONFIG",
    "ACTOR_CRITIC_CONFIG_SPECS",
    "ActorCriticTrainer",
    "OnPolicyTrainer",
    "sample_and_train_once",
    "with_actor_critic_config",
]
