"""Parquet files and Minari datasets as offline data."""

from __future__ import annotations

import glob
import os

import gymnasium as gym
import numpy as np
import pytest

from corral.offline import IOContext, MinariReader, ParquetReader, ParquetWriter
from corral.offline.inputs import input_reader_for, make_output_writer
from corral.policy.sample_batch import MultiAgentBatch, SampleBatch


def _batch(n: int, seed: int) -> SampleBatch:
    rng = np.random.default_rng(seed)
    return SampleBatch(
        {
            "obs": rng.standard_normal((n, 2, 3)).astype(np.float32),
            "actions": rng.integers(0, 3, n),
            "rewards": rng.standard_normal(n).astype(np.float32),
            "dones": np.arange(n) == n - 1,
            "pixels": rng.integers(0, 255, (n, 4, 4), dtype=np.uint8),
            "infos": [{"i": i} for i in range(n)],
        }
    )


def test_parquet_round_trips_batches_with_dtypes_and_shapes(tmp_path):
    writer = ParquetWriter(str(tmp_path), IOContext(worker_index=2))
    batches = [_batch(5 + i, i) for i in range(4)]
    for b in batches:
        writer.write(b)
    writer.close()
    (name,) = os.listdir(tmp_path)
    assert name.startswith("output-") and name.endswith("_worker-2_0.parquet")
    got = list(ParquetReader(str(tmp_path)).read_all_files())
    assert len(got) == 4  # one row group per written batch
    for want, back in zip(batches, got, strict=True):
        for k in want:
            if k == "infos":
                assert back[k] == want[k]
            else:
                assert back[k].dtype == want[k].dtype and back[k].shape == want[k].shape, k
                np.testing.assert_array_equal(back[k], want[k])


def test_parquet_rolls_over_and_keeps_policies_apart(tmp_path):
    writer = ParquetWriter(str(tmp_path), max_file_size=1)
    for i in range(3):
        writer.write(MultiAgentBatch({"a": _batch(4, i), "b": _batch(6, i + 10)}, 6))
    writer.close()
    files = sorted(os.listdir(tmp_path))
    assert len(files) == 6 and sum("_policy-a_" in f for f in files) == 3
    got = list(ParquetReader(str(tmp_path)).read_all_files())
    sizes = sorted((next(iter(b.policy_batches)), b.count) for b in got)
    assert sizes == [("a", 4)] * 3 + [("b", 6)] * 3


def test_output_config_format_parquet_and_input_by_suffix(tmp_path):
    ioctx = IOContext(config={"output": str(tmp_path), "output_config": {"format": "parquet"}})
    writer = make_output_writer(ioctx)
    assert isinstance(writer, ParquetWriter)
    writer.write(_batch(3, 0))
    writer.close()
    assert isinstance(input_reader_for(str(tmp_path), IOContext()), ParquetReader)
    files = glob.glob(str(tmp_path / "*.parquet"))
    assert isinstance(input_reader_for(files, IOContext()), ParquetReader)
    # (`output="dataset"` is Ray Data's writer: it needs its own output_config.)
    with pytest.raises(ValueError, match="output='dataset' needs output_config"):
        make_output_writer(IOContext(config={"output": "dataset"}))
    with pytest.raises(ValueError, match="expected 'json' or 'parquet'"):
        make_output_writer(IOContext(config={"output": "x", "output_config": {"format": "csv"}}))


def test_corrupt_parquet_file_is_named(tmp_path):
    path = tmp_path / "bad.parquet"
    path.write_bytes(b"not parquet")
    with pytest.raises(ValueError, match=r"bad\.parquet: not a readable Parquet file"):
        ParquetReader(str(path)).next()


