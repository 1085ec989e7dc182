"""`input` / `output` in trainers and rollout workers (RLlib 1.13's wiring)."""

from __future__ import annotations

import glob
import os

import gymnasium as gym
import numpy as np
import pytest

from corral.agents.pg import PGTrainer
from corral.agents.ppo import PPOTrainer
from corral.offline import InputReader, IOContext, JsonReader, OutputWriter
from corral.policy.sample_batch import SampleBatch
from corral.tune.registry import register_input

PPO_SMALL = {
    "num_workers": 0,
    "rollout_fragment_length": 100,
    "train_batch_size": 200,
    "sgd_minibatch_size": 100,
    "num_sgd_iter": 1,
    "seed": 0,
}


def test_ppo_writes_cartpole_and_a_reader_reads_the_same_rows(tmp_path):
    sampled: list[SampleBatch] = []

    class Keep(OutputWriter):
        def __init__(self, ioctx: IOContext) -> None:
            from corral.offline import JsonWriter

            self.inner = JsonWriter(str(tmp_path), ioctx)

        def write(self, sample_batch) -> None:
            sampled.append(sample_batch.copy())
            self.inner.write(sample_batch)

        def close(self) -> None:
            self.inner.close()

    trainer = PPOTrainer(config={**PPO_SMALL, "output": Keep}, env="CartPole-v1")
    trainer.train()
    trainer.train()
    trainer.stop()
    assert sum(b.count for b in sampled) == 400
    files = glob.glob(str(tmp_path / "output-*_worker-0_0.json"))
    assert len(files) == 1
    read = list(JsonReader(files).read_all_files())
    assert len(read) == len(sampled)
    for want, got in zip(sampled, read, strict=True):
        assert set(got) == set(want)
        for k in want:
            assert got[k].dtype == want[k].dtype, k
            np.testing.assert_array_equal(got[k], want[k], err_msg=k)


def test_output_logdir_and_folder_and_rollover(tmp_path):
    trainer = PPOTrainer(config={**PPO_SMALL, "output": "logdir"}, env="CartPole-v1")
    trainer.train()
    trainer.stop()
    assert len(glob.glob(os.path.join(trainer.logdir, "output-*_worker-0_*.json"))) == 1
    out = tmp_path / "data"
    trainer = PPOTrainer(
        config={**PPO_SMALL, "output": str(out), "output_max_file_size": 50_000},
        env="CartPole-v1",
    )
    for _ in range(3):  # 6 lines of about 22 kB: two a file
        trainer.train()
    trainer.stop()
    files = glob.glob(str(out / "*.json"))
    assert len(files) == 3 and all(os.path.getsize(f) <= 50_000 for f in files)


def test_remote_workers_write_a_file_each(tmp_path):
    config = {**PPO_SMALL, "num_workers": 2, "output": str(tmp_path)}
    trainer = PPOTrainer(config=config, env="CartPole-v1")
    trainer.train()
    trainer.stop()
    files = glob.glob(str(tmp_path / "output-*.json"))
    names = sorted(os.path.basename(f).split("_worker-")[1] for f in files)
    assert names == ["1_0.json", "2_0.json"]


def _write_cartpole(path) -> None:
    trainer = PGTrainer(
        config={
            "num_workers": 0,
            "rollout_fragment_length": 50,
            "train_batch_size": 100,
            "output": str(path),
            "seed": 1,
        },
        env="CartPole-v1",
    )
    trainer.train()
    trainer.stop()


def _spaces() -> dict:
    env = gym.make("CartPole-v1")
    return {"observation_space": env.observation_space, "action_space": env.action_space}


def test_training_from_files_needs_no_env(tmp_path):
    _write_cartpole(tmp_path)
    config = {
        "num_workers": 0,
        "input": str(tmp_path),
        "rollout_fragment_length": 50,
        "train_batch_size": 100,
        "input_evaluation": [],
        **_spaces(),
    }
    trainer = PGTrainer(config=config)
    worker = trainer.workers.local_worker()
    assert worker.env is None and isinstance(worker.input_reader, InputReader)
    result = trainer.train()
    assert result["timesteps_total"] == 100
    assert "learner_stats" in result["info"]["learner"]["default_policy"]


def test_without_env_or_spaces_the_error_says_what_to_set(tmp_path):
    _write_cartpole(tmp_path)
    with pytest.raises(ValueError, match="observation_space"):
        PGTrainer(config={"num_workers": 0, "input": str(tmp_path), "input_evaluation": []})


