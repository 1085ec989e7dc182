"""RLlib 1.13's `execution.buffers.mixin_replay_buffer.MixInMultiAgentReplayBuffer`.

The execution-plan interface (`add_batch`, `replay`) of replay mixed into new experience:
each batch added is returned by the next `replay()` (close to on-policy), together with
older batches drawn from a ring of `capacity` batches per policy, so that about
`replay_ratio` of what `replay()` returns is replayed. (Its row-level counterpart with
RLlib's newer buffer API is `corral.utils.replay_buffers.MultiAgentMixInReplayBuffer`.)
"""

from __future__ import annotations

import platform
import random
from collections import defaultdict
from typing import Any

from corral.execution.replay_ops import SimpleReplayBuffer
from corral.policy.sample_batch import DEFAULT_POLICY_ID, SampleBatch, concat_samples


class MixInMultiAgentReplayBuffer:
    """New batches mixed with replayed ones, per policy.

    With `replay_ratio` 0.66 and one new batch `C` since the last `replay()`, a replay
    is `C` plus two older batches on average (`[C, A, B]`); with 0.0 only the new
    batches; with 1.0 one replayed batch. Several batches added between two replays
    are all returned (with proportionally more replayed ones).

    Args:
        capacity: batches kept per policy for replay.
        replay_ratio: the share of replayed batches in a replay, in [0, 1].
        seed: seed of the draws.

    Raises:
        ValueError: `replay_ratio` outside [0, 1], or `capacity` < 1.
    """

    def __init__(self, capacity: int, replay_ratio: float, seed: int | None = None) -> None:
        if not 0.0 <= replay_ratio <= 1.0:
            raise ValueError(f"replay_ratio must be in [0, 1], got {replay_ratio}.")
        if capacity < 1:
            raise ValueError(f"capacity must be >= 1 (batches per policy), got {capacity}.")
        self.capacity = capacity
        self.replay_ratio = replay_ratio
        # Replayed batches per new one: old / new = ratio / (1 - ratio).
        self.replay_proportion = (
            None if replay_ratio == 1.0 else replay_ratio / (1.0 - replay_ratio)
        )
        self._rng = random.Random(seed)
        self.replay_buffers: defaultdict[str, SimpleReplayBuffer] = defaultdict(
            lambda: SimpleReplayBuffer(capacity, seed=self._rng.randrange(2**31))
        )
        self.last_added_batches: defaultdict[str, list[SampleBatch]] = defaultdict(list)
        self.num_added = 0

    def get_host(self) -> str:
        """The name of the machine this buffer lives on (`platform.node()`, as RLlib
        1.13's)."""
        return platform.node()

    def add_batch(self, batch: Any) -> None:
        """Adds a `SampleBatch` (the default policy's) or each policy batch of a
        `MultiAgentBatch`."""
        batch = batch.copy().as_multi_agent()
        for pid, policy_batch in batch.policy_batches.items():
            self.replay_buffers[pid].add_batch(policy_batch)
            self.last_added_batches[pid].append(policy_batch)
        self.num_added += batch.count

    def replay(self, policy_id: str = DEFAULT_POLICY_ID) -> SampleBatch | None:
        """The policy's new batches with replayed ones mixed in (one `SampleBatch`);
        None while nothing was added, or (`replay_ratio` < 1) nothing new since the
        last replay."""
        buffer = self.replay_buffers[policy_id]
        new = self.last_added_batches[policy_id]
        if len(buffer) == 0 or (not new and self.replay_ratio < 1.0):
            return None
        self.last_added_batches[policy_id] = []
        if self.replay_ratio == 0.0:
            return concat_samples(new)
        if self.replay_proportion is None:  # ratio 1: replay only
            return buffer.replay()
        out = list(new)
        # On average `replay_proportion` replayed batches per new one.
        budget = len(new) * self.replay_proportion
        while self._rng.random() < budget:
            budget -= 1
            out.append(buffer.replay())
        return concat_samples(out)


__all__ = ["MixInMultiAgentReplayBuffer"]
