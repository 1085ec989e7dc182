"""RLlib 1.13's replay helpers for user-written `training_iteration()`s.

- `update_priorities_in_replay_buffer`: new priorities from the TD errors of an update;
- `sample_min_n_steps_from_buffer`: one-item samples until enough steps (episode and
  sequence buffers);
- `validate_buffer_config`: the deprecated top-level replay keys moved into
  `replay_buffer_config`, as RLlib 1.13's `validate_config`s do;
- `warn_replay_buffer_capacity`: the buffer's memory estimate, logged once.
"""

from __future__ import annotations

import logging
from typing import Any

import numpy as np

from corral.policy.sample_batch import MultiAgentBatch, SampleBatch, concat_samples
from corral.utils.deprecation import DEPRECATED_VALUE, deprecation_warning, log_once
from corral.utils.from_config import from_config
from corral.utils.metrics.learner_info import LEARNER_STATS_KEY
from corral.utils.numpy import convert_to_numpy
from corral.utils.replay_buffers.multi_agent_replay_buffer import MultiAgentReplayBuffer
from corral.utils.replay_buffers.prioritized_replay_buffer import (
    BATCH_INDEXES,
    PrioritizedReplayBuffer,
)
from corral.utils.replay_buffers.replay_buffer import ReplayBuffer, warn_replay_buffer_capacity

logger = logging.getLogger(__name__)

__all__ = [
    "sample_min_n_steps_from_buffer",
    "update_priorities_in_replay_buffer",
    "validate_buffer_config",
    "warn_replay_buffer_capacity",
]

# Where a bare `replay_buffer_config.type` name is looked up (RLlib: ray.rllib.utils...).
_BUFFERS_MODULE = "corral.utils.replay_buffers."
# The 1.13 execution-module buffer, used without `_enable_replay_buffer_api`.
_LEGACY_BUFFER = "corral.execution.MultiAgentReplayBuffer"


def update_priorities_in_replay_buffer(
    replay_buffer: Any,
    config: dict,
    train_batch: SampleBatch | MultiAgentBatch,
    train_results: dict,
) -> None:
    """Sets the priorities of the replayed rows of `train_batch` to |TD error| + eps.

    The TD errors are each policy's `td_error` in `train_results` (at the top of its
    info or in its `learner_stats`), one per row (or one per sequence). Does nothing
    unless the buffer is prioritized; a policy without TD errors is skipped (a warning
    is logged once).

    Args:
        replay_buffer: the buffer the batch was sampled from (any buffer).
        config: the trainer's config (for RLlib 1.13's execution-module buffer, whose
            prioritization is `replay_buffer_config.prioritized_replay_alpha` > 0).
        train_batch: the batch trained on (with `batch_indexes`).
        train_results: the learner info, e.g. from `train_one_step()`:
            {policy_id: {"learner_stats": {...}, ...}}.
    """
    if not _is_prioritized(replay_buffer, config):
        return
    policy_batches = train_batch.as_multi_agent().policy_batches
    prio_dict = {}
    for policy_id, info in train_results.items():
        policy_batch = policy_batches.get(policy_id)
        if policy_batch is None or not isinstance(info, dict):
            continue
        td_error = info.get("td_error", (info.get(LEARNER_STATS_KEY) or {}).get("td_error"))
        if td_error is None or BATCH_INDEXES not in policy_batch:
            if log_once(f"no_td_error_for_priorities_{policy_id}"):
                logger.warning(
                    "Cannot update the replay priorities of policy %r: its train results "
                    "hold no per-row `td_error` (or its batch no `batch_indexes`); skipped.",
                    policy_id,
                )
            continue
        td_error = np.asarray(convert_to_numpy(td_error, reduce_type=False)).reshape(-1)
        policy_batch.set_get_interceptor(None)
        batch_indexes = np.asarray(policy_batch[BATCH_INDEXES]).reshape(-1)
        if len(batch_indexes) != len(td_error):
            # One TD error per sequence: the index of each sequence's first row.
            length = getattr(replay_buffer, "replay_sequence_length", 1)
            if len(batch_indexes) != len(td_error) * length:
                raise ValueError(
                    f"Policy {policy_id!r}: {len(td_error)} TD errors for "
                    f"{len(batch_indexes)} replayed rows (replay_sequence_length {length})."
                )
            batch_indexes = batch_indexes[::length]
        prio_dict[policy_id] = (batch_indexes, td_error)
    replay_buffer.update_priorities(prio_dict)