def test_offline_trainer_evaluates_on_workers_with_an_env(tmp_path):
    _write_cartpole(tmp_path)
    config = {
        "num_workers": 0,
        "input": str(tmp_path),
        "input_evaluation": [],
        "rollout_fragment_length": 50,
        "train_batch_size": 100,
        "evaluation_interval": 1,
        "evaluation_num_workers": 1,
        "evaluation_duration": 2,
        "evaluation_config": {"input": "sampler", "env": "CartPole-v1"},
        **_spaces(),
    }
    trainer = PGTrainer(config=config)
    result = trainer.train()
    trainer.stop()
    assert result["evaluation"]["episodes_this_iter"] >= 2


class _Constant(InputReader):
    def __init__(self, ioctx: IOContext) -> None:
        self.ioctx = ioctx
        rng = np.random.default_rng(0)
        self.batch = SampleBatch(
            {
                "obs": rng.standard_normal((10, 4)).astype(np.float32),
                "new_obs": rng.standard_normal((10, 4)).astype(np.float32),
                "actions": rng.integers(0, 2, 10),
                "rewards": np.ones(10, dtype=np.float32),
                "terminateds": np.arange(10) == 9,
                "truncateds": np.zeros(10, dtype=bool),
                "dones": np.arange(10) == 9,
                "eps_id": np.zeros(10, dtype=np.int64),
                "t": np.arange(10),
            }
        )

    def next(self) -> SampleBatch:
        return self.batch.copy()


@pytest.mark.parametrize("how", ["callable", "registered"])
def test_input_callable_or_registered_name(how):
    if how == "registered":
        register_input("corral_test_constant", _Constant)
    source = _Constant if how == "callable" else "corral_test_constant"
    config = {
        "num_workers": 0,
        "input": source,
        "input_config": {"k": 1},
        "rollout_fragment_length": 25,
        "input_evaluation": [],
        **_spaces(),
    }
    trainer = PGTrainer(config=config)
    worker = trainer.workers.local_worker()
    assert isinstance(worker.input_reader, _Constant)
    assert worker.input_reader.ioctx.input_config == {"k": 1}
    # Batches are pulled until rollout_fragment_length (RLlib 1.13: one per env in
    # truncate_episodes mode, so a single 10-step batch here).
    assert worker.sample().count == 10
    trainer.config["batch_mode"] = "complete_episodes"
    worker.config["batch_mode"] = "complete_episodes"
    assert worker.sample().count == 30


def test_input_class_path_says_what_to_pass_instead(tmp_path, monkeypatch):
    """RLlib 1.13 imported an `input` given as a class path; corral imports nothing a
    config names and says so (not "no files found")."""
    monkeypatch.chdir(tmp_path)
    config = {"num_workers": 0, "input_evaluation": [], **_spaces()}
    with pytest.raises(ValueError, match="class path") as err:
        PGTrainer(config={**config, "input": "my_package.readers.CustomJsonReader"})
    msg = str(err.value)
    assert "'my_package.readers.CustomJsonReader'" in msg and "input=" in msg
    assert "does not import" in msg and "register_input" in msg and "class itself" in msg
    # A missing file with a file suffix is still reported as missing files.
    with pytest.raises(ValueError, match="No files found"):
        PGTrainer(config={**config, "input": "data.json"})
    # A folder whose name is a dotted word is read as a folder.
    _write_cartpole(tmp_path / "runs.v1")
    trainer = PGTrainer(config={**config, "input": "runs.v1"})
    assert trainer.workers.local_worker().sample().count > 0
    trainer.stop()


def test_output_config_takes_writer_keys_and_store_infos(tmp_path):
    """`output_config` is the writer's own dict (RLlib 1.13 allowed any key in it);
    `store_infos` must be a bool; True writes an `infos` column (test_store_infos_io.py)."""
    config = {**PPO_SMALL, "output": str(tmp_path), "train_batch_size": 100}
    trainer = PPOTrainer(
        config={**config, "output_config": {"format": "parquet", "my_writer_key": 1}},
        env="CartPole-v1",
    )
    assert trainer.config["output_config"] == {"format": "parquet", "my_writer_key": 1}
    trainer.stop()
    with pytest.raises(TypeError, match="store_infos"):
        PPOTrainer(config={**config, "output_config": {"store_infos": "yes"}}, env="CartPole-v1")
    PPOTrainer(config={**config, "output_config": {"store_infos": True}}, env="CartPole-v1").stop()
    PPOTrainer(config={**config, "output_config": {"store_infos": False}}, env="CartPole-v1").stop()


