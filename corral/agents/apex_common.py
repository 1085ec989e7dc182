"""Ape-X (Horgan et al. 2018, "Distributed Prioritized Experience Replay",
arXiv:1803.00933), shared by Ape-X DQN (`corral.agents.dqn.apex`) and Ape-X DDPG
(`corral.agents.ddpg.apex`).

Ape-X is its learner (DQN's or DDPG's loss, unchanged) fed by many rollout workers
that explore each with its own constant amount of noise (a `PerWorker*` exploration:
worker i of N uses 0.4 ** (1 + 7 (i - 1) / (N - 1)) as its epsilon or noise scale) and
that compute the initial priorities of what they sample themselves
(`worker_side_prioritization`: |TD error| + eps by the worker's copy of the policy, in
the worker process), into one large prioritized replay buffer with n-step transitions.

On corral's local backend the replay "actor" is the driver's own
`MultiAgentReplayBuffer` (Ape-X's replay shards become one buffer in the driver process),
and sampling from the workers and learning alternate within each `training_step` (the
`OffPolicyTrainer` step) rather than running asynchronously; the driver adds each sampled
batch with the workers' priorities and re-prioritizes replayed rows from the learner's TD
errors. Weights go to the workers after every update round.
"""

from __future__ import annotations

import logging

from corral.agents.config import PartialTrainerConfigDict, TrainerConfigDict
from corral.agents.config_merge import merge_trainer_configs
from corral.utils.config_spec import Bool
from corral.utils.deprecation import log_once

logger = logging.getLogger(__name__)

# RLlib's Ape-X `optimizer` keys. They configured its asynchronous replay actors and
# learner thread, which corral does not build; corral's `optimizer` holds the optimiser's
# (Adam's) arguments, so they are left out of the defaults and dropped from user configs.
APEX_OPTIMIZER_KEYS = ("max_weight_sync_delay", "num_replay_buffer_shards", "debug")

# Ape-X's settings (RLlib 1.13's, the same for Ape-X DQN and Ape-X DDPG) over its learner's
# DEFAULT_CONFIG (RLlib's `optimizer` block aside, see `APEX_OPTIMIZER_KEYS`).
APEX_CONFIG: PartialTrainerConfigDict = {
    # Rewards summed into each target (n-step returns, sec. 3 of the paper).
    "n_step": 3,
    # Many workers, each exploring with its own constant noise.
    "num_workers": 32,
    # The replay buffer (see `OFF_POLICY_CONFIG`), large: RLlib's `buffer_size: 2000000`
    # (its four replay shards are one buffer in the driver here).
    "replay_buffer_config": {"capacity": 2000000},
    # Env steps sampled before the first update.
    "learning_starts": 50000,
    # Rows replayed per gradient step.
    "train_batch_size": 512,
    # Env steps per worker fragment.
    "rollout_fragment_length": 50,
    # Sampled env steps between target-network updates.
    "target_network_update_freq": 500000,
    # Minimum env steps per `train()` call.
    "timesteps_per_iteration": 25000,
    # Minimum seconds per `train()` call.
    "min_iter_time_s": 30,
    # The workers compute the initial priorities of what they sample.
    "worker_side_prioritization": True,
    # Keep the replay buffer shards on the driver's node: corral's one buffer is in the
    # driver process (False is not built).
    "replay_buffer_shards_colocated_with_driver": True,
}


def apex_default_config(
    learner_config: TrainerConfigDict, overrides: PartialTrainerConfigDict
) -> TrainerConfigDict:
    """An Ape-X algorithm's `DEFAULT_CONFIG`: its learner's (DQN's, DDPG's) with
    `APEX_CONFIG` and the algorithm's own `overrides` (its per-worker exploration) on top.

    Args:
        learner_config: the learner algorithm's `DEFAULT_CONFIG`.
        overrides: the Ape-X algorithm's own values (e.g. `exploration_config`).

    Returns:
        A new config dict (the arguments are not changed).
    """
    return merge_trainer_configs(
        learner_config, {**APEX_CONFIG, **overrides}, allow_unknown_configs=True
    )


def drop_apex_optimizer_keys(config: dict) -> None:
    """Removes RLlib's Ape-X keys (`APEX_OPTIMIZER_KEYS`) from `config["optimizer"]`, with
    a warning, so that configs written for RLlib run (the optimiser would refuse them)."""
    optimizer = config.get("optimizer")
    if not isinstance(optimizer, dict):
        return
    dropped = [key for key in APEX_OPTIMIZER_KEYS if key in optimizer]
    for key in dropped:
        del optimizer[key]
    if dropped and log_once("apex_optimizer_keys"):
        logger.warning(
            "Ape-X: ignoring optimizer keys %s: they configure RLlib's replay actors and "
            "learner thread; corral keeps one replay buffer in the driver and learns in "
            "the training step.",
            dropped,
        )


class ApexTrainerMixin:
    """The trainer side of Ape-X, shared by `ApexTrainer` and `ApexDDPGTrainer` (put it
    before the learner's trainer class in the bases): accepts RLlib's Ape-X `optimizer`
    keys (`drop_apex_optimizer_keys`)."""

    # Type of Ape-X's own key (the others are its learner's).
    _config_specs = {"replay_buffer_shards_colocated_with_driver": Bool()}

    def validate_config(self, config: dict) -> None:
        drop_apex_optimizer_keys(config)
        super().validate_config(config)  # type: ignore[misc]


__all__ = [
    "APEX_CONFIG",
    "APEX_OPTIMIZER_KEYS",
    "ApexTrainerMixin",
    "apex_default_config",
    "drop_apex_optimizer_keys",
]
