"""RLlib 1.13's `execution.buffers.multi_agent_replay_buffer.MultiAgentReplayBuffer`.

The 1.13 interface (`add_batch`, `replay`, `learning_starts`, `replay_batch_size`) over
corral's `corral.utils.replay_buffers.MultiAgentReplayBuffer`.
"""

from __future__ import annotations

import platform
from collections.abc import Callable
from typing import Any, TypeVar

from corral.policy.sample_batch import MultiAgentBatch
from corral.utils.deprecation import DEPRECATED_VALUE, deprecation_warning
from corral.utils.replay_buffers.multi_agent_replay_buffer import (
    MultiAgentReplayBuffer as _Buffer,
)

T = TypeVar("T")

# The buffer built last in this process (`get_instance_for_testing`).
_local_replay_buffer: MultiAgentReplayBuffer | None = None


class MultiAgentReplayBuffer:
    """A replay buffer per policy; `replay()` samples `replay_batch_size` steps of each.

    Args:
        num_shards: shards in total (RLlib's replay actors); `learning_starts` and
            `capacity` are divided by it, as in RLlib.
        learning_starts: steps to add before `replay()` returns data (None before).
        capacity: steps (sequences with `replay_sequence_length` > 1) kept per policy.
        replay_batch_size: steps per policy that `replay()` returns.
        prioritized_replay_alpha: 0.0 for uniform replay, else the priority exponent.
        prioritized_replay_beta: importance-sampling exponent.
        prioritized_replay_eps: added to priorities.
        replay_mode: "independent" or "lockstep".
        replay_sequence_length: sequence length T of one item (> 1: B x T samples).
        replay_burn_in: not supported (must be 0).
        replay_zero_init_states: kept for RLlib's signature.
        buffer_size: deprecated name of `capacity`.
    """

    def __init__(
        self,
        num_shards: int = 1,
        learning_starts: int = 1000,
        capacity: int = 10000,
        replay_batch_size: int = 1,
        prioritized_replay_alpha: float = 0.6,
        prioritized_replay_beta: float = 0.4,
        prioritized_replay_eps: float = 1e-6,
        replay_mode: str = "independent",
        replay_sequence_length: int = 1,
        replay_burn_in: int = 0,
        replay_zero_init_states: bool = True,
        buffer_size: Any = DEPRECATED_VALUE,
    ) -> None:
        if buffer_size != DEPRECATED_VALUE:
            deprecation_warning("ReplayBuffer(size)", "ReplayBuffer(capacity)", error=False)
            capacity = buffer_size
        if replay_mode not in ("lockstep", "independent"):
            raise ValueError(f"Unsupported replay mode: {replay_mode!r}")
        if replay_burn_in:
            raise NotImplementedError("MultiAgentReplayBuffer(replay_burn_in > 0) is not built.")
        self.replay_starts = learning_starts // num_shards
        self.capacity = capacity // num_shards
        self.replay_batch_size = replay_batch_size
        if replay_sequence_length > 1:
            self.replay_batch_size = int(max(1, replay_batch_size // replay_sequence_length))
        self.prioritized_replay_beta = prioritized_replay_beta
        self.prioritized_replay_eps = prioritized_replay_eps
        self.replay_mode = replay_mode
        self.replay_sequence_length = replay_sequence_length
        self.replay_zero_init_states = replay_zero_init_states
        self._buffer = _Buffer(
            self.capacity,
            prioritized=prioritized_replay_alpha != 0.0,
            alpha=prioritized_replay_alpha,
            beta=prioritized_replay_beta,
            eps=prioritized_replay_eps,
            replay_sequence_length=replay_sequence_length,
            replay_mode=replay_mode,
        )
        self.num_added = 0
        global _local_replay_buffer
        _local_replay_buffer = self

    @staticmethod
    def get_instance_for_testing() -> MultiAgentReplayBuffer | None:
        """The buffer built last in this process (RLlib 1.13's test helper), or None."""
        return _local_replay_buffer

    def get_host(self) -> str:
        """The name of the machine this buffer lives on (`platform.node()`; RLlib 1.13
        asks its replay actors, to place them)."""
        return platform.node()

    def apply(self, func: Callable[..., T], *_args: Any, **kwargs: Any) -> T:
        """`func(self, *_args, **kwargs)` (RLlib 1.13's way to run code on a buffer that
        may live in a replay actor)."""
        return func(self, *_args, **kwargs)

    @property
    def replay_buffers(self) -> dict:
        """Policy id -> that policy's buffer."""
        return self._buffer.replay_buffers

    def add_batch(self, batch: Any) -> None:
        """Adds a `SampleBatch` (as the default policy's) or `MultiAgentBatch`."""
        batch = batch.copy().as_multi_agent()
        self._buffer.add(batch)
        self.num_added += batch.count

    def replay(self, policy_id: str | None = None) -> MultiAgentBatch | None:
        """`replay_batch_size` steps of each policy (or of `policy_id`), or None before
        `learning_starts` steps were added."""
        if self.num_added < self.replay_starts:
            return None
        if self.replay_mode == "lockstep" and policy_id is not None:
            raise ValueError("`policy_id` specifier not allowed in `lockstep` mode!")
        ids = None if policy_id is None else [policy_id]
        return self._buffer.sample(self.replay_batch_size, policy_ids=ids)

    def update_priorities(self, prio_dict: dict) -> None:
        """`{policy_id: (batch_indexes, td_errors)}`: new priorities |td| + eps."""
        self._buffer.update_priorities(prio_dict)

    def stats(self, debug: bool = False) -> dict:
        return self._buffer.stats()

    def get_state(self) -> dict:
        return {"buffer": self._buffer.get_state(), "num_added": self.num_added}

    def set_state(self, state: dict) -> None:
        self._buffer.set_state(state["buffer"])
        self.num_added = state["num_added"]


def __getattr__(name: str) -> Any:
    # RLlib 1.13's `ReplayActor`: `MultiAgentReplayBuffer` as a Ray actor class, made on
    # first use (Ray is the `ray` extra: without it, an ImportError saying so).
    if name == "ReplayActor":
        from corral.utils.actors import replay_actor_class

        return replay_actor_class(MultiAgentReplayBuffer)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
