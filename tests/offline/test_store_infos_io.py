"""`output_config={"store_infos": True}` through `output`: the `infos` column in the JSON
(and Parquet) files, read back by the readers; NumPy values converted, others refused."""

from __future__ import annotations

import json

import gymnasium as gym
import numpy as np
import pytest

from corral.agents.pg import PGTrainer
from corral.env import MultiAgentEnv
from corral.offline import IOContext, JsonReader, JsonWriter, ParquetReader, ParquetWriter
from corral.offline.columns import batch_to_json, infos_to_json
from corral.policy.sample_batch import MultiAgentBatch, SampleBatch

STORE = {"store_infos": True}


class NumpyInfoEnv(gym.Env):
    """Terminates after 3 steps; each step's info holds NumPy values (as Gymnasium
    envs' infos often do) and the step (`t`), or `bad` (a value JSON cannot store)."""

    observation_space = gym.spaces.Box(0, 100, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        self.bad = (config or {}).get("bad")
        self.t = 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.array([0.0], np.float32), {}

    def step(self, action):
        self.t += 1
        info = {
            "t": np.int64(self.t),
            "x": np.float32(0.5),
            "ok": np.bool_(True),
            "pos": np.arange(2) + self.t,
            "nested": {"pair": (np.float64(1.5), "s"), "none": None},
        }
        if self.bad is not None:
            info["stats"] = {"bad": self.bad}
        return np.array([self.t], np.float32), 1.0, self.t >= 3, False, info


def expected_info(t: int) -> dict:
    return {
        "t": t,
        "x": 0.5,
        "ok": True,
        "pos": [t, t + 1],
        "nested": {"pair": [1.5, "s"], "none": None},
    }


def pg(env, output, **config):
    return PGTrainer(
        config={
            "num_workers": 0,
            "rollout_fragment_length": 12,
            "model": {"fcnet_hiddens": [8]},
            "output": str(output),
            "output_config": STORE,
            **config,
        },
        env=env,
    )


def test_single_agent_infos_round_trip_through_the_json_files(tmp_path):
    trainer = pg(NumpyInfoEnv, tmp_path, num_envs_per_worker=2)
    try:
        trainer.train()
    finally:
        trainer.stop()
    batches = list(JsonReader(str(tmp_path)).read_all_files())
    assert batches
    for batch in batches:
        assert isinstance(batch, SampleBatch)
        infos = batch[SampleBatch.INFOS]
        assert len(infos) == batch.count
        # Each row's info is its step's (the one that came with its new_obs), as JSON
        # has it: NumPy scalars as numbers, arrays and tuples as lists.
        assert infos == [expected_info(int(t)) for t in batch[SampleBatch.NEXT_OBS][:, 0]]
        assert type(infos[0]["t"]) is int and type(infos[0]["ok"]) is bool


def test_the_json_line_holds_infos_as_objects(tmp_path):
    trainer = pg(NumpyInfoEnv, tmp_path)
    try:
        trainer.workers.local_worker().sample()
    finally:
        trainer.stop()
    (path,) = tmp_path.glob("*.json")
    record = json.loads(path.read_text().splitlines()[0])
    assert record["infos"][:3] == [expected_info(t) for t in (1, 2, 3)]


class TwoAgents(MultiAgentEnv):
    """Both agents observe every step; each one's info names it and the step (with
    NumPy values); the episode ends after 4 steps."""

    possible_agents = ["a", "b"]
    observation_space = gym.spaces.Box(-10.0, 10.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        super().__init__()
        self.t = 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return {a: np.zeros(1, np.float32) for a in self.possible_agents}, {}

    def step(self, action_dict):
        self.t += 1
        obs = {a: np.full(1, self.t, np.float32) for a in action_dict}
        infos = {a: {"agent": a, "t": np.int32(self.t)} for a in action_dict}
        rewards = {a: 1.0 for a in action_dict}
        return obs, rewards, {"__all__": self.t == 4}, {"__all__": False}, infos


def test_multi_agent_infos_round_trip_per_policy(tmp_path):
    trainer = pg(
        TwoAgents,
        tmp_path,
        rollout_fragment_length=8,
        multiagent={
            "policies": {"pa", "pb"},
            "policy_mapping_fn": lambda agent_id, episode, worker, **kw: f"p{agent_id}",
        },
    )
    try:
        trainer.train()
    finally:
        trainer.stop()
    batches = list(JsonReader(str(tmp_path)).read_all_files())
    assert batches
    for batch in batches:
        assert isinstance(batch, MultiAgentBatch)
        for pid, policy_batch in batch.policy_batches.items():
            agent = pid[1:]
            infos = policy_batch[SampleBatch.INFOS]
            assert infos == [{"agent": agent, "t": int(t) + 1} for t in policy_batch[SampleBatch.T]]


def test_a_value_json_cannot_store_is_refused_naming_its_key(tmp_path):
    trainer = pg(NumpyInfoEnv, tmp_path, env_config={"bad": {1, 2}})
    try:
        with pytest.raises(TypeError, match=r"row 0, key 'stats', key 'bad' holds .* \(type set\)"):
            trainer.workers.local_worker().sample()
    finally:
        trainer.stop()


@pytest.mark.parametrize(
    ("info", "match"),
    [
        ({"obj": object()}, r"row 1, key 'obj' holds .* \(type object\)"),
        ({"raw": b"\x00"}, r"row 1, key 'raw' holds b'\\x00' \(type bytes\)"),
        ({"deep": [1, {"c": 1j}]}, r"row 1, key 'deep'\[1\], key 'c' holds 1j \(type complex\)"),
        ({(1, 2): 3}, r"row 1 has the key \(1, 2\) \(tuple\)"),
    ],
)
def test_infos_json_cannot_store_raise_a_clear_error(info, match):
    batch = SampleBatch({"rewards": np.zeros(2, np.float32), "infos": [{}, info]})
    with pytest.raises(TypeError, match=match):
        batch_to_json(batch, ())


def test_infos_conversion_of_numpy_values_and_keys():
    rows = infos_to_json(np.array([{np.int64(3): np.float32(2.0), "m": np.eye(2)}], object))
    assert rows == [{3: 2.0, "m": [[1.0, 0.0], [0.0, 1.0]]}]
    # (JSON writes an int key as a string: read back, it is "3".)
    assert json.loads(json.dumps(rows)) == [{"3": 2.0, "m": [[1.0, 0.0], [0.0, 1.0]]}]


def test_json_writer_and_reader_round_trip_infos_with_compressed_columns(tmp_path):
    batch = SampleBatch(
        {
            "obs": np.arange(6, dtype=np.float32).reshape(3, 2),
            "rewards": np.ones(3, np.float32),
            "dones": np.array([False, False, True]),
            "infos": np.array([{"i": np.int64(i), "v": np.arange(i)} for i in range(3)]),
        }
    )
    writer = JsonWriter(str(tmp_path), compress_columns=["obs", "infos"])
    writer.write(batch)
    writer.close()
    back = next(JsonReader(str(tmp_path)).read_all_files())
    assert back["infos"] == [{"i": 0, "v": []}, {"i": 1, "v": [0]}, {"i": 2, "v": [0, 1]}]
    np.testing.assert_array_equal(back["obs"], batch["obs"])


def test_parquet_writes_infos_numpy_values_as_json_does(tmp_path):
    batch = SampleBatch(
        {
            "rewards": np.ones(2, np.float32),
            "infos": [{"x": np.float32(0.25), "a": np.arange(2)}, {"ok": np.bool_(False)}],
        }
    )
    writer = ParquetWriter(str(tmp_path), IOContext())
    writer.write(batch)
    writer.close()
    (back,) = ParquetReader(str(tmp_path)).read_all_files()
    assert back["infos"] == [{"x": 0.25, "a": [0, 1]}, {"ok": False}]
    with pytest.raises(TypeError, match=r"key 's' holds \{1\} \(type set\)"):
        ParquetWriter(str(tmp_path), IOContext()).write(
            SampleBatch({"rewards": np.ones(1, np.float32), "infos": [{"s": {1}}]})
        )
