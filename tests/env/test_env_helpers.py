"""Environment helpers of issue #6: remote sub-envs, rendering, video recording,
and LZ4-compressed observations."""

from __future__ import annotations

import os
import time

import gymnasium as gym
import numpy as np
import pytest

from corral.agents.callbacks import DefaultCallbacks
from corral.agents.dqn import DQNTrainer
from corral.agents.ppo import PPOTrainer
from corral.env.env_context import EnvContext
from corral.env.remote_vector_env import RemoteSubEnv, RemoteVectorEnv
from corral.env.utils import make_env_creator
from corral.policy.sample_batch import SampleBatch
from corral.utils.compression import (
    is_compressed,
    pack,
    pack_column,
    unpack,
    unpack_column,
)
from corral.utils.error import EnvError
from corral.utils.replay_buffers.replay_buffer import ReplayBuffer

SMALL = {
    "num_workers": 0,
    "rollout_fragment_length": 10,
    "train_batch_size": 40,
    "sgd_minibatch_size": 20,
    "num_sgd_iter": 1,
    "model": {"fcnet_hiddens": [8]},
}


class SlowEnv(gym.Env):
    """Sleeps in `step`; reports its process and context; can crash on demand."""

    observation_space = gym.spaces.Box(-1, 1, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, ctx: EnvContext) -> None:
        self.ctx = ctx
        self.delay = float(ctx.get("delay", 0.0))
        self.crash_index = ctx.get("crash_index")
        self.t = 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action):
        self.t += 1
        if self.delay:
            time.sleep(self.delay)
        if self.crash_index == self.ctx.vector_index and self.t == 3:
            os._exit(3)
        return np.full(2, 0.1, np.float32), 1.0, self.t >= 5, False, {}

    def pid(self) -> int:
        return os.getpid()

    def context(self) -> tuple[int, bool]:
        return self.ctx.vector_index, self.ctx.remote


# -- remote_worker_envs -------------------------------------------------------


def test_remote_envs_run_in_their_own_processes_and_step_in_parallel():
    seen = {}

    class Spy(DefaultCallbacks):
        def on_episode_start(self, *, base_env, **kwargs):
            envs = base_env.get_sub_environments()
            seen["spaces"] = (envs[0].observation_space, envs[0].action_space)
            seen["pids"] = [e.call("pid") for e in envs]
            seen["contexts"] = [e.call("context") for e in envs]

    trainer = PPOTrainer(
        {
            **SMALL,
            "num_envs_per_worker": 4,
            "remote_worker_envs": True,
            "env_config": {"delay": 0.05},
            "callbacks": Spy,
        },
        env=SlowEnv,
    )
    worker = trainer.workers.local_worker()
    vector = worker.async_env
    assert isinstance(vector, RemoteVectorEnv)
    assert seen["spaces"] == (SlowEnv.observation_space, SlowEnv.action_space)
    assert len(set(seen["pids"])) == 4 and os.getpid() not in seen["pids"]
    assert seen["contexts"] == [(i, True) for i in range(4)]
    start = time.perf_counter()
    batch = worker.sample()
    elapsed = time.perf_counter() - start
    assert batch.count == 40
    # 10 steps x 4 envs x 50 ms is 2 s one after the other; in parallel about 0.5 s.
    assert elapsed < 1.5, elapsed
    trainer.stop()
    assert not any(env.is_alive() for env in vector.envs)


def test_a_negative_remote_env_batch_wait_is_refused_at_construction():
    config = {**SMALL, "num_envs_per_worker": 2, "remote_worker_envs": True}
    with pytest.raises(ValueError, match=r"remote_env_batch_wait_ms.*>= 0"):
        PPOTrainer({**config, "remote_env_batch_wait_ms": -10}, env=SlowEnv)


