"""JSON output and input: corral's format, rollover, errors, and the worker wiring."""

from __future__ import annotations

import glob
import json
import logging
import os
import re

import numpy as np
import pytest

from corral.offline import IOContext, JsonReader, JsonWriter, MixedInput, ShuffledInput
from corral.offline.columns import (
    NPY_LZ4_PREFIX,
    MalformedRecordError,
    batch_from_json,
    batch_to_json,
    compress_column,
    decompress_column,
)
from corral.policy.sample_batch import MultiAgentBatch, SampleBatch


def _batch(n: int = 20, seed: int = 0, eps: int = 0) -> SampleBatch:
    rng = np.random.default_rng(seed)
    return SampleBatch(
        {
            "obs": rng.standard_normal((n, 3, 2)).astype(np.float32),
            "new_obs": rng.standard_normal((n, 3, 2)).astype(np.float32),
            "actions": rng.integers(0, 4, n),
            "rewards": rng.standard_normal(n).astype(np.float32),
            "terminateds": np.arange(n) == n - 1,
            "truncateds": np.zeros(n, dtype=bool),
            "dones": np.arange(n) == n - 1,
            "eps_id": np.full(n, eps, dtype=np.int64),
            "t": np.arange(n),
        }
    )


@pytest.mark.parametrize(
    "array",
    [
        np.random.default_rng(1).standard_normal((7, 5)).astype(np.float32),
        np.random.default_rng(2).standard_normal((4, 2, 3)),  # float64 stays float64
        np.arange(12, dtype=np.uint8).reshape(3, 4),
        np.array([np.nan, np.inf, -0.0, 1e-45], dtype=np.float32),
        np.array([True, False, True]),
        np.asfortranarray(np.arange(6, dtype=np.int16).reshape(2, 3)),
        np.zeros((0, 4), dtype=np.float32),
    ],
)
def test_compressed_columns_round_trip_bit_exactly(array):
    text = compress_column(array)
    assert text.startswith(NPY_LZ4_PREFIX)
    back = decompress_column(text, "here")
    assert back.dtype == array.dtype and back.shape == array.shape
    assert back.tobytes() == np.ascontiguousarray(array).tobytes()


def test_compressed_columns_hold_no_pickle():
    # Object columns cannot be written as .npy without pickle: they stay plain lists.
    batch = SampleBatch({"obs": np.array([{"a": 1}, {"b": 2}], dtype=object)})
    record = json.loads(batch_to_json(batch, ["obs"]))
    assert record["obs"] == [{"a": 1}, {"b": 2}]


def test_writer_files_are_named_as_rllib_and_read_back(tmp_path):
    writer = JsonWriter(str(tmp_path), IOContext(worker_index=3), compress_columns=["obs"])
    batches = [_batch(seed=i, eps=i) for i in range(3)]
    for b in batches:
        writer.write(b)
    writer.close()
    (name,) = os.listdir(tmp_path)
    assert re.fullmatch(r"output-\d{4}-\d\d-\d\d_\d\d-\d\d-\d\d_worker-3_0\.json", name)
    with open(tmp_path / name) as f:
        record = json.loads(f.readline())
    assert record["type"] == "SampleBatch" and isinstance(record["obs"], str)
    assert isinstance(record["new_obs"], list)
    got = list(JsonReader(str(tmp_path)).read_all_files())
    for want, back in zip(batches, got, strict=True):
        assert set(back) == set(want)
        for k in want:
            assert back[k].dtype == want[k].dtype, k
            np.testing.assert_array_equal(back[k], want[k])


def test_rollover_keeps_every_file_within_max_file_size(tmp_path):
    line = len(batch_to_json(_batch(), ["obs", "new_obs"])) + 1
    max_size = int(line * 3.5)
    writer = JsonWriter(str(tmp_path), max_file_size=max_size)
    for i in range(20):
        writer.write(_batch(seed=i))
    writer.close()
    files = sorted(glob.glob(str(tmp_path / "*.json")))
    assert len(files) >= 6
    assert all(os.path.getsize(f) <= max_size for f in files)
    assert sum(len((tmp_path / f).read_text().splitlines()) for f in files) == 20
    assert {f.rsplit("_", 1)[1] for f in files} == {f"{i}.json" for i in range(len(files))}


