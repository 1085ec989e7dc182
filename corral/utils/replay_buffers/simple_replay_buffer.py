"""`SimpleReplayBuffer`: RLlib 1.13's buffer of whole batches.

It keeps the last `capacity` batches added, as they are (a ring of batches, not of
timesteps), and `sample()` returns one of them drawn uniformly, whatever `num_items`
asks for.
"""

from __future__ import annotations

from typing import Any

from corral.policy.sample_batch import MultiAgentBatch, SampleBatch
from corral.utils.replay_buffers.replay_buffer import (
    ReplayBuffer,
    StorageUnit,
    warn_replay_buffer_capacity,
)

__all__ = ["SimpleReplayBuffer"]


class SimpleReplayBuffer(ReplayBuffer):
    """The last `capacity` batches added; a sample is one of them.

    Args:
        capacity: batches held.
        storage_unit: kept for RLlib's signature (a batch is the item).
        seed: seed of the buffer's random generator.
        **kwargs: other arguments of RLlib's buffer configs; ignored.
    """

    def __init__(
        self,
        capacity: int,
        storage_unit: str | StorageUnit = StorageUnit.TIMESTEPS,
        seed: int | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(capacity, seed=seed)
        self.replay_batches: list[SampleBatch | MultiAgentBatch] = []
        self.replay_index = 0

    def __len__(self) -> int:
        return len(self.replay_batches)

    def add(self, batch: SampleBatch | MultiAgentBatch, **kwargs: Any) -> Any:
        """Keeps `batch` (the oldest batch makes room once `capacity` are held)."""
        warn_replay_buffer_capacity(item=batch, capacity=self.capacity)
        self._num_added += batch.count
        if len(self.replay_batches) < self.capacity:
            self.replay_batches.append(batch)
        else:
            self.replay_batches[self.replay_index] = batch
            self.replay_index = (self.replay_index + 1) % self.capacity
        self._size = len(self.replay_batches)

    def sample(self, num_items: int = 1, **kwargs: Any) -> Any:
        """One of the batches held, drawn uniformly (`num_items` is not used)."""
        self._check_not_empty()
        batch = self.replay_batches[int(self._rng.integers(0, len(self.replay_batches)))]
        self._num_sampled += batch.count
        return batch

    def stats(self, debug: bool = False) -> dict[str, Any]:
        return {
            **super().stats(debug),
            "est_size_bytes": sum(b.size_bytes() for b in self.replay_batches),
        }

    def get_state(self) -> dict[str, Any]:
        """The batches (plain ones as column dicts, in ring order) and the counters."""
        batches = [dict(b) for b in self.replay_batches if isinstance(b, SampleBatch)]
        if len(batches) < len(self.replay_batches):
            raise NotImplementedError(
                "SimpleReplayBuffer.get_state() saves plain SampleBatches only."
            )
        return {
            "capacity": self.capacity,
            "batches": batches,
            "replay_index": self.replay_index,
            "num_added": self._num_added,
            "num_sampled": self._num_sampled,
            "rng": self._rng.bit_generator.state,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self.replay_batches = [SampleBatch(b) for b in state["batches"]]
        self.replay_index = int(state["replay_index"])
        self._size = len(self.replay_batches)
        self._num_added = int(state.get("num_added", 0))
        self._num_sampled = int(state.get("num_sampled", 0))
        if state.get("rng"):
            self._rng.bit_generator.state = state["rng"]
