"""`MultiAgentPrioritizedReplayBuffer`: RLlib 1.13's prioritized multi-agent buffer.

A `MultiAgentReplayBuffer` whose policy buffers are `PrioritizedReplayBuffer`s, with
RLlib 1.13's constructor (`prioritized_replay_alpha`, `_beta`, `_eps`, and its default
`learning_starts` of 1000 env steps) and `update_priorities(prio_dict)`.
"""

from __future__ import annotations

import logging
from typing import Any

from corral.utils.deprecation import log_once
from corral.utils.replay_buffers.multi_agent_replay_buffer import (
    MultiAgentReplayBuffer,
    ReplayMode,
)
from corral.utils.replay_buffers.replay_buffer import StorageUnit

logger = logging.getLogger(__name__)

__all__ = ["MultiAgentPrioritizedReplayBuffer"]


class MultiAgentPrioritizedReplayBuffer(MultiAgentReplayBuffer):
    """One prioritized replay buffer per policy id (Schaul et al. 2016).

    `sample()` adds the columns `weights` (importance weights, for the loss) and
    `batch_indexes`; `update_priorities({policy_id: (batch_indexes, td_errors)})` sets
    the priorities |td_error| + `prioritized_replay_eps`. `beta` (the attribute) may be
    changed between samples to anneal it.

    Args:
        capacity: rows (items) per policy buffer, for all shards.
        storage_unit: "timesteps", "sequences" or "episodes".
        num_shards: buffer shards in total (divides `capacity` and `learning_starts`).
        replay_batch_size: items `replay()` samples.
        learning_starts: env steps to add before `sample` returns rows.
        replay_mode: "independent"; "lockstep" is not supported with prioritized replay
            (logged, and the buffer replays independently, as RLlib 1.13 says).
        replay_sequence_length: 1 for transitions; > 1 stores sequences (RNNs).
        replay_burn_in: must be 0 (burn-in overlap is not built).
        replay_zero_init_states: kept for RLlib's signature.
        prioritized_replay_alpha: prioritisation exponent (0: uniform).
        prioritized_replay_beta: importance-sampling exponent.
        prioritized_replay_eps: added to |td_error| to get a priority.
        underlying_buffer_config: replaces the policy buffers' `PrioritizedReplayBuffer`
            (a `type` and its arguments; also the default arguments of their calls).
        seed: seed of the buffers' random generators.
        **kwargs: other keys of RLlib's `replay_buffer_config`; ignored.
    """

    def __init__(
        self,
        capacity: int = 10000,
        storage_unit: str | StorageUnit = StorageUnit.TIMESTEPS,
        num_shards: int = 1,
        replay_batch_size: int = 1,
        learning_starts: int = 1000,
        replay_mode: str | ReplayMode = ReplayMode.INDEPENDENT,
        replay_sequence_length: int = 1,
        replay_burn_in: int = 0,
        replay_zero_init_states: bool = True,
        prioritized_replay_alpha: float = 0.6,
        prioritized_replay_beta: float = 0.4,
        prioritized_replay_eps: float = 1e-6,
        underlying_buffer_config: dict | None = None,
        *,
        seed: int | None = None,
        **kwargs: Any,
    ) -> None:
        if replay_mode == ReplayMode.LOCKSTEP:
            if log_once("lockstep_mode_not_supported"):
                logger.error(
                    "Replay mode `lockstep` is not supported for %s; this buffer replays "
                    "in `independent` mode.",
                    type(self).__name__,
                )
            replay_mode = ReplayMode.INDEPENDENT
        if underlying_buffer_config is not None and log_once(
            "underlying_buffer_config_not_supported"
        ):
            logger.info(
                "%s built with an underlying_buffer_config: it replaces the policy buffers' "
                "PrioritizedReplayBuffer.",
                type(self).__name__,
            )
        super().__init__(
            capacity,
            storage_unit,
            num_shards,
            replay_batch_size,
            learning_starts,
            replay_mode,
            replay_sequence_length,
            replay_burn_in,
            replay_zero_init_states,
            underlying_buffer_config,
            prioritized=True,
            alpha=prioritized_replay_alpha,
            beta=prioritized_replay_beta,
            eps=prioritized_replay_eps,
            seed=seed,
        )

    @property
    def prioritized_replay_alpha(self) -> float:
        """The prioritisation exponent (RLlib's name)."""
        return self.alpha

    @property
    def prioritized_replay_beta(self) -> float:
        """The importance-sampling exponent (RLlib's name)."""
        return self.beta

    @property
    def prioritized_replay_eps(self) -> float:
        """Added to |td_error| to get a priority (RLlib's name)."""
        return self.eps


def __getattr__(name: str) -> Any:
    # RLlib 1.13's `ReplayActor`: `MultiAgentPrioritizedReplayBuffer` as a Ray actor class, made on
    # first use (Ray is the `ray` extra: without it, an ImportError saying so).
    if name == "ReplayActor":
        from corral.utils.actors import replay_actor_class

        return replay_actor_class(MultiAgentPrioritizedReplayBuffer)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
