"""RLlib 1.13's `SampleBatch` methods: concat, timeslices, right_zero_pad, zero_pad,
compress, decompress_if_needed, set_training, to_device, set_get_interceptor,
get_single_step_input_dict; `MultiAgentBatch.timeslices` and `concat_samples`."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from corral.policy.sample_batch import MultiAgentBatch, SampleBatch
from corral.policy.view_requirement import ViewRequirement


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


def test_zero_pad_is_right_zero_pad_with_rllib_1_13_s_flags():
    seqs = SampleBatch(
        {"t": np.array([1, 2, 3]), "state_in_0": np.array([[1.0], [2.0]]), "seq_lens": [1, 2]}
    )
    assert seqs.zero_pad(3) is seqs and seqs.zero_padded and seqs.max_seq_len == 3
    assert seqs["t"].tolist() == [1, 0, 0, 2, 3, 0] and seqs["state_in_0"].tolist() == [
        [1.0],
        [2.0],
    ]
    # exclude_states=False: state columns of one row per step are padded too (not seq_lens).
    rows = SampleBatch(
        {"t": np.array([1, 2, 3]), "state_in_0": np.array([7, 8, 9]), "seq_lens": [1, 2]}
    )
    rows.zero_pad(2, exclude_states=False)
    assert rows["state_in_0"].tolist() == [7, 0, 8, 9] and rows["seq_lens"].tolist() == [1, 2]


def test_multi_agent_batch_concat_samples():
    a = MultiAgentBatch({"p": batch(2)}, 2)
    b = MultiAgentBatch({"p": batch(3), "q": batch(1)}, 3)
    both = MultiAgentBatch.concat_samples([a, b])
    assert isinstance(both, MultiAgentBatch) and both.count == 5
    assert both.policy_batches["p"]["t"].tolist() == [0, 1, 0, 1, 2]
    assert both.policy_batches["q"].count == 1


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


def test_to_device_makes_numeric_columns_tensors_in_place():
    b = batch(3)
    b["infos"] = [{}, {"a": 1}, {}]
    assert b.to_device("cpu") is b
    assert isinstance(b["obs"], torch.Tensor) and b["obs"].shape == (3, 2)
    assert b["infos"][1] == {"a": 1} and b.count == 3
    with pytest.raises(NotImplementedError, match="torch only"):
        batch().to_device("cpu", framework="tf")


def test_set_get_interceptor_applies_to_reads():
    b = batch(2)
    b.set_get_interceptor(torch.as_tensor)
    assert isinstance(b["t"], torch.Tensor)
    assert isinstance(dict.__getitem__(b, "t"), np.ndarray)  # the stored column is unchanged
    b.set_get_interceptor(None)
    assert isinstance(b["t"], np.ndarray)


def test_get_single_step_input_dict_last_is_the_next_step():
    b = SampleBatch(
        {
            "obs": np.array([[0.0], [1.0], [2.0]], np.float32),
            "new_obs": np.array([[1.0], [2.0], [3.0]], np.float32),
            "actions": np.array([5, 6, 7]),
            "rewards": np.array([0.5, 0.6, 0.7], np.float32),
            "prev_actions": np.array([0, 5, 6]),
            "state_out_0": np.array([[10.0], [11.0], [12.0]], np.float32),
            "state_in_0": np.array([[9.0], [10.0], [11.0]], np.float32),
        }
    )
    views = {
        "obs": ViewRequirement(),
        "prev_actions": ViewRequirement("actions", shift=-1),
        "prev_rewards": ViewRequirement("rewards", shift=-1),
        "state_in_0": ViewRequirement("state_out_0", shift=-1),
        "frames": ViewRequirement("obs", shift="-3:0"),
        "actions": ViewRequirement(used_for_compute_actions=False),
    }
    last = b.get_single_step_input_dict(views)
    assert last["obs"].tolist() == [[3.0]]
    assert last["prev_actions"].tolist() == [7]
    assert last["prev_rewards"].tolist() == pytest.approx([0.7])
    assert last["state_in_0"].tolist() == [[12.0]]
    # Frames -3..0 of the next step (index 3 of obs + the last new_obs): 0, 1, 2, 3.
    assert last["frames"].tolist() == [[[0.0], [1.0], [2.0], [3.0]]]
    assert "actions" not in last and last["seq_lens"].tolist() == [1]
    row = b.get_single_step_input_dict(views, index=1)
    assert row["obs"].tolist() == [[1.0]] and row["prev_actions"].tolist() == [5]
    assert row["state_in_0"].tolist() == [[10.0]]
    short = SampleBatch({"obs": np.array([[0.0]]), "new_obs": np.array([[1.0]])})
    window = short.get_single_step_input_dict({"frames": ViewRequirement("obs", shift="-3:0")})
    assert window["frames"].tolist() == [[[0.0], [0.0], [0.0], [1.0]]]  # zeros before the start


def test_multi_agent_timeslices_lock_steps_across_agents():
    # RLlib 1.13's docstring example: agent 1 acts at t 1, 2, 3; agent 2 at t 1, 3;
    # agent 3 at t 3 only.
    def rows(ts, agent):
        return SampleBatch(
            {
                "eps_id": np.zeros(len(ts), np.int64),
                "t": np.array(ts),
                "agent_index": np.full(len(ts), agent),
                "obs": np.array([[10 * agent + t] for t in ts], np.float32),
            }
        )

    ma = MultiAgentBatch({"p1": rows([1, 2, 3], 1), "p2": rows([1, 3], 2), "p3": rows([3], 3)}, 3)
    ones = ma.timeslices(1)
    assert [s.count for s in ones] == [1, 1, 1]
    assert [sorted(s.policy_batches) for s in ones] == [["p1", "p2"], ["p1"], ["p1", "p2", "p3"]]
    twos = ma.timeslices(2)
    assert [s.count for s in twos] == [2, 1]
    assert twos[0].policy_batches["p1"]["obs"].ravel().tolist() == [11.0, 12.0]
    assert twos[0].policy_batches["p2"]["obs"].ravel().tolist() == [21.0]
    assert twos[1].agent_steps() == 3
    with pytest.raises(ValueError, match="k >= 1"):
        ma.timeslices(0)
    with pytest.raises(ValueError, match=r"needs columns \['eps_id'\]"):
        MultiAgentBatch({"p": batch(2)}, 2).timeslices(1)


@pytest.mark.parametrize(
    ("start", "end", "states", "seq_lens"),
    [
        (0, 10, [0, 1, 2], [4, 3, 3]),
        (0, 4, [0], [4]),
        (2, 6, [0, 1], [2, 2]),
        (1, 3, [0], [2]),
        (5, 9, [1, 2], [2, 2]),
        (9, 10, [2], [1]),
    ],
)
def test_slice_of_a_batch_of_sequences_finds_their_states(start, end, states, seq_lens):
    """RLlib 1.13: without sequence bounds, the slice keeps the sequences its rows lie in
    (their state_in rows), the first and last cut to the rows taken."""
    batch = SampleBatch(
        {
            "obs": np.arange(10),
            "state_in_0": np.array([[0.0], [1.0], [2.0]]),
            SampleBatch.SEQ_LENS: np.array([4, 3, 3]),
        }
    )
    part = batch.slice(start, end)
    np.testing.assert_array_equal(part["obs"], np.arange(start, end))
    np.testing.assert_array_equal(part["state_in_0"].ravel(), states)
    np.testing.assert_array_equal(part[SampleBatch.SEQ_LENS], seq_lens)
    # A batch whose state_in column has a row per step keeps the rows and drops seq_lens.
    per_step = SampleBatch({"obs": np.arange(4), "state_in_0": np.arange(4), "seq_lens": [4]})
    assert SampleBatch.SEQ_LENS not in per_step.slice(1, 3)
    np.testing.assert_array_equal(per_step.slice(1, 3)["state_in_0"], [1, 2])