def _is_prioritized(replay_buffer: Any, config: dict) -> bool:
    from corral.execution.buffers.multi_agent_replay_buffer import (
        MultiAgentReplayBuffer as LegacyMultiAgentReplayBuffer,
    )

    if isinstance(replay_buffer, LegacyMultiAgentReplayBuffer):
        buffer_config = config.get("replay_buffer_config") or {}
        return buffer_config.get("prioritized_replay_alpha", 0.0) > 0.0
    if isinstance(replay_buffer, MultiAgentReplayBuffer):
        return replay_buffer.prioritized
    return isinstance(replay_buffer, PrioritizedReplayBuffer)


def sample_min_n_steps_from_buffer(
    replay_buffer: Any, min_steps: int, count_by_agent_steps: bool
) -> SampleBatch | MultiAgentBatch | None:
    """One-item samples of `replay_buffer`, concatenated, until they hold `min_steps`.

    For buffers of sequences or episodes, whose items have several timesteps.

    Args:
        replay_buffer: the buffer.
        min_steps: the least number of steps wanted.
        count_by_agent_steps: count agent steps (else env steps).

    Returns:
        The samples concatenated (at least `min_steps` steps), or None when the buffer
        returns None or nothing (e.g. before `learning_starts`).
    """
    batches: list[Any] = []
    steps = 0
    while steps < min_steps:
        batch = replay_buffer.sample(num_items=1)
        added = (
            0
            if batch is None
            else (batch.agent_steps() if count_by_agent_steps else batch.env_steps())
        )
        if added == 0:
            return None
        batches.append(batch)
        steps += added
    return concat_samples(batches)


