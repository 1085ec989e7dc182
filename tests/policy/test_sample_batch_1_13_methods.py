"""RLlib 1.13's `SampleBatch` methods: concat, timeslices, right_zero_pad, compress,
decompress_if_needed, set_training."""

from __future__ import annotations

import numpy as np
import pytest

from corral.policy.sample_batch import MultiAgentBatch, SampleBatch


def batch(n=5):
    return SampleBatch({"obs": np.arange(2 * n, dtype=np.float32).reshape(n, 2), "t": np.arange(n)})


def test_concat_and_timeslices():
    both = batch(3).concat(batch(2))
    assert both.count == 5 and both["t"].tolist() == [0, 1, 2, 0, 1]
    assert [s["t"].tolist() for s in batch().timeslices(2)] == [[0, 1], [2, 3], [4]]
    assert [s.count for s in batch().timeslices(k=5)] == [5]
    assert [s.count for s in batch(10).timeslices(num_slices=3)] == [3, 4, 3]
    with pytest.raises(ValueError, match="either size"):
        batch().timeslices(2, num_slices=2)


def test_right_zero_pad_pads_each_sequence_and_keeps_the_states():
    seqs = SampleBatch(
        {
            "t": np.array([1, 2, 3, 4, 5]),
            "state_in_0": np.array([[10.0], [20.0]]),  # one per sequence
            "seq_lens": np.array([3, 2]),
        }
    )
    assert seqs.count == 5
    seqs.right_zero_pad(max_seq_len=4)
    assert seqs["t"].tolist() == [1, 2, 3, 0, 4, 5, 0, 0]
    assert seqs["state_in_0"].tolist() == [[10.0], [20.0]]
    assert seqs["seq_lens"].tolist() == [3, 2]
    with pytest.raises(ValueError, match="does not fit max_seq_len=2"):
        SampleBatch({"t": np.arange(3), "seq_lens": np.array([3])}).right_zero_pad(2)
    with pytest.raises(ValueError, match="needs a batch with `seq_lens`"):
        batch().right_zero_pad(4)


def test_compress_and_decompress_in_place():
    pytest.importorskip("lz4", reason="compression needs the lz4 package")
    b = batch()
    original = b["obs"].copy()
    assert b.compress() is b and b["obs"].dtype == object
    np.testing.assert_array_equal(b.decompress_if_needed()["obs"], original)
    multi = MultiAgentBatch({"p": batch()}, 5).compress()
    assert multi.policy_batches["p"]["obs"].dtype == object
    np.testing.assert_array_equal(multi.decompress_if_needed().policy_batches["p"]["obs"], original)


def test_set_training():
    b = batch()
    assert b.is_training is False
    b.set_training()
    assert b.is_training is True and SampleBatch.is_training is False
