"""EnvPool's pools (`vectorize_mode="envpool"`): its NEXT_STEP autoreset maps to
corral's episodes exactly (checked against a raw loop over a pool of the same seed)."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from corral.env.envpool_env import import_envpool, make_envpool_env
from corral.env.native_vector_env import BatchedVectorEnv
from corral.policy.sample_batch import SampleBatch

from .test_native_vector_env import check_against_reference, check_boundaries, make_worker

try:
    import envpool  # noqa: F401

    HAVE_ENVPOOL = True
except ImportError:
    HAVE_ENVPOOL = False

needs_envpool = pytest.mark.skipif(
    not HAVE_ENVPOOL, reason="envpool is not installed (pip install corral[envpool])"
)


def test_a_missing_envpool_says_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "envpool", None)  # makes `import envpool` fail
    with pytest.raises(ImportError, match=r"pip install corral\[envpool\]"):
        import_envpool()


@needs_envpool
@pytest.mark.parametrize("max_steps", [None, 7])
def test_batches_and_episodes_equal_a_raw_loop_over_the_same_pool(max_steps):
    env_config = {} if max_steps is None else {"max_episode_steps": max_steps}
    trainer, worker = make_worker(vectorize_mode="envpool", env_config=env_config)
    try:
        assert isinstance(worker.async_env, BatchedVectorEnv)
        pool = make_envpool_env("CartPole-v1", 4, 3, env_config)  # the worker's seed
        ours = check_against_reference(worker, pool, pool.reset, 3)
        truncated = sum(int(r[SampleBatch.TRUNCATEDS].sum()) for r in ours)
        assert (truncated > 0) == (max_steps is not None)
        for rows in ours:
            check_boundaries(rows)
    finally:
        trainer.stop()


@needs_envpool
def test_complete_episodes_from_a_pool_are_whole():
    trainer, worker = make_worker(vectorize_mode="envpool", batch_mode="complete_episodes")
    try:
        batch = worker.sample()
        for episode in batch.split_by_episode():
            assert episode[SampleBatch.T][0] == 0
            assert episode[SampleBatch.DONES][-1] and not episode[SampleBatch.DONES][:-1].any()
    finally:
        trainer.stop()


@needs_envpool
def test_an_unknown_task_id_names_close_ones():
    with pytest.raises(ValueError, match=r"not an EnvPool task id.*'CartPole-v1'"):
        make_worker(vectorize_mode="envpool", env="CartPole-v2")


@needs_envpool
def test_an_asynchronous_pool_is_refused():
    with pytest.raises(ValueError, match="batch_size=2"):
        make_envpool_env("CartPole-v1", 4, 0, {"batch_size": 2})


@needs_envpool
def test_the_pool_is_seeded_by_the_worker_seed():
    first = []
    for _ in range(2):
        trainer, worker = make_worker(vectorize_mode="envpool")
        try:
            first.append(worker.sample()[SampleBatch.OBS][0])
        finally:
            trainer.stop()
    np.testing.assert_array_equal(first[0], first[1])


@needs_envpool
def test_atari_frames_are_handed_on_channels_last():
    trainer, worker = make_worker(
        vectorize_mode="envpool", env="Pong-v5", num_envs_per_worker=2, rollout_fragment_length=4
    )
    try:
        assert worker.env.observation_space.shape == (84, 84, 4)
        batch = worker.sample()
        assert batch[SampleBatch.OBS].shape[1:] == (84, 84, 4)
        pool = make_envpool_env("Pong-v5", 2, 3)
        first, _ = pool.reset()
        np.testing.assert_array_equal(batch[SampleBatch.OBS][0], np.moveaxis(first[0], 0, -1))
    finally:
        trainer.stop()