def test_mixed_input_with_the_sampler(tmp_path):
    _write_cartpole(tmp_path)
    config = {
        **PPO_SMALL,
        "input": {"sampler": 0.5, str(tmp_path / "*.json"): 0.5},
        "input_evaluation": [],
        "rollout_fragment_length": 50,
    }
    trainer = PPOTrainer(config=config, env="CartPole-v1")
    worker = trainer.workers.local_worker()
    for _ in range(6):
        assert worker.sample().count == 50
    trainer.train()


def test_postprocess_inputs_runs_the_current_policy(tmp_path):
    _write_cartpole(tmp_path)
    config = {
        "num_workers": 0,
        "input": str(tmp_path),
        "postprocess_inputs": True,
        "input_evaluation": [],
        "rollout_fragment_length": 50,
        "gamma": 0.5,
        **_spaces(),
    }
    worker = PGTrainer(config=config).workers.local_worker()
    batch = worker.sample()
    # PG's postprocessing: discounted returns with the new gamma, per episode.
    first = batch.split_by_episode()[0]
    rewards = first["rewards"]
    expected = np.zeros_like(rewards)
    acc = 0.0
    for i in reversed(range(len(rewards))):
        acc = rewards[i] + 0.5 * acc
        expected[i] = acc
    if not first["dones"][-1]:
        pytest.skip("first fragment is cut; bootstrap depends on the value head")
    np.testing.assert_allclose(first["advantages"], expected, rtol=1e-5)


def test_normalized_actions_in_input(tmp_path):
    from corral.offline import JsonWriter

    box = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)
    batch = SampleBatch(
        {
            "obs": np.zeros((3, 3), np.float32),
            "actions": np.array([[-2.0], [0.0], [2.0]], np.float32),
        }
    )
    writer = JsonWriter(str(tmp_path))
    writer.write(batch)
    writer.close()

    class Pol:
        action_space = box

    class Worker:
        policy_map = {"default_policy": Pol()}
        num_workers = 0

    def read(**config):
        return JsonReader(str(tmp_path), IOContext(config=config, worker=Worker())).next()

    np.testing.assert_allclose(read(normalize_actions=True)["actions"].ravel(), [-1, 0, 1])
    np.testing.assert_allclose(
        read(normalize_actions=True, actions_in_input_normalized=True)["actions"].ravel(),
        [-2, 0, 2],
    )
    np.testing.assert_allclose(read(normalize_actions=False)["actions"].ravel(), [-2, 0, 2])


def test_evaluation_workers_reading_files_say_what_to_set(tmp_path):
    _write_cartpole(tmp_path)
    config = {
        "num_workers": 0,
        "input": str(tmp_path),
        "input_evaluation": [],
        "evaluation_interval": 1,
        "evaluation_duration": 1,
    }
    trainer = PGTrainer(config=config, env="CartPole-v1")
    with pytest.raises(ValueError, match=r"evaluation_config=\{'input': 'sampler'\}"):
        trainer.train()


def test_multi_agent_output_is_read_back_per_policy(tmp_path):
    from corral.env.multi_agent_env import make_multi_agent
    from corral.policy.policy import PolicySpec
    from corral.policy.sample_batch import MultiAgentBatch

    env_cls = make_multi_agent("CartPole-v1")
    config = {
        **PPO_SMALL,
        "env_config": {"num_agents": 2},
        "output": str(tmp_path),
        "multiagent": {
            "policies": {"p0": PolicySpec(), "p1": PolicySpec()},
            "policy_mapping_fn": lambda agent_id, *args, **kwargs: f"p{agent_id}",
        },
    }
    trainer = PPOTrainer(config=config, env=env_cls)
    sampled = trainer.workers.local_worker().sample()
    trainer.stop()
    (back,) = JsonReader(str(tmp_path)).read_all_files()
    assert isinstance(back, MultiAgentBatch) and back.count == sampled.count
    assert set(back.policy_batches) == {"p0", "p1"}
    for pid, batch in sampled.policy_batches.items():
        np.testing.assert_array_equal(back.policy_batches[pid]["obs"], batch["obs"])
        np.testing.assert_array_equal(back.policy_batches[pid]["actions"], batch["actions"])
