"""PPO (Schulman et al. 2017) through the classic Trainer API.

`DEFAULT_CONFIG` keeps RLlib 1.x's PPO defaults; tuned settings live in
`tuned_examples/ppo/`. One training step: sample `train_batch_size` env steps
from the workers (postprocessed with GAE there), standardise advantages,
run `num_sgd_iter` epochs of minibatch SGD in the learner, push the new
weights to the workers.
"""

from __future__ import annotations

import logging

from corral.agents.config import with_common_config
from corral.agents.ppo.ppo_torch_policy import PPOTorchPolicy
from corral.agents.trainer import (
    NUM_AGENT_STEPS_SAMPLED,
    NUM_AGENT_STEPS_TRAINED,
    NUM_ENV_STEPS_SAMPLED,
    NUM_ENV_STEPS_TRAINED,
    Trainer,
)
from corral.agents.trainer_config import PPOConfig  # noqa: F401 - RLlib 1.13's path
from corral.execution import synchronous_parallel_sample
from corral.policy.sample_batch import SampleBatch
from corral.utils.config_spec import AnyOf, Bool, Float, Int, OneOf, Optional, Schedule
from corral.utils.deprecation import DEPRECATED_VALUE, deprecation_warning

logger = logging.getLogger(__name__)

DEFAULT_CONFIG = with_common_config(
    {
        # Use a critic (value function) as a baseline; required by GAE.
        "use_critic": True,
        # Use Generalized Advantage Estimation (GAE) with `lambda`.
        "use_gae": True,
        # The GAE lambda: 1.0 = Monte-Carlo returns, 0.0 = one-step TD.
        "lambda": 1.0,
        # Initial coefficient of the KL penalty (adapted towards `kl_target`).
        "kl_coeff": 0.2,
        # Steps per fragment collected by each worker per env.
        "rollout_fragment_length": 200,
        # Env steps per training batch (per SGD round).
        "train_batch_size": 4000,
        # Minibatch size of each SGD step within an epoch.
        "sgd_minibatch_size": 128,
        # Shuffle the train batch before each epoch (sequences stay whole for RNNs).
        "shuffle_sequences": True,
        # Epochs of SGD over each train batch.
        "num_sgd_iter": 30,
        # Learning rate.
        "lr": 5e-5,
        # [[timestep, lr], ...] piecewise-linear learning-rate schedule (None: constant).
        "lr_schedule": None,
        # Weight of the value-function loss (tune it with a shared value net).
        "vf_loss_coeff": 1.0,
        "model": {
            # Separate policy and value networks by default.
            "vf_share_layers": False,
        },
        # Weight of the entropy bonus.
        "entropy_coeff": 0.0,
        # [[timestep, coeff], ...] schedule for `entropy_coeff` (None: constant).
        "entropy_coeff_schedule": None,
        # PPO's clip parameter epsilon.
        "clip_param": 0.3,
        # Clip for the squared value error; sensitive to the reward scale.
        "vf_clip_param": 10.0,
        # Clip gradients to this global norm (None: no clipping).
        "grad_clip": None,
        # Target of the mean KL divergence per update.
        "kl_target": 0.01,
        # Whether to collect truncated fragments or complete episodes.
        "batch_mode": "truncate_episodes",
        "observation_filter": "NoFilter",
        # Deprecated: use `model: {vf_share_layers: ...}`.
        "vf_share_layers": DEPRECATED_VALUE,
    }
)

# Type and range of PPO's own keys (COMMON_CONFIG's are in COMMON_CONFIG_SPECS),
# checked when the trainer is built (see `corral.utils.config_spec`).
CONFIG_SPECS = {
    "use_critic": Bool(),
    "use_gae": Bool(),
    "lambda": Float(0, 1),
    "kl_coeff": Float(0),
    "sgd_minibatch_size": Int(1),
    "shuffle_sequences": Bool(),
    "num_sgd_iter": Int(1),
    "lr_schedule": Schedule(Float(0)),
    "vf_loss_coeff": Float(0),
    "entropy_coeff": Float(0),
    "entropy_coeff_schedule": Schedule(Float(0)),
    "clip_param": Float(0, lo_open=True),
    "vf_clip_param": Float(0, lo_open=True),
    "grad_clip": Optional(Float(0)),
    "kl_target": Float(0),
    "vf_share_layers": AnyOf(OneOf(DEPRECATED_VALUE), Bool()),
}


class PPOTrainer(Trainer):
    """Proximal Policy Optimization with GAE (arXiv:1707.06347)."""

    _name = "PPO"
    _default_config = DEFAULT_CONFIG
    _config_specs = CONFIG_SPECS
    _policy_class = PPOTorchPolicy

    def validate_config(self, config: dict) -> None:
        super().validate_config(config)
        if config["vf_share_layers"] != DEPRECATED_VALUE:
            deprecation_warning("vf_share_layers", "model.vf_share_layers")
            config["model"]["vf_share_layers"] = config["vf_share_layers"]
        if config["entropy_coeff"] < 0:
            raise ValueError(f"`entropy_coeff` must be >= 0.0, got {config['entropy_coeff']}.")
        if config["sgd_minibatch_size"] > config["train_batch_size"]:
            raise ValueError(
                f"`sgd_minibatch_size` ({config['sgd_minibatch_size']}) must be <= "
                f"`train_batch_size` ({config['train_batch_size']})."
            )
        if config["use_gae"] and not config["use_critic"]:
            raise ValueError("`use_gae=True` requires `use_critic=True`.")
        if config["batch_mode"] == "truncate_episodes" and not config["use_gae"]:
            raise ValueError(
                "Episode truncation is not supported without a value function "
                "(use_gae=False): set batch_mode='complete_episodes'."
            )

    def training_step(self) -> dict:
        # `train_batch_size` counts env steps, or agent steps per `count_steps_by`.
        by_agent = self.config["multiagent"]["count_steps_by"] == "agent_steps"
        size = self.config["train_batch_size"]
        batch = synchronous_parallel_sample(
            self.workers,
            max_env_steps=None if by_agent else size,
            max_agent_steps=size if by_agent else None,
        )
        self._counters[NUM_ENV_STEPS_SAMPLED] += batch.env_steps()
        self._counters[NUM_AGENT_STEPS_SAMPLED] += batch.agent_steps()
        ma_batch = batch.as_multi_agent()
        local = self.workers.local_worker()
        for pid, policy_batch in ma_batch.policy_batches.items():
            if local.is_policy_to_train(pid, ma_batch):
                standardize(policy_batch, SampleBatch.ADVANTAGES)
        results = self.learner_group.update(
            batch=ma_batch,
            num_epochs=self.config["num_sgd_iter"],
            minibatch_size=self.config["sgd_minibatch_size"],
            shuffle_batch_per_epoch=self.config["shuffle_sequences"],
            timesteps={"num_env_steps_sampled_lifetime": self._counters[NUM_ENV_STEPS_SAMPLED]},
        )
        self._counters[NUM_ENV_STEPS_TRAINED] += ma_batch.env_steps()
        self._counters[NUM_AGENT_STEPS_TRAINED] += ma_batch.agent_steps()
        self.workers.sync_weights(global_vars={"timestep": self._counters[NUM_ENV_STEPS_SAMPLED]})
        return self.learner_info_from(results)


def standardize(batch: SampleBatch, column: str) -> None:
    """Shifts and scales a column to mean 0, std 1 (in place)."""
    values = batch[column]
    batch[column] = ((values - values.mean()) / max(1e-4, float(values.std()))).astype(values.dtype)
