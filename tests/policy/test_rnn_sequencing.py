"""RLlib 1.13's `rnn_sequencing`: padded sequences for recurrent models."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from corral.policy.rnn_sequencing import (
    add_time_dimension,
    chop_into_sequences,
    pad_batch_to_sequences_of_same_size,
    timeslice_along_seq_lens_with_overlap,
)
from corral.policy.sample_batch import SampleBatch
from corral.policy.view_requirement import ViewRequirement


def test_chop_into_sequences_rllib_s_example():
    f_pad, s_init, seq_lens = chop_into_sequences(
        episode_ids=[1, 1, 5, 5, 5, 5],
        unroll_ids=[4, 4, 4, 4, 4, 4],
        agent_indices=[0, 0, 0, 0, 0, 0],
        feature_columns=[[4, 4, 8, 8, 8, 8], [1, 1, 0, 1, 1, 0]],
        state_columns=[[4, 5, 4, 5, 5, 5]],
        max_seq_len=3,
    )
    assert [f.tolist() for f in f_pad] == [[4, 4, 0, 8, 8, 8, 8, 0, 0], [1, 1, 0, 0, 1, 1, 0, 0, 0]]
    assert [s.tolist() for s in s_init] == [[4, 4, 5]]
    assert seq_lens.tolist() == [2, 3, 1]


def test_chop_into_sequences_options():
    features = [np.arange(5, dtype=np.float32)]
    # Fixed length (no dynamic max), given seq_lens, states already one per sequence.
    f_pad, s_init, seq_lens = chop_into_sequences(
        feature_columns=features,
        state_columns=[np.array([7.0, 9.0])],
        max_seq_len=4,
        seq_lens=[2, 3],
        dynamic_max=False,
        states_already_reduced_to_init=True,
    )
    assert f_pad[0].tolist() == [0, 1, 0, 0, 2, 3, 4, 0]
    assert s_init[0].tolist() == [7.0, 9.0] and seq_lens.tolist() == [2, 3]
    # Nested feature columns, shuffled sequences stay whole.
    np.random.seed(0)
    f_pad, s_init, seq_lens = chop_into_sequences(
        feature_columns=[{"a": np.arange(6), "b": np.arange(6) * 10}],
        state_columns=[np.arange(6)],
        episode_ids=[0, 0, 0, 1, 1, 2],
        max_seq_len=3,
        shuffle=True,
        handle_nested_data=True,
    )
    # (A nested column comes back as the list of its padded leaves, RLlib 1.13's.)
    a, b = f_pad[0]
    for row, length, state in zip(a.reshape(3, 3), seq_lens, s_init[0]):
        assert row[0] == state and row[:length].tolist() == list(range(state, state + length))
    assert (b == a * 10).all()
    # A list is one column, not a structure.
    f_pad, _, seq_lens = chop_into_sequences(
        feature_columns=[[1, 2, 3]],
        state_columns=[],
        episode_ids=[0, 0, 1],
        max_seq_len=2,
        handle_nested_data=True,
    )
    assert [leaf.tolist() for leaf in f_pad[0]] == [[1, 2, 3, 0]]


def test_pad_batch_to_sequences_of_same_size_for_a_recurrent_batch():
    batch = SampleBatch(
        {
            "obs": np.arange(5, dtype=np.float32)[:, None],
            "eps_id": np.array([0, 0, 0, 1, 1]),
            "state_in_0": np.arange(5, dtype=np.float32)[:, None] * 10,
            "state_out_0": np.arange(5, dtype=np.float32)[:, None] * 10 + 1,
            "infos": [{"i": i} for i in range(5)],
        }
    )
    views = {"state_in_0": ViewRequirement("state_out_0", shift=-1)}
    pad_batch_to_sequences_of_same_size(batch, max_seq_len=2, view_requirements=views)
    assert batch.zero_padded and batch.max_seq_len == 2
    assert batch["seq_lens"].tolist() == [2, 1, 2]
    assert batch["obs"].ravel().tolist() == [0, 1, 2, 0, 3, 4]
    assert batch["state_in_0"].ravel().tolist() == [0, 20, 30]
    assert batch["infos"] == [{"i": 0}, {"i": 1}, {"i": 2}, {}, {"i": 3}, {"i": 4}]
    assert batch.count == 6
    # A second call leaves it as it is.
    pad_batch_to_sequences_of_same_size(batch, max_seq_len=2, view_requirements=views)
    assert batch["obs"].shape == (6, 1)


def test_pad_batch_leaves_a_feed_forward_batch_alone_unless_it_must_divide():
    plain = SampleBatch({"obs": np.arange(3.0), "agent_index": np.zeros(3, np.int64)})
    pad_batch_to_sequences_of_same_size(plain, max_seq_len=20)
    assert plain["obs"].tolist() == [0.0, 1.0, 2.0] and "seq_lens" not in plain
    multi = SampleBatch({"obs": np.arange(3.0), "agent_index": np.array([0, 1, 1])})
    pad_batch_to_sequences_of_same_size(multi, max_seq_len=20, batch_divisibility_req=2)
    assert multi["seq_lens"].tolist() == [1, 2] and multi["obs"].tolist() == [0.0, 0.0, 1.0, 2.0]


def test_add_time_dimension_takes_seq_lens_or_max_seq_len():
    rows = torch.arange(12).reshape(6, 2)
    assert add_time_dimension(rows, max_seq_len=3).shape == (2, 3, 2)
    assert add_time_dimension(rows, torch.tensor([3, 1])).shape == (2, 3, 2)
    assert add_time_dimension(rows, max_seq_len=3, time_major=True).shape == (3, 2, 2)
    with pytest.raises(ValueError, match="one of them"):
        add_time_dimension(rows)
    with pytest.raises(ValueError, match="max_seq_len=4"):
        add_time_dimension(rows, max_seq_len=4)
    with pytest.raises(ValueError, match="torch only"):
        add_time_dimension(rows, max_seq_len=3, framework="tf")


def test_timeslice_along_seq_lens_with_overlap():
    batch = SampleBatch(
        {
            "obs": np.arange(5.0),
            "state_in_0": np.arange(5.0)[:, None] + 100,
            "seq_lens": np.array([2, 3], np.int32),
        }
    )
    first, second = timeslice_along_seq_lens_with_overlap(
        batch, pre_overlap=1, zero_pad_max_seq_len=4
    )
    assert first["obs"].tolist() == [0, 1, 0, 0] and first["seq_lens"].tolist() == [2]
    assert second["obs"].tolist() == [1, 2, 3, 4] and second["seq_lens"].tolist() == [4]
    assert second["state_in_0"].tolist() == [[0.0]]  # zero initial states
    kept = timeslice_along_seq_lens_with_overlap(batch, zero_init_states=False)
    assert [k["state_in_0"].tolist() for k in kept] == [[[100.0]], [[102.0]]]