@pytest.fixture
def minari_dataset(tmp_path, monkeypatch):
    """A local Minari dataset of 5 random CartPole episodes.

    Built from episode buffers (`create_dataset_from_buffers`), with no jax; the
    `DataCollector` way is the test after the next.
    """
    minari = pytest.importorskip("minari")
    from minari.data_collector import EpisodeBuffer

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    env = gym.make("CartPole-v1")
    rng = np.random.default_rng(0)
    buffers = []
    for episode in range(5):
        obs, _ = env.reset(seed=episode)
        steps: dict[str, list] = {"obs": [obs], "act": [], "rew": [], "term": [], "trunc": []}
        done = False
        while not done:
            action = int(rng.integers(2))
            obs, reward, term, trunc, _ = env.step(action)
            for key, value in zip(
                ("obs", "act", "rew", "term", "trunc"), (obs, action, reward, term, trunc)
            ):
                steps[key].append(value)
            done = term or trunc
        buffers.append(
            EpisodeBuffer(
                id=episode,
                observations=np.array(steps["obs"]),
                actions=np.array(steps["act"]),
                rewards=steps["rew"],
                terminations=steps["term"],
                truncations=steps["trunc"],
                infos={},
            )
        )
    minari.create_dataset_from_buffers(
        "cartpole/random-v0",
        buffers,
        env=env,
        eval_env="CartPole-v1",
        algorithm_name="random",
        author="corral tests",
        author_email="tests@corral.invalid",
        code_permalink="tests/offline/test_parquet_minari.py",
        description="5 random CartPole-v1 episodes",
    )
    return "cartpole/random-v0"


def test_minari_episodes_become_sample_batches(minari_dataset):
    reader = input_reader_for(f"minari://{minari_dataset}", IOContext(config={"seed": 1}))
    assert isinstance(reader, MinariReader)
    seen = set()
    for _ in range(5):
        batch = reader.next()
        eps = set(batch["eps_id"].tolist())
        assert len(eps) == 1
        seen |= eps
        n = batch.count
        assert batch["obs"].shape == (n, 4) and batch["obs"].dtype == np.float32
        np.testing.assert_array_equal(batch["obs"][1:], batch["new_obs"][:-1])
        assert batch["dones"][-1] and not batch["dones"][:-1].any()
        assert (batch["t"] == np.arange(n)).all()
    assert len(seen) == 5  # one pass visits every episode once
    with pytest.raises(ValueError, match="no such local Minari dataset"):
        MinariReader("cartpole/missing-v0")


def test_a_dataset_recorded_by_minaris_data_collector_trains_bc(tmp_path, monkeypatch):
    """A dataset recorded the way Minari users make them (`DataCollector`, which needs
    `minari[create]`), read as `input` by an offline trainer."""
    minari = pytest.importorskip("minari")
    pytest.importorskip("jax", reason="Minari's DataCollector needs minari[create] (jax)")
    from minari import DataCollector

    from corral.agents.marwil import BCTrainer

    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path / "minari"))
    env = DataCollector(gym.make("CartPole-v1"))
    steps = 0
    for episode in range(4):
        env.reset(seed=episode)
        done = False
        while not done:
            _, _, term, trunc, _ = env.step(env.action_space.sample())
            done, steps = term or trunc, steps + 1
    dataset = env.create_dataset(
        dataset_id="cartpole/collected-v0",
        algorithm_name="random",
        author="corral tests",
        author_email="tests@corral.invalid",
        description="4 random CartPole-v1 episodes",
        eval_env="CartPole-v1",
    )
    assert dataset.total_steps == steps
    assert minari.list_local_datasets()  # where corral's reader looks

    reader = input_reader_for("minari://cartpole/collected-v0", IOContext(config={"seed": 0}))
    read = sum(reader.next().count for _ in range(4))
    assert read == steps  # one pass: every recorded step once

    space = gym.make("CartPole-v1")
    trainer = BCTrainer(
        config={
            "input": "minari://cartpole/collected-v0",
            "observation_space": space.observation_space,
            "action_space": space.action_space,
            "train_batch_size": 32,
            "evaluation_interval": None,
            "seed": 0,
        }
    )
    try:
        result = trainer.train()
        assert result["info"]["num_env_steps_trained"] > 0
    finally:
        trainer.stop()
