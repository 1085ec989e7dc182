"""RLlib 1.x's subclassing surface of the replay buffers: the protected state
(`_storage`, `_next_idx`, `_num_timesteps_added`, ...) that custom buffers read,
with RLlib 1.13's meaning, over corral's ring of columns and its item list."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from corral.policy.sample_batch import SampleBatch
from corral.utils.replay_buffers import PrioritizedReplayBuffer, ReplayBuffer
from corral.utils.replay_buffers.replay_buffer import _ALL_POLICIES


def rows(start: int, n: int) -> SampleBatch:
    """`n` transitions whose `rewards` are their ids `start`, `start + 1`, ..."""
    ids = np.arange(start, start + n)
    return SampleBatch(
        {
            SampleBatch.OBS: np.stack([ids, ids], axis=1).astype(np.float32),
            SampleBatch.ACTIONS: ids % 2,
            SampleBatch.REWARDS: ids.astype(np.float32),
        }
    )


def test_one_row_items_counters_and_storage_as_rllib_1_13():
    buf = ReplayBuffer(capacity=4)
    for i in range(3):
        buf.add(rows(i, 1))
    assert buf._next_idx == 3
    assert buf._num_timesteps_added == 3
    assert buf._num_timesteps_added_wrap == 3
    assert buf._eviction_started is False
    assert len(buf._storage) == 3
    assert [float(item[SampleBatch.REWARDS][0]) for item in buf._storage] == [0.0, 1.0, 2.0]
    assert buf._storage[-1].count == 1
    with pytest.raises(IndexError):
        buf._storage[3]
    buf.add(rows(3, 1))  # the 4th timestep wraps the buffer
    assert (buf._next_idx, buf._num_timesteps_added_wrap, buf._eviction_started) == (0, 0, True)
    buf.add(rows(4, 1))  # overwrites slot 0
    assert float(buf._storage[0][SampleBatch.REWARDS][0]) == 4.0
    assert (buf._next_idx, buf._num_timesteps_added) == (1, 5)
    buf.sample(6)
    assert buf._num_timesteps_sampled == 6
    assert buf._est_size_bytes == buf.stats()["est_size_bytes"] > 0


def test_items_of_several_rows_are_the_storage_list():
    buf = ReplayBuffer(capacity=10)
    for i in range(3):
        buf.add(rows(3 * i, 3))
    assert isinstance(buf._storage, list)
    assert [item.count for item in buf._storage] == [3, 3, 3]
    assert (buf._next_idx, buf._num_timesteps_added_wrap, buf._eviction_started) == (3, 9, False)
    buf.add(rows(9, 3))  # 12 timesteps since the last wrap >= 10: wraps
    assert (buf._next_idx, buf._num_timesteps_added_wrap, buf._eviction_started) == (0, 0, True)
    assert buf._num_timesteps_added == 12
    assert buf._est_size_bytes == sum(item.size_bytes() for item in buf._storage)


def test_state_round_trip_keeps_the_slots_of_a_wrapped_ring():
    buf = PrioritizedReplayBuffer(capacity=4, alpha=1.0, seed=0)
    for i in range(6):  # wrapped: slots hold 4, 5, 2, 3; the next slot is 2
        buf.add(rows(i, 1))
    buf.update_priorities(np.asarray([1]), np.asarray([100.0]))  # slot 1: row 5
    restored = PrioritizedReplayBuffer(capacity=4, alpha=1.0, seed=0)
    restored.set_state(buf.get_state())
    assert restored._next_idx == buf._next_idx == 2
    assert [float(item[SampleBatch.REWARDS][0]) for item in restored._storage] == [4, 5, 2, 3]
    np.testing.assert_allclose(restored._it_sum[np.arange(4)], buf._it_sum[np.arange(4)])
    sample = restored.sample(200, beta=0.4)
    # Slot 1 carries nearly all the priority mass, and it is still row 5.
    assert np.mean(sample[SampleBatch.REWARDS] == 5.0) > 0.9
    assert set(sample["batch_indexes"][sample[SampleBatch.REWARDS] == 5.0]) == {1}
    restored.add(rows(6, 1))  # overwrites the oldest row (2), as the saved buffer would
    assert float(restored._storage[2][SampleBatch.REWARDS][0]) == 6.0


class PriorityLoggingBuffer(PrioritizedReplayBuffer):
    """An RLlib 1.x style subclass: reads the protected state around `add`."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.log: list[tuple[int, float]] = []

    def add(self, batch: SampleBatch, **kwargs: Any) -> Any:  # type: ignore[override]
        slot = self._next_idx
        out = super().add(batch, **kwargs)
        # 1.13 keeps priority ** alpha in its trees.
        self.log.append((slot, float(self._it_sum[slot]) ** (1.0 / self._alpha)))
        return out


def test_rllib_1_x_subclass_reads_the_trees_and_alpha():
    buf = PriorityLoggingBuffer(capacity=8, alpha=0.5)
    buf.add(rows(0, 1), weight=4.0)
    buf.add(rows(1, 1))  # the largest priority so far
    assert buf.log == [(0, pytest.approx(4.0)), (1, pytest.approx(4.0))]
    assert buf._max_priority == 4.0
    assert buf._it_sum.sum() == pytest.approx(2 * 4.0**0.5)
    assert buf._it_min.min() == pytest.approx(4.0**0.5)


def test_all_policies_key_is_rllib_1_13s():
    assert _ALL_POLICIES == "__all__"
