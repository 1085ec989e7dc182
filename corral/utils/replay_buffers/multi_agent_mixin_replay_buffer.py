"""`MultiAgentMixInReplayBuffer`: new experience mixed with replayed experience.

RLlib 1.13's buffer for on-policy-ish replay (e.g. IMPALA with `replay_proportion`):
each item added is returned by the next `sample()` calls, first in, first out, and
as well stored for replay; each sample mixes the new items with replayed ones so
that about `replay_ratio` of its items are replayed. With `replay_ratio` 0.66 and
`num_items` 3, a sample is the oldest new item not returned yet plus two replayed
ones; with 0.0, only new items; with 1.0, only replayed ones. Where fewer new items
are waiting than the ratio asks for, fewer old ones are mixed in (to keep the ratio
on average), and a sample with no new item waiting is empty (0 < ratio < 1).

An item is a row (a timestep), a sequence (`replay_sequence_length` > 1 or storage
unit "sequences") or an episode. New items carry `weights` 1 and their
`batch_indexes`, as replayed ones do, so that `update_priorities` covers both.
"""

from __future__ import annotations

import logging
import math
from collections import defaultdict
from typing import Any

import numpy as np

from corral.policy.sample_batch import (
    DEFAULT_POLICY_ID,
    MultiAgentBatch,
    SampleBatch,
    concat_samples,
)
from corral.utils.deprecation import log_once
from corral.utils.replay_buffers.multi_agent_prioritized_replay_buffer import (
    MultiAgentPrioritizedReplayBuffer,
)
from corral.utils.replay_buffers.multi_agent_replay_buffer import (
    ReplayMode,
    merge_dicts_with_warning,
)
from corral.utils.replay_buffers.prioritized_replay_buffer import (
    BATCH_INDEXES,
    WEIGHTS,
    PrioritizedReplayBuffer,
)
from corral.utils.replay_buffers.replay_buffer import ReplayBuffer, StorageUnit

logger = logging.getLogger(__name__)

__all__ = ["MultiAgentMixInReplayBuffer"]


