"""Ray Data output (``output="dataset"``): `DatasetWriter`, read back every way."""

from __future__ import annotations

import gc
import glob

import numpy as np
import pytest

from corral.offline import (
    DatasetWriter,
    IOContext,
    JsonReader,
    ParquetReader,
    get_dataset_and_shards,
    get_offline_io_resource_bundles,
)
from corral.offline.dataset_reader import DEFAULT_NUM_CPUS_PER_TASK, DatasetReader
from corral.offline.inputs import make_output_writer
from corral.policy.sample_batch import MultiAgentBatch, SampleBatch

ray = pytest.importorskip("ray", reason="output='dataset' needs Ray (the 'ray' extra)")
pytest.importorskip("ray.data", reason="output='dataset' needs Ray Data")


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    yield
    gc.collect()
    ray.shutdown()


def _batch(n: int, start: int) -> SampleBatch:
    return SampleBatch(
        {
            "obs": np.arange(start * 6, (start + n) * 6, dtype=np.float32).reshape(n, 2, 3),
            "actions": np.arange(start, start + n),
            "rewards": np.full(n, 0.5, dtype=np.float32),
            "dones": np.zeros(n, dtype=bool),
        }
    )


def _write(tmp_path, fmt: str, per_file: int) -> DatasetWriter:
    config = {
        "output": "dataset",
        "output_config": {
            "format": fmt,
            "path": str(tmp_path),
            "max_num_samples_per_file": per_file,
        },
    }
    writer = make_output_writer(IOContext(config=config))
    assert isinstance(writer, DatasetWriter)
    writer.write(_batch(4, 0))
    writer.write(_batch(3, 4))
    writer.write(_batch(5, 7))
    return writer


@pytest.mark.parametrize("fmt", ["parquet", "json"])
def test_written_steps_read_back_by_dataset_and_file_readers(tmp_path, local_ray, fmt):
    writer = _write(tmp_path, fmt, per_file=2)
    assert len(glob.glob(str(tmp_path / f"*.{fmt}"))) == 1  # the first two batches
    writer.close()  # the third one
    files = glob.glob(str(tmp_path / f"*.{fmt}"))
    assert len(files) == 2

    config = {"input_config": {"format": fmt, "path": str(tmp_path)}, "train_batch_size": 12}
    got = DatasetReader(IOContext(config=config)).next()
    order = np.argsort(got["actions"])
    np.testing.assert_array_equal(got["actions"][order], np.arange(12))
    assert got["obs"].shape == (12, 2, 3) and got["obs"].dtype == np.float32
    np.testing.assert_array_equal(got["obs"][order], _batch(12, 0)["obs"])
    np.testing.assert_allclose(got["rewards"], 0.5)

    reader = ParquetReader(files) if fmt == "parquet" else JsonReader(files)
    steps = [b for b in reader.read_all_files()]
    actions = np.sort(np.concatenate([b["actions"] for b in steps]))
    np.testing.assert_array_equal(actions, np.arange(12))
    assert all(b["obs"].shape[1:] == (2, 3) for b in steps)


def test_max_num_samples_per_file_counts_batches(tmp_path, local_ray):
    """RLlib 1.13's rule: a file per `max_num_samples_per_file` written batches, however
    many steps they hold."""
    config = {"output_config": {"path": str(tmp_path), "max_num_samples_per_file": 2}}
    writer = DatasetWriter(IOContext(config=config))
    writer.write(_batch(4, 0))
    assert glob.glob(str(tmp_path / "*.json")) == []
    writer.write(_batch(4, 4))
    files = glob.glob(str(tmp_path / "*.json"))
    assert len(files) == 1
    rows = [b for b in JsonReader(files).read_all_files()]
    assert sorted(int(b["actions"][0]) for b in rows) == list(range(8))
    writer.write(_batch(3, 8))
    writer.write(SampleBatch())  # an empty batch counts as a write (no rows)
    assert len(glob.glob(str(tmp_path / "*.json"))) == 2


def test_bad_output_configs_and_multi_agent_batches(tmp_path, local_ray):
    with pytest.raises(ValueError, match="'csv'"):
        DatasetWriter(IOContext(config={"output_config": {"format": "csv", "path": "x"}}))
    with pytest.raises(ValueError, match="path"):
        DatasetWriter(IOContext(config={"output_config": {"format": "json"}}))
    with pytest.raises(ValueError, match="max_num_samples_per_file"):
        DatasetWriter(
            IOContext(
                config={"output_config": {"path": str(tmp_path), "max_num_samples_per_file": 0}}
            )
        )
    writer = DatasetWriter(IOContext(config={"output_config": {"path": str(tmp_path)}}))
    with pytest.raises(ValueError, match="single-agent"):
        writer.write(MultiAgentBatch({"p0": _batch(2, 0)}, 2))


def test_dataset_and_shards_and_resource_bundles(tmp_path, local_ray):
    _write(tmp_path, "parquet", per_file=100).close()
    config = {
        "input": "dataset",
        "input_config": {"format": "parquet", "path": str(tmp_path), "parallelism": 2},
    }
    ds, shards = get_dataset_and_shards(config, num_workers=0)
    assert shards == [ds] and ds.count() == 12
    ds, shards = get_dataset_and_shards(config, num_workers=2)
    assert shards[0] is None and [s.count() for s in shards[1:]] == [6, 6]

    assert get_offline_io_resource_bundles(config) == [{"CPU": DEFAULT_NUM_CPUS_PER_TASK}] * 2
    assert get_offline_io_resource_bundles({"input": "sampler"}) == []
    with pytest.raises(ValueError, match="input='dataset'"):
        get_dataset_and_shards({"input": "sampler"})
    with pytest.raises(ValueError, match="format"):
        get_dataset_and_shards({"input": "dataset", "input_config": {"format": "csv"}})
