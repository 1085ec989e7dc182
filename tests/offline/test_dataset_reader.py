"""Ray Data datasets as offline input (``input="dataset"``)."""

from __future__ import annotations

import gc

import numpy as np
import pytest

from corral.offline import IOContext, ParquetWriter
from corral.offline.dataset_reader import DatasetReader, load_dataset
from corral.offline.inputs import input_reader_for
from corral.policy.sample_batch import SampleBatch

ray = pytest.importorskip("ray")
pytest.importorskip("ray.data")


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False)
    yield
    gc.collect()  # Ray Data generators left in reference cycles end while Ray is up
    ray.shutdown()


def _batch(n: int, start: int) -> SampleBatch:
    return SampleBatch(
        {
            "obs": np.arange(start * 6, (start + n) * 6, dtype=np.float32).reshape(n, 2, 3),
            "actions": np.arange(start, start + n),
            "rewards": np.ones(n, dtype=np.float32),
            "dones": np.zeros(n, dtype=bool),
        }
    )


def test_parquet_dataset_in_fixed_size_batches_with_row_shapes(tmp_path, local_ray):
    writer = ParquetWriter(str(tmp_path))
    writer.write(_batch(7, 0))
    writer.write(_batch(5, 7))
    writer.close()
    config = {
        "input": "dataset",
        "input_config": {"format": "parquet", "path": str(tmp_path)},
        "train_batch_size": 4,
    }
    reader = input_reader_for("dataset", IOContext(config=config))
    assert isinstance(reader, DatasetReader)
    got = [reader.next() for _ in range(3)]
    assert [b.count for b in got] == [4, 4, 4]
    actions = np.concatenate([b["actions"] for b in got])
    np.testing.assert_array_equal(np.sort(actions), np.arange(12))
    for b in got:
        assert b["obs"].shape == (4, 2, 3) and b["obs"].dtype == np.float32
        np.testing.assert_array_equal(b["obs"][:, 0, 0], b["actions"] * 6)
    assert reader.next().count == 4  # the next pass


def test_remote_workers_read_their_own_shard(tmp_path, local_ray):
    writer = ParquetWriter(str(tmp_path))
    writer.write(_batch(8, 0))
    writer.close()
    seen = []
    for index in (1, 2):
        config = {
            "num_workers": 2,
            "train_batch_size": 8,
            "input_config": {"format": "parquet", "path": str(tmp_path)},
        }
        reader = DatasetReader(IOContext(config=config, worker_index=index))
        assert reader.batch_size == 4
        seen.append(reader.next()["actions"].tolist())
    assert sorted(seen[0] + seen[1]) == list(range(8))


def test_json_lines_of_steps_and_bad_configs(tmp_path, local_ray):
    path = tmp_path / "steps.json"
    path.write_text("".join(f'{{"obs": [{i}, {i}], "actions": {i}}}\n' for i in range(6)))
    reader = DatasetReader(
        IOContext(config={"input_config": {"format": "json", "path": str(path), "batch_size": 3}})
    )
    batch = reader.next()
    assert batch.count == 3 and batch["obs"].shape == (3, 2)
    with pytest.raises(ValueError, match="needs input_config"):
        load_dataset({"format": "csv", "path": "x"})
    with pytest.raises(ValueError, match="must be callable"):
        load_dataset({"loader_fn": 3})


@pytest.mark.parametrize("num_learners", [0, 2])
def test_bc_trains_on_a_ray_dataset_given_as_input(local_ray, num_learners, cartpole_steps):
    # With learners too: the workers read the dataset, the learners split its batches.
    from corral.agents.marwil import BCTrainer

    env, rows = cartpole_steps(200)
    dataset = ray.data.from_items(rows)
    assert isinstance(input_reader_for(dataset, IOContext(config={})), DatasetReader)
    trainer = BCTrainer(
        config={
            "input": dataset,
            "observation_space": env.observation_space,
            "action_space": env.action_space,
            "train_batch_size": 50,
            "evaluation_interval": None,
            "num_learners": num_learners,
            "seed": 0,
        }
    )
    try:
        before = trainer.get_policy().get_weights()
        for _ in range(2):
            result = trainer.train()
        assert result["info"]["num_env_steps_trained"] >= 100
        stats = result["info"]["learner"]["default_policy"]["learner_stats"]
        assert np.isfinite(stats["policy_loss"])
        after = trainer.get_policy().get_weights()
        assert any(not np.array_equal(before[k], after[k]) for k in after)
    finally:
        trainer.stop()