def validate_buffer_config(config: dict) -> None:
    """Moves RLlib's deprecated replay keys into `config["replay_buffer_config"]`.

    As RLlib 1.13: `prioritized_replay`, `buffer_size` (as `capacity`), the
    `prioritized_replay_*` keys and `learning_starts` are copied there (with a
    deprecation warning); a bare buffer `type` name becomes its path in
    `corral.utils.replay_buffers` (with `_enable_replay_buffer_api`) or RLlib 1.13's
    execution-module buffer (without it, where the execution-module keys
    `replay_batch_size`, `replay_mode`, `replay_sequence_length`, `burn_in` and
    `replay_zero_init_states` are moved too); `replay_batch_size` defaults to
    `train_batch_size`.

    Args:
        config: the trainer config (changed in place).

    Raises:
        ValueError: prioritized replay with lockstep replay or with sequences, worker-side
            prioritization without prioritized replay, or no `type` for the buffer.
    """
    buffer_config = config.get("replay_buffer_config")
    if buffer_config is None:
        buffer_config = config["replay_buffer_config"] = {}
    moved = {"prioritized_replay": "prioritized_replay", "buffer_size": "capacity"}
    moved.update(
        (k, k)
        for k in (
            "prioritized_replay_alpha",
            "prioritized_replay_beta",
            "prioritized_replay_eps",
            "learning_starts",
        )
    )
    for key, new_key in moved.items():
        if config.get(key, DEPRECATED_VALUE) != DEPRECATED_VALUE:
            deprecation_warning(
                old=f"config['{key}']",
                help=f"config['replay_buffer_config']['{new_key}'] is set to it (use that).",
                error=False,
            )
            buffer_config[new_key] = config[key]
    if config.get("no_local_replay_buffer"):
        deprecation_warning(
            old="config['no_local_replay_buffer']",
            new="config['replay_buffer_config']['no_local_replay_buffer']",
            error=False,
        )
        buffer_config["no_local_replay_buffer"] = True
    if buffer_config.get("no_local_replay_buffer", False):
        return
    if "type" not in buffer_config:
        raise ValueError("Can not instantiate ReplayBuffer from config without 'type' key.")

    buffer_type = buffer_config["type"]
    if not buffer_config.pop("_enable_replay_buffer_api", False):
        _use_legacy_buffer(config, buffer_config, buffer_type)
        prioritized = bool(buffer_config.get("prioritized_replay", False))
        if not prioritized:
            # (The execution-module buffer replays uniformly with alpha 0.)
            buffer_config["prioritized_replay_alpha"] = 0.0
    else:
        buffer_config["_enable_replay_buffer_api"] = True
        if isinstance(buffer_type, str) and "." not in buffer_type:
            buffer_config["type"] = _BUFFERS_MODULE + buffer_type
        test_buffer = from_config(ReplayBuffer, buffer_config)
        prioritized = _is_prioritized(test_buffer, config) or (
            not isinstance(test_buffer, (ReplayBuffer, MultiAgentReplayBuffer))
            and hasattr(test_buffer, "update_priorities")
        )

    if prioritized:
        if (config.get("multiagent") or {}).get("replay_mode") == "lockstep":
            raise ValueError("Prioritized replay is not supported when replay_mode=lockstep.")
        if (buffer_config.get("replay_sequence_length") or 0) > 1:
            raise ValueError("Prioritized replay is not supported when replay_sequence_length > 1.")
    elif config.get("worker_side_prioritization"):
        raise ValueError(
            "Worker side prioritization is not supported when prioritized_replay=False."
        )
    if buffer_config.get("replay_batch_size") is None:
        buffer_config["replay_batch_size"] = config.get("train_batch_size")
    buffer_config.pop("prioritized_replay", None)


def _use_legacy_buffer(config: dict, buffer_config: dict, buffer_type: Any) -> None:
    """Points `type` at RLlib 1.13's execution-module buffer and moves its old keys."""
    from corral.execution.buffers.multi_agent_replay_buffer import (
        MultiAgentReplayBuffer as LegacyMultiAgentReplayBuffer,
    )

    if isinstance(buffer_type, str) and "." not in buffer_type:
        if buffer_type != "MultiAgentReplayBuffer":
            raise ValueError(
                "Without the ReplayBuffer API (`_enable_replay_buffer_api`), only "
                f"MultiAgentReplayBuffer is supported, got {buffer_type!r}."
            )
        buffer_type = _LEGACY_BUFFER
    elif buffer_type not in (_LEGACY_BUFFER, LegacyMultiAgentReplayBuffer):
        raise ValueError(
            "Without the ReplayBuffer API (`_enable_replay_buffer_api`), only "
            f"MultiAgentReplayBuffer is supported, got {buffer_type!r}."
        )
    buffer_config["type"] = buffer_type
    for key, new_key in (
        ("replay_batch_size", "replay_batch_size"),
        ("replay_mode", "replay_mode"),
        ("burn_in", "replay_burn_in"),
        ("replay_zero_init_states", "replay_zero_init_states"),
    ):
        if config.get(key, DEPRECATED_VALUE) != DEPRECATED_VALUE:
            deprecation_warning(
                old=f"config['{key}']",
                help=f"config['replay_buffer_config']['{new_key}'] is set to it (use that).",
                error=False,
            )
            buffer_config[new_key] = config[key]
    # (None, not DEPRECATED_VALUE, is "unset": some algorithms set this key on purpose.)
    if config.get("replay_sequence_length") is not None:
        deprecation_warning(
            old="config['replay_sequence_length']",
            help="config['replay_buffer_config']['replay_sequence_length'] is set to it.",
            error=False,
        )
        buffer_config["replay_sequence_length"] = config["replay_sequence_length"]
