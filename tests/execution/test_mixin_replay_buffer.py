"""RLlib 1.13's `MixInMultiAgentReplayBuffer`: new batches come out once, mixed with
replayed ones by `replay_ratio`; whole batches per policy, the last `capacity` kept."""

from __future__ import annotations

import numpy as np
import pytest

from corral.execution.buffers.mixin_replay_buffer import MixInMultiAgentReplayBuffer
from corral.policy.sample_batch import MultiAgentBatch, SampleBatch


def _batch(tag: int, n: int = 3) -> SampleBatch:
    return SampleBatch({"obs": np.full(n, tag, np.float32)})


def _tags(batch: SampleBatch) -> list[int]:
    return sorted({int(x) for x in batch["obs"]})


def test_no_replay_returns_each_new_batch_once():
    buffer = MixInMultiAgentReplayBuffer(capacity=10, replay_ratio=0.0)
    assert buffer.replay() is None
    buffer.add_batch(_batch(1))
    buffer.add_batch(_batch(2))
    assert _tags(buffer.replay()) == [1, 2]
    assert buffer.replay() is None  # nothing new
    assert buffer.num_added == 6


def test_half_replayed_gives_one_old_batch_per_new_one():
    buffer = MixInMultiAgentReplayBuffer(capacity=10, replay_ratio=0.5, seed=0)
    buffer.add_batch(_batch(1))
    out = buffer.replay()
    assert out.count == 6 and _tags(out) == [1]  # the new batch and itself, replayed
    buffer.add_batch(_batch(2))
    buffer.add_batch(_batch(3))
    out = buffer.replay()
    assert out.count == 12  # two new, two replayed
    assert set(_tags(out)) >= {2, 3}


def test_ratio_sets_the_share_of_old_batches_on_average():
    buffer = MixInMultiAgentReplayBuffer(capacity=5, replay_ratio=0.6, seed=0)
    olds = []
    for i in range(400):
        buffer.add_batch(_batch(i, n=1))
        olds.append(buffer.replay().count - 1)
    # old / (old + new) = 0.6: 1.5 old batches per new one.
    assert np.mean(olds) == pytest.approx(1.5, abs=0.1)
    assert set(olds) == {1, 2}


def test_only_replay_returns_one_old_batch():
    buffer = MixInMultiAgentReplayBuffer(capacity=2, replay_ratio=1.0, seed=0)
    buffer.add_batch(_batch(1))
    assert _tags(buffer.replay()) == [1]
    assert _tags(buffer.replay()) == [1]  # no new batch needed
    buffer.add_batch(_batch(2))
    buffer.add_batch(_batch(3))  # capacity 2: batch 1 is gone
    assert {_tags(buffer.replay())[0] for _ in range(30)} == {2, 3}


def test_policies_are_kept_apart():
    buffer = MixInMultiAgentReplayBuffer(capacity=4, replay_ratio=0.0)
    buffer.add_batch(MultiAgentBatch({"a": _batch(1), "b": _batch(2, n=5)}, 5))
    assert _tags(buffer.replay("a")) == [1]
    assert buffer.replay("b").count == 5
    assert buffer.replay("c") is None


@pytest.mark.parametrize(("capacity", "ratio"), [(0, 0.5), (5, -0.1), (5, 1.5)])
def test_bad_arguments_are_named(capacity, ratio):
    with pytest.raises(ValueError, match="capacity|replay_ratio"):
        MixInMultiAgentReplayBuffer(capacity, ratio)


def test_rllib_module_path():
    from corral.execution.buffers import mixin_replay_buffer

    assert mixin_replay_buffer.MixInMultiAgentReplayBuffer is MixInMultiAgentReplayBuffer