class MultiAgentMixInReplayBuffer(MultiAgentPrioritizedReplayBuffer):
    """Returns newly added items together with replayed ones (see the module doc).

    Args:
        capacity: rows (items) per policy buffer, for all shards.
        storage_unit: "timesteps", "sequences" or "episodes".
        num_shards: buffer shards in total (divides `capacity`).
        prioritized_replay_alpha: prioritisation exponent of the replayed items.
        prioritized_replay_beta: importance-sampling exponent.
        prioritized_replay_eps: added to |td_error| to get a priority.
        learning_starts: kept for RLlib's signature (a mix-in sample never waits).
        replay_batch_size: items `replay()` samples.
        replay_sequence_length: 1 for transitions; > 1 stores sequences (RNNs).
        replay_burn_in: must be 0 (burn-in overlap is not built).
        replay_zero_init_states: kept for RLlib's signature.
        replay_ratio: the share of replayed items in a sample, in [0, 1].
        underlying_buffer_config: replaces the policy buffers' `PrioritizedReplayBuffer`.
        seed: seed of the buffers' and the mixing's random generators.
        **kwargs: other keys of RLlib's `replay_buffer_config`; ignored.

    Raises:
        ValueError: `replay_ratio` outside [0, 1].
    """

    def __init__(
        self,
        capacity: int = 10000,
        storage_unit: str | StorageUnit = StorageUnit.TIMESTEPS,
        num_shards: int = 1,
        prioritized_replay_alpha: float = 0.6,
        prioritized_replay_beta: float = 0.4,
        prioritized_replay_eps: float = 1e-6,
        learning_starts: int = 1000,
        replay_batch_size: int = 1,
        replay_sequence_length: int = 1,
        replay_burn_in: int = 0,
        replay_zero_init_states: bool = True,
        replay_ratio: float = 0.66,
        underlying_buffer_config: dict | None = None,
        *,
        seed: int | None = None,
        **kwargs: Any,
    ) -> None:
        if not 0 <= replay_ratio <= 1:
            raise ValueError(f"Replay ratio must be within [0, 1], got {replay_ratio}.")
        if kwargs.pop("replay_mode", None) == ReplayMode.LOCKSTEP and log_once(
            "mixin_lockstep_mode_not_supported"
        ):
            logger.error(
                "Replay mode `lockstep` is not supported for MultiAgentMixInReplayBuffer; "
                "this buffer replays in `independent` mode."
            )
        super().__init__(
            capacity=capacity,
            storage_unit=storage_unit,
            num_shards=num_shards,
            replay_batch_size=replay_batch_size,
            learning_starts=learning_starts,
            replay_mode=ReplayMode.INDEPENDENT,
            replay_sequence_length=replay_sequence_length,
            replay_burn_in=replay_burn_in,
            replay_zero_init_states=replay_zero_init_states,
            prioritized_replay_alpha=prioritized_replay_alpha,
            prioritized_replay_beta=prioritized_replay_beta,
            prioritized_replay_eps=prioritized_replay_eps,
            underlying_buffer_config=underlying_buffer_config,
            seed=seed,
        )
        self.replay_ratio = float(replay_ratio)
        # Per policy: the new items not returned yet, oldest first, as (stored rows,
        # number of items in them) chunks.
        self.last_added_batches: dict[str, list[tuple[SampleBatch, int]]] = defaultdict(list)
        self._mix_rng = np.random.default_rng(seed)

    def _add_to_policy_buffer(
        self, policy_id: str, batch: SampleBatch, kwargs: dict
    ) -> np.ndarray | None:
        idx = super()._add_to_policy_buffer(policy_id, batch, kwargs)
        buf = self.replay_buffers[policy_id]
        pending = self.last_added_batches[policy_id]
        if idx is None or not isinstance(buf, ReplayBuffer):
            # A buffer of another class: the rows as they came, one item per row.
            pending.append((batch, batch.count))
        elif buf.storage_unit is StorageUnit.TIMESTEPS:
            pending.append((_as_new(buf, idx, idx), len(idx)))
        else:
            for slot in idx.tolist():
                item = buf._read(np.asarray([slot]))
                pending.append((_as_new(buf, item, np.full(item.count, slot)), 1))
        return idx

    def sample(
        self,
        num_items: int,
        policy_id: str | None = DEFAULT_POLICY_ID,
        *,
        policy_ids: list[str] | None = None,
        **kwargs: Any,
    ) -> MultiAgentBatch:
        """About `num_items` items of each policy (the default policy's, as in RLlib;
        `policy_id=None`: every policy's), new and replayed mixed by `replay_ratio`.

        Returns:
            The sample (empty where no policy is ready: see the module doc).
        """
        if kwargs or self.underlying_buffer_call_args:
            kwargs = merge_dicts_with_warning(self.underlying_buffer_call_args, kwargs)
        if policy_id is not None:
            policy_ids = [policy_id]
        out = {}
        for pid in policy_ids or list(self.replay_buffers):
            if pid in self.replay_buffers:
                mixed = self._mix(pid, num_items, kwargs)
                if mixed is not None:
                    out[pid] = self._from_stored(mixed)
        return MultiAgentBatch(out, sum(b.count for b in out.values()))

    def _mix(self, policy_id: str, num_items: int, kwargs: dict) -> SampleBatch | None:
        """One policy's new items with replayed ones (None: not ready)."""
        buf = self.replay_buffers[policy_id]
        ratio = self.replay_ratio
        if (len(buf) == 0 and ratio > 0) or (not self.last_added_batches[policy_id] and ratio < 1):
            return None
        if ratio == 1.0:
            return self._sample_stored(buf, num_items, kwargs)
        max_new = self._round(num_items * (1 - ratio))
        new, num_new = self._pop_new(policy_id, max_new)
        if ratio == 0.0:
            return concat_samples(new)
        if math.isclose(num_new, num_items * (1 - ratio)):
            num_old = num_items - max_new
        else:  # fewer new items than asked for: fewer old ones, to keep the ratio
            num_old = min(num_items - max_new, self._round(num_new * ratio / (1 - ratio)))
        if num_old > 0:
            new.append(self._sample_stored(buf, num_old, kwargs))
        return concat_samples(new)

    def _round(self, value: float) -> int:
        """`value` rounded up with probability of its fraction (right on average)."""
        whole = math.floor(value)
        return whole + int(self._mix_rng.random() < value - whole)

    def _pop_new(self, policy_id: str, num_items: int) -> tuple[list[SampleBatch], int]:
        """Up to `num_items` of the oldest new items, removed from the waiting ones."""
        pending = self.last_added_batches[policy_id]
        taken: list[SampleBatch] = []
        count = 0
        while pending and count < num_items:
            rows, items = pending[0]
            wanted = num_items - count
            if items <= wanted:
                taken.append(rows)
                count += items
                pending.pop(0)
            else:  # (chunks of several items are rows or sequences, one per row)
                taken.append(rows[:wanted])
                pending[0] = (rows[wanted:], items - wanted)
                count += wanted
        return taken, count

    def get_state(self) -> dict[str, Any]:
        state = super().get_state()
        state["last_added_batches"] = {
            pid: [{"columns": dict(rows), "items": items} for rows, items in chunks]
            for pid, chunks in self.last_added_batches.items()
        }
        return state

    def set_state(self, state: dict[str, Any]) -> None:
        super().set_state(state)
        self.last_added_batches = defaultdict(list)
        for pid, chunks in (state.get("last_added_batches") or {}).items():
            self.last_added_batches[pid] = [
                (SampleBatch(chunk["columns"]), int(chunk["items"])) for chunk in chunks
            ]


def _as_new(buf: ReplayBuffer, rows: SampleBatch | np.ndarray, indexes: np.ndarray) -> SampleBatch:
    """Stored rows (or the rows at the indices `rows`) as a sample of a prioritized
    buffer returns them: with `weights` 1 and their `batch_indexes`."""
    batch = buf._read(rows) if isinstance(rows, np.ndarray) else rows
    if isinstance(buf, PrioritizedReplayBuffer):
        batch[WEIGHTS] = np.ones(batch.count, np.float32)
        batch[BATCH_INDEXES] = np.asarray(indexes, np.int64)
    return batch
