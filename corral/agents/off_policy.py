"""The replay-based training step shared by SimpleQ/DQN, SAC, DDPG and TD3, and the
replay config block their `DEFAULT_CONFIG`s merge in (`with_off_policy_config`).

One `training_step`: sample one fragment per worker (`rollout_fragment_length`
x `num_envs_per_worker` env steps each), add it to the replay buffer, and, once
`learning_starts` env steps were sampled, run as many gradient steps as
`training_intensity` asks for, all in one `Learner.update` call over a block of
`k x train_batch_size` replayed rows (minibatches of `train_batch_size`). That
keeps RLlib 1.x's ratio of trained to sampled steps while paying the per-call
overhead (buffer sampling, numpy -> torch, metrics, weight sync) once per block
instead of once per gradient step. With `rollout_fragment_length: 64` and
`training_intensity: train_batch_size`, 64 env steps are followed by 64
gradient steps: one per env step, as in Haarnoja et al.'s SAC.

The policy-side pieces (target networks, n-step postprocessing, `bootstrap_discount`)
are in `corral.policy.torch_mixins` (re-exported here).
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np

from corral.agents.config import PartialTrainerConfigDict, TrainerConfigDict, with_common_config
from corral.agents.config_merge import merge_trainer_configs
from corral.agents.sequence_replay import SequenceReplayMixin
from corral.agents.trainer import Trainer
from corral.evaluation.backend import wait_all
from corral.execution.common import (
    LAST_TARGET_UPDATE_TS,
    NUM_ENV_STEPS_SAMPLED,
    NUM_TARGET_UPDATES,
    count_sampled,
)
from corral.execution.rollout_ops import synchronous_parallel_sample
from corral.execution.train_ops import learner_results_per_iteration, update_learners
from corral.policy.sample_batch import MultiAgentBatch, SampleBatch
from corral.policy.torch_mixins import (
    PRIO_WEIGHTS,
    REPLAY_TRAIN_COLUMNS,
    TARGET_PREFIX,
    TargetNetworkStateMixin,
    bootstrap_discount,
    polyak_update,
)
from corral.utils import config_spec as cs
from corral.utils.deprecation import DEPRECATED_VALUE, deprecation_warning, log_once
from corral.utils.numpy import convert_to_numpy
from corral.utils.replay_buffers import BATCH_INDEXES, MultiAgentReplayBuffer

logger = logging.getLogger(__name__)

# The replay keys of every off-policy algorithm (RLlib 1.x's names), merged into each
# one's DEFAULT_CONFIG by `with_off_policy_config`; an algorithm states only the values
# it changes. The comment above each key is its documentation.
OFF_POLICY_CONFIG: PartialTrainerConfigDict = {
    # === Replay buffer ===
    # Deprecated: use `replay_buffer_config: {capacity: ...}`.
    "buffer_size": DEPRECATED_VALUE,
    # The replay buffer: one `MultiAgentReplayBuffer` holding `capacity`
    # transitions per policy (corral.utils.replay_buffers). `type`
    # "MultiAgentPrioritizedReplayBuffer" turns prioritized replay on, as
    # `prioritized_replay: True` does. RLlib 1.13's keys inside this dict
    # (`prioritized_replay_alpha`, `learning_starts`, `replay_batch_size`, ...)
    # are taken too: each one that is set sets the top-level key of its name.
    "replay_buffer_config": {
        "type": "MultiAgentReplayBuffer",
        "capacity": 50000,
        # RLlib 1.13 spells these five inside `replay_buffer_config`: None leaves each
        # to the top-level key of the same name, a value here sets that key (both set,
        # to different values, is an error).
        "prioritized_replay": None,
        "prioritized_replay_alpha": None,
        "prioritized_replay_beta": None,
        "prioritized_replay_eps": None,
        "learning_starts": None,
        # RLlib 1.13's rows per replayed batch: None or `train_batch_size` (the rows
        # of each gradient step here).
        "replay_batch_size": None,
        # Env steps per stored item: None or 1 (R2D2 and RNNSAC store sequences and
        # set their length themselves).
        "replay_sequence_length": None,
        # RLlib 1.13's choice between its two replay buffer APIs; corral has one, and
        # takes either value.
        "_enable_replay_buffer_api": True,
        # True (RLlib 1.13's Ape-X): a custom `execution_plan` gets no
        # `local_replay_buffer` (corral's Ape-X keeps its one buffer in the driver).
        "no_local_replay_buffer": None,
    },
    # Write the replay buffer into checkpoints (safetensors + JSON), so that
    # a restored trainer continues with the same experience.
    "store_buffer_in_checkpoints": False,
    # Prioritized replay (Schaul et al. 2016): sample transitions in proportion
    # to |TD error|^alpha.
    "prioritized_replay": False,
    # Prioritisation exponent alpha (0: uniform).
    "prioritized_replay_alpha": 0.6,
    # Importance-sampling exponent beta at the start ...
    "prioritized_replay_beta": 0.4,
    # ... and after `prioritized_replay_beta_annealing_timesteps` env steps
    # (beta moves linearly in between).
    "final_prioritized_replay_beta": 0.4,
    "prioritized_replay_beta_annealing_timesteps": 20000,
    # Added to |TD error| to get a priority (keeps every transition sampleable).
    "prioritized_replay_eps": 1e-6,
    # Ape-X's worker-side prioritization: each rollout worker computes the initial
    # priorities (|TD error| + eps) of the transitions it samples with its own copy of
    # the policy, and the driver adds them to the buffer with those priorities instead
    # of the largest one so far. Needs prioritized replay.
    "worker_side_prioritization": False,
    # === Training ===
    # Trained (replayed) rows per sampled env step; None: one train batch per
    # sampled fragment round (RLlib's "natural" ratio); e.g. `train_batch_size`
    # is one gradient step per env step.
    "training_intensity": None,
    # Env steps sampled (with the initial exploration) before the first update.
    "learning_starts": 1000,
    # Sampled env steps between target-network updates (0: the policy moves its
    # targets by `tau` after each gradient step).
    "target_network_update_freq": 0,
    # Target update: target <- tau * online + (1 - tau) * target (1.0: a hard copy).
    "tau": 1.0,
    # Clip gradients to this global norm, each optimiser parameter group on its own
    # (SAC's and DDPG's actor, critics, ...) (None: no clipping).
    "grad_clip": None,
    # Rows replayed per gradient step.
    "train_batch_size": 256,
    # === Sampling (see COMMON_CONFIG) ===
    "rollout_fragment_length": 1,
    "num_workers": 0,
    "min_iter_time_s": 1,
}


def with_off_policy_config(extra_config: PartialTrainerConfigDict) -> TrainerConfigDict:
    """`COMMON_CONFIG` + `OFF_POLICY_CONFIG` + an algorithm's own keys (and the values
    it changes): how an off-policy algorithm builds its `DEFAULT_CONFIG`."""
    return with_common_config(
        merge_trainer_configs(OFF_POLICY_CONFIG, extra_config, allow_unknown_configs=True)
    )


# Transition columns kept in the replay buffer (the rest of a sample batch is dropped):
# what the policies train on, but the weights, which the buffer adds when it samples.
REPLAY_COLUMNS = tuple(c for c in REPLAY_TRAIN_COLUMNS if c != PRIO_WEIGHTS)
# Kept as well in lockstep replay mode: they group the rows into env steps.
LOCKSTEP_COLUMNS = (SampleBatch.EPS_ID, SampleBatch.T)

# Buffer sizes and step counts are cast with int(), so 1e6 is fine.
_COUNT = cs.Int(0, integral_float_ok=True)

# Type and range of the keys of `OFF_POLICY_CONFIG` (and `n_step`; an algorithm's own
# keys are in its `CONFIG_SPECS`), checked when the trainer is built.
REPLAY_CONFIG_SPECS = {
    "buffer_size": cs.AnyOf(cs.OneOf(DEPRECATED_VALUE), cs.Int(1, integral_float_ok=True)),
    "replay_buffer_config": cs.Dict(
        {
            "type": cs.AnyOf(cs.Str(), cs.CallableSpec("a replay buffer class")),
            "capacity": cs.Int(1, integral_float_ok=True),
            "prioritized_replay": cs.Optional(cs.Bool()),
            "prioritized_replay_alpha": cs.Optional(cs.Float(0, 1)),
            "prioritized_replay_beta": cs.Optional(cs.Float(0, 1)),
            "prioritized_replay_eps": cs.Optional(cs.Float(0, lo_open=True)),
            "learning_starts": cs.Optional(_COUNT),
            "replay_batch_size": cs.Optional(cs.Int(1)),
            "replay_sequence_length": cs.Optional(cs.Int(-1)),
            "_enable_replay_buffer_api": cs.Bool(),
            "no_local_replay_buffer": cs.Optional(cs.Bool()),
        },
        what='a dict {"type": ..., "capacity": ..., ...}',
    ),
    "store_buffer_in_checkpoints": cs.Bool(),
    "prioritized_replay": cs.Bool(),
    # Schaul et al. 2016: alpha in [0, 1] (0: uniform, 1: fully prioritized) and the
    # importance exponent beta in [0, 1]; beyond, p^alpha and (N P)^-beta under- or
    # overflow float64 for ordinary priorities. eps > 0 keeps every priority > 0.
    "prioritized_replay_alpha": cs.Float(0, 1),
    "prioritized_replay_beta": cs.Float(0, 1),
    "final_prioritized_replay_beta": cs.Float(0, 1),
    "prioritized_replay_beta_annealing_timesteps": _COUNT,
    "prioritized_replay_eps": cs.Float(0, lo_open=True),
    "training_intensity": cs.Optional(cs.Float(0, lo_open=True)),
    "learning_starts": _COUNT,
    "target_network_update_freq": _COUNT,
    "worker_side_prioritization": cs.Bool(),
    "tau": cs.Float(0, 1),
    "grad_clip": cs.Optional(cs.Float(0)),
    "n_step": cs.Int(1),
}
OFF_POLICY_CONFIG_SPECS = REPLAY_CONFIG_SPECS


class OffPolicyTrainer(Trainer):
    """A trainer that learns from a replay buffer of its own past transitions.

    Config keys read (RLlib 1.x's names): `replay_buffer_config` (`capacity`),
    `buffer_size` (deprecated alias of the capacity), `prioritized_replay`
    (+ `_alpha`, `_beta`, `_eps`), `worker_side_prioritization`, `learning_starts`,
    `train_batch_size`, `training_intensity`, `target_network_update_freq`, `tau`,
    `multiagent.replay_mode` ("independent" or "lockstep").
    """

    _config_specs = REPLAY_CONFIG_SPECS

    def setup(self, config: dict) -> None:
        super().setup(config)
        cfg = self.config
        self.local_replay_buffer = make_replay_buffer(cfg)
        self._train_credit = 0.0
        self._last_learner_info: dict = {}
        # What the workers' target networks were last synced for (`_sync_worker_targets`).
        self._synced_targets: tuple | None = None
        if cfg.get("worker_side_prioritization"):
            # The workers prioritize with the driver's networks from their first sample
            # on (as Ape-X's actors start from the learner's parameters).
            self.workers.sync_weights()
            sync_target_networks(self.workers, trainable_only=False)

    def validate_config(self, config: dict) -> None:
        # Ranges (`training_intensity` > 0, ...) are in REPLAY_CONFIG_SPECS, checks
        # across keys in each algorithm's `_config_rules`.
        check_replay_config(config)
        super().validate_config(config)  # (the types and ranges, nested keys included)
        adopt_nested_replay_keys(
            config, self.get_default_config(), sequences=isinstance(self, SequenceReplayMixin)
        )
        check_worker_side_prioritization(config, getattr(self, "_name", type(self).__name__))
        cs.check_rules(config, type(self))

    def _extra_checkpoint_state(self) -> dict:
        """The replay buffer (when `store_buffer_in_checkpoints`) and the train credit."""
        state: dict = {"train_credit": self._train_credit}
        if self.config.get("store_buffer_in_checkpoints"):
            state["replay_buffer"] = self.local_replay_buffer.get_state()
        return state

    def _set_extra_checkpoint_state(self, state: dict) -> None:
        self._train_credit = float(state.get("train_credit", 0.0))
        self._synced_targets = None  # restored targets: the workers get them next step
        if "replay_buffer" in state and self.config.get("store_buffer_in_checkpoints"):
            self.local_replay_buffer.set_state(state["replay_buffer"])

    def updates_per_env_step(self) -> float:
        """Gradient steps per sampled env step.

        `training_intensity` is RLlib's ratio of trained rows to sampled env
        steps; without it, one train batch per sampled fragment round.
        """
        cfg = self.config
        intensity = cfg.get("training_intensity")
        if intensity:
            return float(intensity) / cfg["train_batch_size"]
        per_round = (
            cfg["rollout_fragment_length"] * cfg["num_envs_per_worker"] * max(cfg["num_workers"], 1)
        )
        return 1.0 / per_round

    @learner_results_per_iteration
    def training_step(self) -> dict:
        batch = synchronous_parallel_sample(self.workers)
        self.store_sampled(batch)
        trained = self.train_on_replay(batch.env_steps())
        if trained is not None:
            self.reprioritize(*trained)
            self._maybe_update_targets()
            self.sync_workers_after_update()
        return self._last_learner_info

    # -- the parts of one step (Ape-X's 1.13 methods call them too) -----------

    def store_sampled(self, batch: SampleBatch | MultiAgentBatch) -> None:
        """Counts a sampled batch and adds its transitions to the replay buffer."""
        count_sampled(self._counters, batch)
        self.local_replay_buffer.add(self.replay_columns(batch))

    def train_on_replay(self, env_steps: int) -> tuple[MultiAgentBatch, MultiAgentBatch] | None:
        """Gradient steps for `env_steps` newly sampled env steps (`updates_per_env_step`;
        none before `learning_starts`): that many train batches replayed and the learners
        updated on them.

        Returns:
            (the rows as replayed, as the learners trained on them), or None when no
            gradient step was due.
        """
        cfg = self.config
        if self._counters[NUM_ENV_STEPS_SAMPLED] < cfg["learning_starts"]:
            return None
        self._train_credit += env_steps * self.updates_per_env_step()
        num_updates = int(self._train_credit)
        self._train_credit -= num_updates
        if num_updates == 0:
            return None
        prioritized = self.local_replay_buffer.prioritized
        if prioritized:
            self.local_replay_buffer.beta = self._annealed_beta()
        replayed, train_batch, minibatch_size = self.replay(num_updates)
        if prioritized:
            self._start_td_error_logs(train_batch)
        results = update_learners(self, train_batch, minibatch_size=minibatch_size)
        if results is not None:  # (None: `train()` reduces the iteration's results)
            self._last_learner_info = self.learner_info_from(results)
        return replayed, train_batch

    def reprioritize(self, replayed: MultiAgentBatch, train_batch: MultiAgentBatch) -> None:
        """With prioritized replay, the trained rows' new priorities (`_update_priorities`)."""
        if self.local_replay_buffer.prioritized:
            self._update_priorities(replayed, train_batch)

    def sync_workers_after_update(self) -> None:
        """The new weights to the workers, with the env steps sampled so far as their
        `timestep` (and with `worker_side_prioritization` the target networks they
        prioritize with)."""
        self.workers.sync_weights(global_vars={"timestep": self._counters[NUM_ENV_STEPS_SAMPLED]})
        if self.config.get("worker_side_prioritization"):
            self._sync_worker_targets()

    # -- what an algorithm replays (R2D2 replays sequences) ------------------

    def replay_columns(self, batch: SampleBatch | MultiAgentBatch) -> Any:
        """What of a sampled batch goes into the buffer: the transitions' columns (plus
        each row's env step in lockstep mode, and with `worker_side_prioritization` the
        priorities the workers computed, which the buffer takes as the rows' initial
        priorities)."""
        lockstep = self.local_replay_buffer.replay_mode == "lockstep"
        extra_columns = LOCKSTEP_COLUMNS if lockstep else ()
        if self.config.get("worker_side_prioritization"):
            _warn_missing_priorities(batch)
            extra_columns = (*extra_columns, PRIO_WEIGHTS)
        return _transitions(batch, extra_columns)

    def replay(self, num_updates: int) -> tuple[MultiAgentBatch, MultiAgentBatch, int]:
        """`num_updates` train batches from the buffer: (the rows as replayed, as the
        learners get them, rows per gradient step)."""
        tbs = self.config["train_batch_size"]
        replayed = self.local_replay_buffer.sample(num_updates * tbs)
        return replayed, replayed, tbs

    def _iteration_learner_info(self, learner_info: dict) -> dict:
        """Kept for the iterations that train on nothing (before `learning_starts`, or
        between updates at a low `training_intensity`): they report the last info."""
        self._last_learner_info = learner_info
        return learner_info

    def _annealed_beta(self) -> float:
        """Importance-sampling exponent, linear from `prioritized_replay_beta` to
        `final_prioritized_replay_beta` over `..._beta_annealing_timesteps` steps."""
        cfg = self.config
        start, end = cfg["prioritized_replay_beta"], cfg["final_prioritized_replay_beta"]
        horizon = max(1, cfg["prioritized_replay_beta_annealing_timesteps"])
        frac = min(1.0, self._counters[NUM_ENV_STEPS_SAMPLED] / horizon)
        return start + frac * (end - start)

    def _start_td_error_logs(self, train_batch: MultiAgentBatch) -> None:
        """Asks each policy that can (`start_td_error_log`) to keep its losses' TD errors."""
        local = self.workers.local_worker()
        for pid in train_batch.policy_batches:
            start = getattr(local.get_policy(pid), "start_td_error_log", None)
            if start is not None:
                start()

    def _update_priorities(self, replayed: MultiAgentBatch, train_batch: MultiAgentBatch) -> None:
        """New priorities from the TD errors of the update's own losses (one per
        trained row, as RLlib 1.x's `td_error` fetch); where a policy logged none, not
        one per row or a non-finite one (a skipped minibatch), from `compute_td_error`.
        (Rows are replayed as trained: `replayed` is `train_batch`.)"""
        local = self.workers.local_worker()
        updates = {}
        for pid, policy_batch in train_batch.policy_batches.items():
            if not local.is_policy_to_train(pid, train_batch):
                continue  # not trained here (e.g. another trainer's policy): no TD errors
            policy: Any = local.get_policy(pid)
            pop = getattr(policy, "pop_td_errors", None)
            td_error = td_errors_of_update(policy, policy_batch, pop() if pop else None)
            if td_error is not None:
                updates[pid] = (policy_batch[BATCH_INDEXES], td_error)
        self.local_replay_buffer.update_priorities(updates)

    def _sync_worker_targets(self) -> None:
        """The remote workers' target networks <- the driver's, when they may differ:
        after every update with soft targets (`target_network_update_freq` 0: the policy
        moves them by `tau` each gradient step); otherwise only after a target update,
        or once the workers (one recreated) or the policies to train changed, or the
        trainer was restored. (Sending them every step cost a weights copy per worker
        per step, for networks that move every `target_network_update_freq` steps.)"""
        if self.config.get("target_network_update_freq"):
            key = (
                self._counters[NUM_TARGET_UPDATES],
                tuple(self.workers.remote_workers()),
                tuple(sorted(self.workers.local_worker().get_policies_to_train())),
            )
            if key == self._synced_targets:  # (handles compare by identity)
                return
            self._synced_targets = key
        sync_target_networks(self.workers)

    def _maybe_update_targets(self) -> None:
        """Hard/soft target updates every `target_network_update_freq` sampled steps
        (0: the policy moves its targets by `tau` after each gradient step)."""
        freq = self.config.get("target_network_update_freq") or 0
        sampled = self._counters[NUM_ENV_STEPS_SAMPLED]
        if freq and sampled - self._counters[LAST_TARGET_UPDATE_TS] >= freq:
            self.workers.local_worker().foreach_trainable_policy(
                lambda p, _pid: p.update_target(self.config["tau"])
            )
            self._counters[NUM_TARGET_UPDATES] += 1
            self._counters[LAST_TARGET_UPDATE_TS] = sampled


def check_replay_config(config: dict) -> None:
    """The deprecated `buffer_size`: copied into `replay_buffer_config.capacity` (with a
    warning) and reset, so that validating the config again does not warn twice."""
    if config.get("buffer_size", DEPRECATED_VALUE) != DEPRECATED_VALUE:
        deprecation_warning("buffer_size", "replay_buffer_config: {capacity: ...}")
        config["replay_buffer_config"]["capacity"] = int(config["buffer_size"])
        config["buffer_size"] = DEPRECATED_VALUE


# RLlib 1.13's keys inside `replay_buffer_config` that are top-level keys here.
NESTED_REPLAY_KEYS = (
    "prioritized_replay",
    "prioritized_replay_alpha",
    "prioritized_replay_beta",
    "prioritized_replay_eps",
    "learning_starts",
)


def adopt_nested_replay_keys(config: dict, defaults: dict, sequences: bool = False) -> None:
    """RLlib 1.13's spelling, `replay_buffer_config: {prioritized_replay_alpha: ...,
    learning_starts: ...}`: each such value (not None) becomes the top-level key's.

    Args:
        config: the trainer config (its nested types and ranges already checked).
        defaults: the algorithm's `DEFAULT_CONFIG`, to tell a top-level key the user
            set from one left at its default.
        sequences: the algorithm stores sequences (sets `replay_sequence_length`).

    Raises:
        ValueError: a key set in both places to different values; a `replay_batch_size`
            other than `train_batch_size`; a `replay_sequence_length` other than 1 for
            an algorithm that stores single steps.
    """
    buffer_config = config.get("replay_buffer_config") or {}
    default_buffer = defaults.get("replay_buffer_config") or {}
    for key in NESTED_REPLAY_KEYS:
        nested = buffer_config.get(key)
        if nested is None or key not in config:
            continue
        top = config[key]
        # Set by the user: a value other than the algorithm's default at that place.
        nested_set = nested != default_buffer.get(key)
        top_set = top != defaults.get(key, top)
        if nested_set and top_set and top != nested:
            raise ValueError(
                f"`{key}` is set twice, to {top!r} and as `replay_buffer_config.{key}` to "
                f"{nested!r}: set one of the two."
            )
        if nested_set or not top_set:
            config[key] = nested
        else:  # an algorithm's default there (QMIX's): the user's top-level value wins
            buffer_config[key] = top
    batch_size = buffer_config.get("replay_batch_size")
    if batch_size is not None and batch_size != config.get("train_batch_size"):
        raise ValueError(
            f"`replay_buffer_config.replay_batch_size` ({batch_size}) differs from "
            f"`train_batch_size` ({config.get('train_batch_size')}): each gradient step "
            "replays `train_batch_size` rows here; set that instead (or both the same)."
        )
    length = buffer_config.get("replay_sequence_length")
    if not sequences and length not in (None, 1):
        raise ValueError(
            f"`replay_buffer_config.replay_sequence_length` must be None or 1 here (got "
            f"{length!r}): this algorithm stores single env steps (R2D2 and RNNSAC replay "
            "sequences)."
        )


# The `replay_buffer_config.type` that asks for prioritized replay.
PRIORITIZED_BUFFER_TYPE = "MultiAgentPrioritizedReplayBuffer"


def uses_prioritized_replay(config: dict) -> bool:
    """Whether the config asks for prioritized replay: RLlib 1.13 turns it on with the
    top-level `prioritized_replay`, its successors with the buffer type; either does here."""
    buffer_config = config.get("replay_buffer_config") or {}
    return bool(config.get("prioritized_replay")) or (
        buffer_config.get("type") == PRIORITIZED_BUFFER_TYPE
    )


def check_worker_side_prioritization(config: dict, algorithm: str) -> None:
    """`worker_side_prioritization` needs prioritized replay (RLlib 1.13 refuses it
    without, too).

    Raises:
        ValueError: worker-side prioritization without prioritized replay.
    """
    if config.get("worker_side_prioritization") and not uses_prioritized_replay(config):
        buffer_type = (config.get("replay_buffer_config") or {}).get("type")
        raise ValueError(
            f"{algorithm}: worker_side_prioritization=True needs prioritized replay (the "
            "workers compute the initial priorities of a prioritized buffer), but "
            f"prioritized_replay={config.get('prioritized_replay')!r} and "
            f"replay_buffer_config.type={buffer_type!r}. Set prioritized_replay=True (or the "
            f"type {PRIORITIZED_BUFFER_TYPE!r}), or worker_side_prioritization=False."
        )


def sync_target_networks(workers: Any, trainable_only: bool = True) -> None:
    """The remote workers' target networks <- the driver's (of the trained policies, or
    of all), for worker-side prioritization: a worker's TD errors bootstrap from its
    target network, which `sync_weights` (the models' weights) leaves alone.

    Args:
        workers: the trainer's `WorkerSet`.
        trainable_only: only the policies the driver trains (whose targets move).
    """
    remote = workers.remote_workers()
    if not remote:
        return
    local = workers.local_worker()
    each = local.foreach_trainable_policy if trainable_only else local.foreach_policy
    policies = each(lambda policy, pid: (pid, policy))
    targets = {
        pid: policy.get_target_weights()
        for pid, policy in policies
        if hasattr(policy, "get_target_weights")
    }
    if targets:
        wait_all([w.apply(_set_target_weights, targets) for w in remote])


def td_errors_of_update(
    policy: Any, policy_batch: SampleBatch, *candidates: Any
) -> np.ndarray | None:
    """The TD errors of an update for new replay priorities, one per trained row (RLlib
    1.x's `td_error` learner fetch): the first of `candidates` (the update's own, e.g.
    what its loss logged or its `learn_on_batch` result's `td_error`) that has one finite
    value per row, else `policy.compute_td_error(policy_batch)` after the update; None
    (with a warning, once) for a policy that has no TD errors to give.

    (A NaN/inf comes from a minibatch that was skipped; a sum that overflows from huge
    finite errors only costs the recompute.)
    """
    for td_error in candidates:
        if td_error is None:
            continue
        if not isinstance(td_error, np.ndarray):
            td_error = np.asarray(convert_to_numpy(td_error, reduce_type=False))
        td_error = td_error.reshape(-1)
        if len(td_error) == policy_batch.count and math.isfinite(
            np.add.reduce(td_error, axis=None)
        ):
            return td_error
    compute = getattr(policy, "compute_td_error", None)
    if compute is not None:
        return np.asarray(compute(policy_batch)).reshape(-1)
    if log_once(f"no_td_error_{type(policy).__name__}"):
        logger.warning(
            "%s gives no TD errors (none from its update, no `compute_td_error`): the "
            "priorities of the rows it trains on are not updated.",
            type(policy).__name__,
        )
    return None


def _set_target_weights(worker: Any, targets: dict[str, dict[str, np.ndarray]]) -> None:
    """In a worker: loads each policy's target-network weights."""
    for pid, weights in targets.items():
        worker.get_policy(pid).set_target_weights(weights)


def _warn_missing_priorities(batch: SampleBatch | MultiAgentBatch) -> None:
    """Logs (once per policy) a sampled policy batch without worker-side priorities (a
    policy whose postprocessing does not write them): its rows get the largest priority."""
    for pid, policy_batch in batch.as_multi_agent().policy_batches.items():
        missing = policy_batch.count and PRIO_WEIGHTS not in policy_batch
        if missing and log_once(f"worker_side_prioritization_missing_{pid}"):
            logger.warning(
                "worker_side_prioritization: the batches of policy %r carry no priorities "
                "(its postprocessing does not compute them, see "
                "`ReplayPolicyMixin.initial_priorities`); they get the largest priority so far.",
                pid,
            )


def make_replay_buffer(config: dict, **overrides: Any) -> Any:
    """The `MultiAgentReplayBuffer` described by `replay_buffer_config` (and the
    top-level `prioritized_replay*` keys) and `multiagent.replay_mode`; `overrides`
    are further constructor arguments (e.g. `learning_starts`, `replay_batch_size`).

    Raises:
        ValueError: lockstep replay with prioritized replay (as in RLlib).
    """
    buffer_config = dict(config.get("replay_buffer_config") or {})
    capacity = buffer_config.get("capacity") or config.get("buffer_size")
    if capacity is None:
        raise ValueError("`replay_buffer_config` needs a `capacity` (transitions per policy).")
    prioritized = uses_prioritized_replay(config)
    return MultiAgentReplayBuffer(
        capacity=int(capacity),
        # (R2D2 stores sequences: `validate_config` sets their length.)
        replay_sequence_length=max(1, int(buffer_config.get("replay_sequence_length") or 1)),
        prioritized=prioritized,
        alpha=config["prioritized_replay_alpha"],
        beta=config["prioritized_replay_beta"],
        eps=config["prioritized_replay_eps"],
        seed=config.get("seed"),
        replay_mode=(config.get("multiagent") or {}).get("replay_mode") or "independent",
        **overrides,
    )


def _transitions(
    batch: SampleBatch | MultiAgentBatch, extra_columns: tuple[str, ...] = ()
) -> SampleBatch | MultiAgentBatch:
    """Only the columns a Q-learner needs: (s, a, r, s', terminated), plus `extra_columns`."""
    if isinstance(batch, MultiAgentBatch):
        return MultiAgentBatch(
            {pid: _columns(b, extra_columns) for pid, b in batch.policy_batches.items()},
            batch.env_steps(),
        )
    return _columns(batch, extra_columns)


def _columns(batch: SampleBatch, extra_columns: tuple[str, ...]) -> SampleBatch:
    """One policy's batch cut to `REPLAY_COLUMNS` and `extra_columns`."""
    return SampleBatch({k: batch[k] for k in (*REPLAY_COLUMNS, *extra_columns) if k in batch})


__all__ = [
    "NESTED_REPLAY_KEYS",
    "OFF_POLICY_CONFIG",
    "OFF_POLICY_CONFIG_SPECS",
    "OffPolicyTrainer",
    "PRIO_WEIGHTS",
    "REPLAY_CONFIG_SPECS",
    "TARGET_PREFIX",
    "TargetNetworkStateMixin",
    "adopt_nested_replay_keys",
    "bootstrap_discount",
    "check_replay_config",
    "check_worker_side_prioritization",
    "make_replay_buffer",
    "polyak_update",
    "td_errors_of_update",
    "uses_prioritized_replay",
    "with_off_policy_config",
]