def test_two_writers_of_one_worker_index_never_truncate_each_other(tmp_path):
    a, b = JsonWriter(str(tmp_path)), JsonWriter(str(tmp_path))
    a.write(_batch(seed=1))
    b.write(_batch(seed=2))
    a.close()
    b.close()
    assert len(list(JsonReader(str(tmp_path)).read_all_files())) == 2


def test_multi_agent_batches_are_kept_per_policy(tmp_path):
    ma = MultiAgentBatch({"p0": _batch(5, seed=1), "p1": _batch(8, seed=2)}, env_steps=8)
    writer = JsonWriter(str(tmp_path))
    writer.write(ma)
    writer.close()
    (back,) = JsonReader(str(tmp_path)).read_all_files()
    assert isinstance(back, MultiAgentBatch) and back.count == 8
    assert set(back.policy_batches) == {"p0", "p1"}
    np.testing.assert_array_equal(back.policy_batches["p1"]["obs"], ma.policy_batches["p1"]["obs"])


def test_corrupt_line_is_skipped_with_a_warning_naming_file_and_line(tmp_path, caplog):
    # As RLlib 1.x's reader: a cut-off line (a writer that crashed) is skipped, with one
    # warning per line, and the records around it are read.
    path = tmp_path / "data.json"
    first, second = _batch(), _batch()
    second["obs"] = second["obs"] + 1.0
    good = batch_to_json(first, ["obs"])
    path.write_text(
        good + "\n\n" + good[: len(good) // 2] + "\n" + batch_to_json(second, []) + "\n"
    )
    reader = JsonReader(str(path))
    with caplog.at_level(logging.WARNING, logger="corral.offline.json_reader"):
        np.testing.assert_array_equal(reader.next()["obs"], first["obs"])
        np.testing.assert_array_equal(reader.next()["obs"], second["obs"])
        for _ in range(4):  # the file again, and again: the line is warned about once
            reader.next()
    warnings = [r.getMessage() for r in caplog.records if "corrupt" in r.getMessage()]
    assert len(warnings) == 1
    assert re.search(r"data\.json, line 3: not a JSON record", warnings[0])
    assert len(list(JsonReader(str(path)).read_all_files())) == 2


@pytest.mark.parametrize(
    ("record", "message"),
    [
        ('{"obs": [1]}', "must be an object with a 'type'"),
        ('{"type": "Batch"}', "unknown record type 'Batch'"),
        ('{"type": "SampleBatch", "obs": [1, 2], "actions": [1]}', "differ in length"),
        ('{"type": "SampleBatch", "obs": "hello"}', "column 'obs'.*not a compressed column"),
    ],
)
def test_bad_records_are_named_and_a_file_of_nothing_else_is_an_error(
    tmp_path, caplog, record, message
):
    path = tmp_path / "bad.json"
    path.write_text(record + "\n")
    failed = r"Failed to read a valid experience batch.*bad\.json"
    with (
        caplog.at_level(logging.WARNING, logger="corral.offline.json_reader"),
        pytest.raises(ValueError, match=failed),
    ):
        JsonReader(str(path)).next()
    assert re.search(rf"bad\.json, line 1.*{message}", caplog.text)
    with pytest.raises(MalformedRecordError, match=message):
        batch_from_json(record, "bad.json, line 1")


def test_reader_inputs_folder_glob_file_list_and_errors(tmp_path):
    for i in range(2):
        w = JsonWriter(str(tmp_path / f"d{i}"))
        w.write(_batch(seed=i))
        w.close()
    one = glob.glob(str(tmp_path / "d0" / "*.json"))
    assert len(JsonReader(str(tmp_path / "d0")).files) == 1
    assert len(JsonReader(str(tmp_path / "d*" / "*.json")).files) == 2
    assert JsonReader(one[0]).files == one
    assert len(JsonReader([one[0], *glob.glob(str(tmp_path / "d1" / "*.json"))]).files) == 2
    with pytest.raises(ValueError, match="No files found matching"):
        JsonReader(str(tmp_path / "nothing" / "*.json"))
    with pytest.raises(ValueError, match="is a URI"):
        JsonReader("s3://bucket/data.json")
    with pytest.raises(ValueError, match="does not exist"):
        JsonReader([str(tmp_path / "missing.json")])


def test_local_file_uris_are_read_and_written(tmp_path):
    # RLlib's readers and writers took `file://` URIs of local paths.
    writer = JsonWriter(f"file://{tmp_path / 'out dir'}")
    writer.write(_batch(seed=0))
    writer.close()
    [written] = glob.glob(str(tmp_path / "out dir" / "*.json"))
    assert JsonReader(f"file://{written}").files == [written]
    assert JsonReader("file://localhost" + str(tmp_path / "out%20dir")).files == [written]
    with pytest.raises(ValueError, match="is a URI"):
        JsonReader("file://otherhost/data.json")
    with pytest.raises(ValueError, match="is a URI"):
        JsonWriter("s3://bucket/out")


class _Counting:
    def __init__(self, tag: int) -> None:
        self.tag = tag

    def next(self) -> SampleBatch:
        return SampleBatch({"obs": np.full(1, self.tag)})


def test_mixed_input_draws_in_proportion():
    from scipy.stats import chisquare

    probs = {lambda ctx: _Counting(0): 0.2, lambda ctx: _Counting(1): 0.5}
    probs[lambda ctx: _Counting(2)] = 0.3
    mixed = MixedInput(probs, IOContext(config={"seed": 3}))
    draws = np.array([int(mixed.next()["obs"][0]) for _ in range(5000)])
    counts = np.bincount(draws, minlength=3)
    expected = np.array([0.2, 0.5, 0.3]) * len(draws)
    assert chisquare(counts, expected).pvalue > 0.001
    # A skewed reader would fail the same test.
    assert chisquare(counts, np.array([0.3, 0.4, 0.3]) * len(draws)).pvalue < 1e-6


@pytest.mark.parametrize(
    ("dist", "message"),
    [
        ({"a": 0.5, "b": 0.4}, "must sum to 1.0"),
        ({"a": 1.5, "b": -0.5}, "must be a number >= 0"),
        ({}, "non-empty dict"),
    ],
)
def test_mixed_input_checks_its_probabilities(dist, message):
    with pytest.raises(ValueError, match=message):
        MixedInput(dist, IOContext())


def test_shuffled_input_fills_its_buffer_then_mixes():
    class Seq:
        i = 0

        def next(self) -> SampleBatch:
            self.i += 1
            return SampleBatch({"obs": np.array([self.i])})

    child = Seq()
    shuffled = ShuffledInput(child, 10, seed=0)
    first = [int(shuffled.next()["obs"][0]) for _ in range(50)]
    assert child.i == 60  # 10 to fill, then one per next()
    assert first != sorted(first)
    assert ShuffledInput(Seq(), 0).next()["obs"][0] == 1
    with pytest.raises(ValueError, match="shuffle_buffer_size"):
        ShuffledInput(Seq(), -1)


def test_from_json_data_and_io_context():
    from corral.offline.json_reader import from_json_data

    record = json.loads(batch_to_json(_batch(4), ["obs"]))
    batch = from_json_data(record, None)
    assert isinstance(batch, SampleBatch) and batch.count == 4
    ioctx = IOContext(config={"input_config": {"a": 1}, "output_config": {"b": 2}})
    assert ioctx.input_config == {"a": 1} and ioctx.output_config == {"b": 2}
    assert IOContext().log_dir == os.getcwd()
    with pytest.raises(ValueError, match="needs a worker with an env"):
        ioctx.default_sampler_input()


def test_rllib_module_level_to_json_writes_a_record_the_reader_reads(tmp_path):
    # RLlib 1.x code (and its tests) wrote files by hand with `json_writer._to_json`.
    from corral.offline.json_writer import _to_json

    batch = _batch()
    (tmp_path / "f.json").write_text(_to_json(batch, ["obs"]) + "\n" + _to_json(batch, []))
    back = list(JsonReader(str(tmp_path / "f.json")).read_all_files())
    assert len(back) == 2
    for b in back:
        np.testing.assert_array_equal(b["obs"], batch["obs"])