def test_remote_envs_work_inside_remote_workers():
    trainer = PPOTrainer(
        {**SMALL, "num_workers": 1, "num_envs_per_worker": 2, "remote_worker_envs": True},
        env=SlowEnv,
    )
    try:
        result = trainer.train()
        assert result["timesteps_total"] >= 40
        pids = (
            trainer.workers.remote_workers()[0]
            .apply(lambda w: [e.call("pid") for e in w.async_env.get_sub_environments()])
            .result()
        )
        assert len(set(pids)) == 2
    finally:
        trainer.stop()


class TaskEnv(SlowEnv):
    """A task-settable env (RLlib 1.13's curriculum examples)."""

    task = 0

    def set_task(self, task: int) -> None:
        self.task = task

    def get_task(self) -> int:
        return self.task


def test_remote_sub_envs_answer_their_own_methods_as_rllib_s_actors_did():
    # RLlib 1.13's remote sub-envs were Ray actors: `env.set_task.remote(phase)`.
    # The method sits on the env inside Gymnasium's TimeLimit wrapper here.
    from corral.tune.registry import register_env

    register_env("timed_task_env", lambda ctx: gym.wrappers.TimeLimit(TaskEnv(ctx), 20))
    trainer = PPOTrainer(
        {
            **SMALL,
            "num_envs_per_worker": 2,
            "remote_worker_envs": True,
            "env_config": {"delay": 0.0},
        },
        env="timed_task_env",
    )
    try:
        trainer.workers.foreach_env(lambda env: env.set_task.remote(3))
        assert trainer.workers.foreach_env(lambda env: env.get_task()) == [[3, 3]]
        env = trainer.workers.local_worker().async_env.get_sub_environments()[0]
        with pytest.raises(AttributeError, match="no attribute 'not_a_method'"):
            env.not_a_method  # noqa: B018
    finally:
        trainer.stop()


def test_a_crashed_remote_env_raises_an_error_naming_it():
    trainer = PPOTrainer(
        {
            **SMALL,
            "num_envs_per_worker": 2,
            "remote_worker_envs": True,
            "env_config": {"crash_index": 1},
        },
        env=SlowEnv,
    )
    try:
        with pytest.raises(EnvError, match="Remote sub-env 1 of worker 0 .* died"):
            trainer.workers.local_worker().sample()
    finally:
        trainer.stop()


def test_remote_envs_need_more_than_one_sub_env():
    with pytest.raises(ValueError, match="num_envs_per_worker > 1"):
        PPOTrainer({**SMALL, "remote_worker_envs": True}, env=SlowEnv)


def test_remote_env_errors_come_back_with_the_sub_env_traceback():
    vector = RemoteVectorEnv(lambda i: gym.make("CartPole-v1"), 2)
    try:
        assert isinstance(vector.envs[0], RemoteSubEnv)
        obs, _ = vector.envs[0].reset(seed=0)
        assert obs.shape == (4,)
        with pytest.raises(EnvError, match="Remote sub-env 0 of worker 0"):
            vector.envs[0].call("no_such_method")
        vector.envs[1].reset(seed=1)
        results = vector.step_all([0, 1])
        assert [len(r) for r in results] == [5, 5]
    finally:
        vector.stop()


# -- render_env ---------------------------------------------------------------


class CountingRenderEnv(SlowEnv):
    """Counts `render()` calls (a custom env with a render mode of its own)."""

    render_mode = "rgb_array"

    def __init__(self, ctx: EnvContext) -> None:
        super().__init__(ctx)
        self.renders = 0

    def render(self):
        self.renders += 1
        return np.zeros((16, 16, 3), np.uint8)


class NoRenderEnv(SlowEnv):
    pass


def test_render_env_renders_the_first_sub_env_every_step():
    trainer = PPOTrainer(
        {**SMALL, "num_envs_per_worker": 2, "render_env": True}, env=CountingRenderEnv
    )
    worker = trainer.workers.local_worker()
    before = [env.renders for env in worker.async_env.get_sub_environments()]
    worker.sample()
    after = [env.renders for env in worker.async_env.get_sub_environments()]
    assert after[0] - before[0] == 10 and after[1] == before[1] == 0
    assert worker.sampler.timers.as_dict()["mean_env_render_ms"] >= 0.0
    trainer.stop()


