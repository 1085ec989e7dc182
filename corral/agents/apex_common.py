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
and sampling from the workers and learning alternate within each `training_step` rather
than running asynchronously; the driver adds each sampled batch with the workers'
priorities and re-prioritizes replayed rows from the learner's TD errors. Weights go to
the workers after every update round. The step is RLlib 1.13's Ape-X
`training_iteration`, method by method (`ApexTrainerMixin`), so that a subclass can
override one part of it (e.g. `update_target_networks`); what it does is the
`OffPolicyTrainer` step's.
"""

from __future__ import annotations

import logging
from typing import Any

from corral.agents.config import PartialTrainerConfigDict, TrainerConfigDict
from corral.agents.config_merge import merge_trainer_configs
from corral.agents.off_policy import OffPolicyTrainer
from corral.execution.rollout_ops import synchronous_parallel_sample
from corral.execution.train_ops import learner_results_per_iteration
from corral.policy.sample_batch import MultiAgentBatch, concat_samples
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


class ApexTrainerMixin(OffPolicyTrainer):
    """The trainer side of Ape-X, shared by `ApexTrainer` and `ApexDDPGTrainer` (put it
    before the learner's trainer class in the bases): accepts RLlib's Ape-X `optimizer`
    keys (`drop_apex_optimizer_keys`), and runs each `training_step` as RLlib 1.13's Ape-X
    `training_iteration` ran, through its methods (in the order corral's synchronous step
    needs: the weights go out after the update, not before):

    1. `get_samples_and_store_to_replay_buffers`: one fragment per worker, into the buffer;
    2. `sample_from_replay_buffer_place_on_learner_queue_non_blocking`: replay and train;
    3. `update_replay_sample_priority`: new priorities, then `update_target_networks`;
    4. `update_workers`: the new weights to the workers.
    """

    # Type of Ape-X's own key (the others are its learner's).
    _config_specs = {"replay_buffer_shards_colocated_with_driver": Bool()}

    def validate_config(self, config: dict) -> None:
        drop_apex_optimizer_keys(config)
        super().validate_config(config)

    def setup(self, config: dict) -> None:
        super().setup(config)
        # Train batches updated on and not yet re-prioritized: (replayed, as trained).
        self._trained_not_reprioritized: list[tuple[MultiAgentBatch, MultiAgentBatch]] = []
        # Whether the learner's weights changed since `update_workers` last sent them.
        self._weights_updated = False

    @learner_results_per_iteration
    def training_step(self) -> dict:
        samples_ready = self.get_samples_and_store_to_replay_buffers()
        # Env steps per worker: corral's `training_intensity` counts sampled env steps (as
        # its other off-policy algorithms do; RLlib 1.13's Ape-X passed agent steps).
        env_steps = {
            worker: sum(info["env_steps"] for info in infos)
            for worker, infos in samples_ready.items()
        }
        self.sample_from_replay_buffer_place_on_learner_queue_non_blocking(env_steps)
        self.update_replay_sample_priority()
        self.update_workers(env_steps)
        return self._last_learner_info

    def get_samples_and_store_to_replay_buffers(self) -> dict[Any, list[dict[str, int]]]:
        """One fragment from each remote worker (from the local worker when there are
        none), counted as sampled and added to the replay buffer (with the workers'
        priorities under `worker_side_prioritization`).

        RLlib 1.13's workers sent their batches to random replay actors themselves;
        corral's one buffer is in the driver, which adds the batches.

        Returns:
            ``{worker: [{"agent_steps": ..., "env_steps": ...}]}``: what each worker
            (handle, or the local `RolloutWorker`) sampled, one entry per batch.
        """
        batches = synchronous_parallel_sample(self.workers, concat=False)
        workers = self.workers.remote_workers() or [self.workers.local_worker()]
        self.store_sampled(concat_samples(batches))
        return {
            worker: [{"agent_steps": b.agent_steps(), "env_steps": b.env_steps()}]
            for worker, b in zip(workers, batches)
        }

    def sample_from_replay_buffer_place_on_learner_queue_non_blocking(
        self, num_samples_collected: dict[Any, int]
    ) -> None:
        """Trains on replayed rows in proportion to the steps just sampled.

        `training_intensity` (see `OffPolicyTrainer.updates_per_env_step`) turns the
        sampled steps into gradient steps; once `learning_starts` env steps were
        sampled, that many train batches are replayed and the learners update on them.
        RLlib 1.13 put the replayed batches on its learner thread's queue; corral's
        learner trains in the driver, here, so the update is done when this returns (the
        batches wait for `update_replay_sample_priority`).

        Args:
            num_samples_collected: env steps sampled per worker since the last call.
        """
        trained = self.train_on_replay(sum(num_samples_collected.values()))
        if trained is not None:
            self._trained_not_reprioritized.append(trained)
            self._weights_updated = True

    def update_replay_sample_priority(self) -> int:
        """Re-prioritizes the rows trained on since the last call from the TD errors of
        their update (with prioritized replay), and updates the target networks when due
        (`update_target_networks`).

        Returns:
            The env steps trained on since the last call.
        """
        trained = 0
        for replayed, train_batch in self._trained_not_reprioritized:
            self.reprioritize(replayed, train_batch)
            trained += train_batch.env_steps()
        self._trained_not_reprioritized.clear()
        if trained:
            self.update_target_networks(trained)
        return trained

    def update_target_networks(self, num_new_trained_samples: int) -> None:
        """Updates the target networks when due, after `num_new_trained_samples` steps
        were trained on: every `target_network_update_freq` sampled env steps (the
        `OffPolicyTrainer` rule, as corral's DQN and DDPG count them; RLlib 1.13's Ape-X
        counted trained steps), checked after each round that trained.

        Args:
            num_new_trained_samples: env steps trained on since the last call (0: nothing
                trained, no update).
        """
        if num_new_trained_samples > 0:
            self._maybe_update_targets()

    def update_workers(self, _num_samples_ready: dict[Any, int]) -> int:
        """Sends the learner's weights to the remote workers if they changed since the
        last call (and, with `worker_side_prioritization`, the target networks the
        workers prioritize with), with the env steps sampled so far as the workers'
        (and the local worker's) `timestep`.

        RLlib 1.13 updated the workers in `_num_samples_ready` once they had sampled
        `max_weight_sync_delay` steps; corral's workers all sample in every step and get
        the weights after every update (the sync sends only the policies that changed).

        Args:
            _num_samples_ready: steps sampled per worker in this step.

        Returns:
            The number of remote workers whose weights were updated.
        """
        if not self._weights_updated:
            return 0
        self._weights_updated = False
        self.sync_workers_after_update()
        return len(self.workers.remote_workers())


__all__ = [
    "APEX_CONFIG",
    "APEX_OPTIMIZER_KEYS",
    "ApexTrainerMixin",
    "apex_default_config",
    "drop_apex_optimizer_keys",
]
