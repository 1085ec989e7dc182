"""PPO (Schulman et al. 2017) through the classic Trainer API.

`DEFAULT_CONFIG` keeps RLlib 1.x's PPO defaults; tuned settings live in
`tuned_examples/ppo/`. One training step: sample `train_batch_size` env steps
from the workers (postprocessed with GAE there), standardise advantages,
run `num_sgd_iter` epochs of minibatch SGD in the learner, push the new
weights to the workers.
"""

from __future__ import annotations

import logging
from typing import Any

from corral.agents.on_policy import (
    ActorCriticTrainer,
    sample_and_train_once,
    with_actor_critic_config,
)
from corral.agents.ppo.ppo_torch_policy import PPOTorchPolicy
from corral.agents.trainer_config import PPOConfig  # noqa: F401 - RLlib 1.13's path
from corral.execution.train_ops import learner_results_per_iteration
from corral.policy.sample_batch import MultiAgentBatch, SampleBatch
from corral.utils.config_spec import AnyOf, Bool, Float, Int, OneOf, Rule
from corral.utils.deprecation import DEPRECATED_VALUE, deprecation_warning

logger = logging.getLogger(__name__)

DEFAULT_CONFIG = with_actor_critic_config(
    {
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
        # Weight of the value-function loss (tune it with a shared value net).
        "vf_loss_coeff": 1.0,
        "model": {
            # Separate policy and value networks by default.
            "vf_share_layers": False,
        },
        # PPO's clip parameter epsilon.
        "clip_param": 0.3,
        # Clip for the squared value error; sensitive to the reward scale.
        "vf_clip_param": 10.0,
        # Target of the mean KL divergence per update.
        "kl_target": 0.01,
        # Whether to collect truncated fragments or complete episodes.
        "batch_mode": "truncate_episodes",
        "observation_filter": "NoFilter",
        # Deprecated: use `model: {vf_share_layers: ...}`.
        "vf_share_layers": DEPRECATED_VALUE,
    }
)

# Type and range of PPO's own keys (the actor-critic keys are in
# `ACTOR_CRITIC_CONFIG_SPECS`, COMMON_CONFIG's in COMMON_CONFIG_SPECS), checked when the
# trainer is built (see `corral.utils.config_spec`).
CONFIG_SPECS = {
    "kl_coeff": Float(0),
    "sgd_minibatch_size": Int(1),
    "shuffle_sequences": Bool(),
    "num_sgd_iter": Int(1),
    "clip_param": Float(0, lo_open=True),
    "vf_clip_param": Float(0, lo_open=True),
    "kl_target": Float(0),
    "vf_share_layers": AnyOf(OneOf(DEPRECATED_VALUE), Bool()),
}


class PPOTrainer(ActorCriticTrainer):
    """Proximal Policy Optimization with GAE (arXiv:1707.06347)."""

    _name = "PPO"
    _default_config = DEFAULT_CONFIG
    _config_specs = CONFIG_SPECS
    _policy_class = PPOTorchPolicy
    _config_rules = (
        Rule(
            lambda c: c["sgd_minibatch_size"] <= c["train_batch_size"],
            "`sgd_minibatch_size` ({sgd_minibatch_size}) must be <= `train_batch_size` "
            "({train_batch_size}).",
        ),
        Rule(
            lambda c: c["use_gae"] or c["batch_mode"] != "truncate_episodes",
            "Episode truncation is not supported without a value function "
            "(use_gae=False): set batch_mode='complete_episodes'.",
        ),
    )

    def validate_config(self, config: dict) -> None:
        move_deprecated_vf_share_layers(config)
        super().validate_config(config)

    @learner_results_per_iteration
    def training_step(self) -> dict:
        """The on-policy step with PPO's hooks named explicitly, so that
        `build_trainer(training_step=PPOTrainer.training_step)` (RLlib 1.x's way of
        reusing PPO's step) runs PPO's step on a trainer class of its own."""
        return sample_and_train_once(
            self,
            lambda batch: PPOTrainer.before_learning(self, batch),
            **PPOTrainer.sgd_settings(self),
        )

    def sgd_settings(self) -> dict[str, Any]:
        """`num_sgd_iter` epochs of `sgd_minibatch_size` minibatches (shuffled per
        `shuffle_sequences`)."""
        return {
            "num_epochs": self.config["num_sgd_iter"],
            "minibatch_size": self.config["sgd_minibatch_size"],
            "shuffle_batch_per_epoch": self.config["shuffle_sequences"],
        }

    def before_learning(self, batch: MultiAgentBatch) -> None:
        """Standardises the advantages of the policies trained on `batch`."""
        local = self.workers.local_worker()
        for pid, policy_batch in batch.policy_batches.items():
            if local.is_policy_to_train(pid, batch):
                standardize(policy_batch, SampleBatch.ADVANTAGES)


def move_deprecated_vf_share_layers(config: dict) -> None:
    """RLlib 1.x's top-level `vf_share_layers` (deprecated), when set, becomes
    `model.vf_share_layers`, with a deprecation warning."""
    if config["vf_share_layers"] != DEPRECATED_VALUE:
        deprecation_warning("vf_share_layers", "model.vf_share_layers")
        config["model"]["vf_share_layers"] = config["vf_share_layers"]


def standardize(batch: SampleBatch, column: str) -> None:
    """Shifts and scales a column to mean 0, std 1 (in place)."""
    values = batch[column]
    batch[column] = ((values - values.mean()) / max(1e-4, float(values.std()))).astype(values.dtype)