def test_render_env_skips_an_env_that_cannot_render():
    trainer = PPOTrainer({**SMALL, "render_env": True}, env=NoRenderEnv)
    worker = trainer.workers.local_worker()
    assert worker.sampler.render_env is False
    assert worker.sample().count == 10
    trainer.stop()


class _NoConfigEnv(gym.Env):
    """A Gymnasium-style env class whose constructor takes no argument."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def reset(self, *, seed=None, options=None):
        return np.zeros(2, np.float32), {}

    def step(self, action):
        return np.zeros(2, np.float32), 1.0, True, False, {}


class _ConfigEnv(_NoConfigEnv):
    def __init__(self, config):
        self.config = config


def test_an_env_class_is_built_with_its_config_or_without_when_it_takes_none():
    built = make_env_creator(_ConfigEnv)(EnvContext({"a": 1}, worker_index=0))
    assert built.config == {"a": 1}  # RLlib's call: EnvClass(env_config)
    assert isinstance(make_env_creator(_NoConfigEnv)(EnvContext({}, worker_index=0)), _NoConfigEnv)
    with pytest.raises(EnvError, match=r"_NoConfigEnv takes no env config .* \{'a': 1\}"):
        make_env_creator(_NoConfigEnv)(EnvContext({"a": 1}, worker_index=0))
    trainer = PPOTrainer(
        env=_NoConfigEnv,
        config={"num_workers": 0, "train_batch_size": 32, "sgd_minibatch_size": 16},
    )
    assert trainer.train()["episodes_this_iter"] > 0


def test_gymnasium_ids_get_a_render_mode_when_shown():
    creator = make_env_creator("CartPole-v1")
    plain = creator(EnvContext())
    assert plain.render_mode is None
    ctx = EnvContext()
    ctx._render_mode = "rgb_array"
    assert creator(ctx).render_mode == "rgb_array"
    ctx._render_mode = "human"
    assert creator(ctx).render_mode == "human"  # CartPole supports a window


# -- record_env -----------------------------------------------------------------


def _video_files(folder: str) -> list[str]:
    if not os.path.isdir(folder):
        return []
    return [f for f in os.listdir(folder) if f.endswith(".mp4")]


@pytest.mark.parametrize("record_env", [True, "clips", "absolute"])
def test_record_env_writes_videos(record_env, tmp_path):
    pytest.importorskip("moviepy", reason="record_env needs moviepy (the `video` extra)")
    if record_env == "absolute":
        record_env = str(tmp_path / "abs_videos")
    trainer = PPOTrainer({**SMALL, "record_env": record_env}, env=CountingRenderEnv)
    trainer.workers.local_worker().sample()  # two 5-step episodes
    trainer.stop()
    if record_env is True:
        folder = os.path.join(trainer.logdir, "videos")
    elif os.path.isabs(record_env):
        folder = record_env
    else:
        folder = os.path.join(trainer.logdir, record_env)
    assert _video_files(folder), os.listdir(os.path.dirname(folder))


def test_record_env_without_moviepy_names_the_extra(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_moviepy(name, *args, **kwargs):
        if name == "moviepy" or name.startswith("moviepy."):
            raise ImportError("No module named 'moviepy'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_moviepy)
    with pytest.raises(ImportError, match=r"corral\[video\]"):
        PPOTrainer({**SMALL, "record_env": True}, env=CountingRenderEnv)


# -- compress_observations ------------------------------------------------------


@pytest.mark.parametrize(
    "array",
    [
        np.arange(12, dtype=np.float32).reshape(3, 4),
        np.zeros((84, 84, 4), np.uint8),
        np.array(3.5),
        np.arange(5, dtype=np.int64),
    ],
)
def test_pack_unpack_round_trip(array):
    packed = pack(array)
    assert is_compressed(packed)
    out = unpack(packed)
    assert out.dtype == array.dtype and out.shape == array.shape
    np.testing.assert_array_equal(out, array)
    out.flat[0] = 1  # a writable copy


def test_pack_column_round_trip_and_detection():
    column = np.random.default_rng(0).normal(size=(6, 3)).astype(np.float32)
    packed = pack_column(column)
    assert packed.dtype == object and len(packed) == 6 and is_compressed(packed)
    assert pack_column(packed) is packed
    np.testing.assert_array_equal(unpack_column(packed), column)
    assert not is_compressed(column) and unpack_column(column) is column
    assert not is_compressed(b"plain bytes")
    with pytest.raises(ValueError, match="pack"):
        unpack(b"plain bytes")


def _image_batch(n: int, rng: np.random.Generator) -> SampleBatch:
    # Atari-like frames: a flat background with a few small sprites.
    obs = np.zeros((n + 1, 42, 42, 4), np.uint8)
    for i in range(n + 1):
        y, x = rng.integers(0, 36, size=2)
        obs[i, y : y + 6, x : x + 6] = 200
    return SampleBatch(
        {
            "obs": obs[:-1],
            "new_obs": obs[1:],
            "actions": rng.integers(0, 4, n),
            "rewards": rng.normal(size=n).astype(np.float32),
            "terminateds": np.zeros(n, bool),
        }
    )


def _storage_bytes(buffer: ReplayBuffer) -> int:
    total = 0
    for column in buffer._columns.values():
        if column.dtype == object:
            total += sum(len(row) for row in column if isinstance(row, bytes))
        else:
            total += column.nbytes
    return total


def test_compressed_replay_buffer_is_smaller_and_samples_plain_rows():
    rng = np.random.default_rng(0)
    batch = _image_batch(200, rng)
    plain, packed = ReplayBuffer(200, seed=0), ReplayBuffer(200, seed=0)
    plain.add_timesteps(batch)
    compressed = batch.copy()
    for key in ("obs", "new_obs"):
        compressed[key] = pack_column(compressed[key])
    packed.add_timesteps(compressed)
    assert _storage_bytes(packed) * 5 < _storage_bytes(plain)
    a, b = plain.sample(32), packed.sample(32)
    for key in a:
        assert a[key].dtype == b[key].dtype and a[key].shape == b[key].shape
        np.testing.assert_array_equal(a[key], b[key])
    # Checkpoints hold plain arrays; a restored buffer keeps compressing.
    state = packed.get_state()
    assert state["columns"]["obs"].dtype == np.uint8
    restored = ReplayBuffer(200, seed=0)
    restored.set_state(state)
    assert restored._columns["obs"].dtype == object
    np.testing.assert_array_equal(restored.sample(4)["obs"].shape, (4, 42, 42, 4))


def test_dqn_with_compressed_observations_trains_on_cartpole():
    config = {
        "num_workers": 0,
        "rollout_fragment_length": 8,
        "train_batch_size": 16,
        "learning_starts": 16,
        "model": {"fcnet_hiddens": [16]},
        "compress_observations": True,
    }
    trainer = DQNTrainer(config, env="CartPole-v1")
    batch = trainer.workers.local_worker().sample()
    assert is_compressed(batch["obs"]) and is_compressed(batch["new_obs"])
    for _ in range(3):
        result = trainer.train()
    assert result["timesteps_total"] >= 24
    sampled = trainer.local_replay_buffer.sample(16)
    policy_batch = sampled.policy_batches["default_policy"]
    assert policy_batch["obs"].shape == (16, 4) and policy_batch["obs"].dtype == np.float32
    assert policy_batch["new_obs"].shape == (16, 4)
    trainer.stop()


def test_ppo_learner_unpacks_compressed_batches():
    trainer = PPOTrainer({**SMALL, "compress_observations": True}, env="CartPole-v1")
    result = trainer.train()
    assert result["info"]["learner"]["default_policy"]["learner_stats"]
    trainer.stop()
