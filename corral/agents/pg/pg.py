"""The vanilla policy gradient (REINFORCE) through the classic Trainer API.

`DEFAULT_CONFIG` keeps RLlib 1.x's PG defaults (no remote workers, lr 4e-4,
200-step batches). One training step: sample `train_batch_size` steps, one
gradient step on the whole batch, push the weights to the workers.
"""

from __future__ import annotations

from corral.agents.config import with_common_config
from corral.agents.pg.pg_torch_policy import PGTorchPolicy
from corral.agents.trainer import (
    NUM_AGENT_STEPS_SAMPLED,
    NUM_AGENT_STEPS_TRAINED,
    NUM_ENV_STEPS_SAMPLED,
    NUM_ENV_STEPS_TRAINED,
    Trainer,
)
from corral.agents.trainer_config import PGConfig  # noqa: F401 - RLlib 1.13's path
from corral.execution import synchronous_parallel_sample
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


class PGTrainer(Trainer):
    """Policy gradient with discounted returns (REINFORCE, Williams 1992)."""

    _name = "PG"
    _default_config = DEFAULT_CONFIG
    _config_specs = CONFIG_SPECS
    _policy_class = PGTorchPolicy

    def training_step(self) -> dict:
        return sample_and_train_once(self)


def sample_and_train_once(trainer: Trainer) -> dict:
    """One synchronous round: `train_batch_size` steps, one update on the whole batch.

    The training step of PG and A2C (RLlib 1.x's `train_one_step` on the batch
    `synchronous_parallel_sample` collects).
    """
    config = trainer.config
    by_agent = config["multiagent"]["count_steps_by"] == "agent_steps"
    size = config["train_batch_size"]
    batch = synchronous_parallel_sample(
        trainer.workers,
        max_env_steps=None if by_agent else size,
        max_agent_steps=size if by_agent else None,
    )
    counters = trainer._counters
    counters[NUM_ENV_STEPS_SAMPLED] += batch.env_steps()
    counters[NUM_AGENT_STEPS_SAMPLED] += batch.agent_steps()
    ma_batch = batch.as_multi_agent()
    results = trainer.learner_group.update(
        batch=ma_batch,
        num_epochs=1,
        minibatch_size=None,
        timesteps={"num_env_steps_sampled_lifetime": counters[NUM_ENV_STEPS_SAMPLED]},
    )
    counters[NUM_ENV_STEPS_TRAINED] += ma_batch.env_steps()
    counters[NUM_AGENT_STEPS_TRAINED] += ma_batch.agent_steps()
    trainer.workers.sync_weights(global_vars={"timestep": counters[NUM_ENV_STEPS_SAMPLED]})
    return trainer.learner_info_from(results)
