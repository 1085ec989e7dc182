"""EnvPool's pools (`vectorize_mode="envpool"`): its NEXT_STEP autoreset maps to
corral's episodes exactly (checked against a raw loop over a pool of the same seed)."""

from __future__ import annotations

import os
import sys

import numpy as np
import pytest

from corral.agents.callbacks import DefaultCallbacks
from corral.env.envpool_env import (
    EnvPoolSplits,
    _on_idle_thread,
    import_envpool,
    make_envpool_env,
    make_envpool_splits,
)
from corral.env.native_vector_env import BatchedVectorEnv
from corral.policy.sample_batch import SampleBatch
from corral.utils.sys_usage import usable_cores

from .test_native_vector_env import (
    check_against_reference,
    check_boundaries,
    check_episode_rows_at_their_end,
    make_worker,
    rows_by_env,
)

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
@pytest.mark.parametrize("env_splits", [1, 4])
def test_complete_episodes_from_a_pool_are_whole(env_splits):
    trainer, worker = make_worker(
        vectorize_mode="envpool", env_splits=env_splits, batch_mode="complete_episodes"
    )
    try:
        batch = worker.sample()
        assert set(batch[SampleBatch.ENV_ID].tolist()) == {0, 1, 2, 3}
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
        check_frames_against_a_pool(batch, num_envs=2, steps=4)
    finally:
        trainer.stop()


def check_frames_against_a_pool(batch: SampleBatch, num_envs: int, steps: int) -> None:
    """Every row's observation and next observation are the frames of a pool of the
    worker's seed stepped with the batch's actions, channels moved last (no episode
    ends within `steps` Pong steps)."""
    ours = rows_by_env([batch], num_envs)
    pool = make_envpool_env("Pong-v5", num_envs, 3)
    frames, _ = pool.reset()
    for t in range(steps):
        for i in range(num_envs):
            np.testing.assert_array_equal(
                ours[i][SampleBatch.OBS][t], np.moveaxis(frames[i], 0, -1)
            )
        frames, *_ = pool.step(np.array([ours[i][SampleBatch.ACTIONS][t] for i in range(num_envs)]))
        for i in range(num_envs):
            np.testing.assert_array_equal(
                ours[i][SampleBatch.NEXT_OBS][t], np.moveaxis(frames[i], 0, -1)
            )
    pool.close()


# -- env_splits: groups of sub-envs stepping in turn (double-buffered sampling) -------


@needs_envpool
@pytest.mark.parametrize("max_steps", [None, 7])
def test_split_pools_give_the_batches_and_episodes_of_one_pool(max_steps):
    env_config = {} if max_steps is None else {"max_episode_steps": max_steps}
    trainer, worker = make_worker(vectorize_mode="envpool", env_splits=2, env_config=env_config)
    try:
        env = worker.async_env
        assert isinstance(env, EnvPoolSplits) and env.groups == [slice(0, 2), slice(2, 4)]
        assert worker.sampler.env_groups == env.groups
        pool = make_envpool_env("CartPole-v1", 4, 3, env_config)  # one pool, the worker's seed
        ours = check_against_reference(worker, pool, pool.reset, 3)
        for rows in ours:
            check_boundaries(rows)
    finally:
        trainer.stop()


@needs_envpool
def test_split_pools_report_each_step_to_the_callbacks_of_its_sub_env():
    class Steps(DefaultCallbacks):
        seen: list[tuple[int, int]] = []

        def on_episode_step(
            self, *, worker, base_env, policies=None, episode, env_index=None, **kw
        ):
            Steps.seen.append((env_index, episode.episode_id))

    trainer, worker = make_worker(vectorize_mode="envpool", env_splits=2, callbacks=Steps)
    try:
        batch = worker.sample()
        rows = sorted(zip(batch[SampleBatch.ENV_ID].tolist(), batch[SampleBatch.EPS_ID].tolist()))
        assert sorted(Steps.seen) == rows  # one call per transition, the right sub-env
    finally:
        trainer.stop()


@needs_envpool
def test_split_pools_share_the_cores_unless_told():
    split = make_envpool_splits("CartPole-v1", 4, 2, 0)
    try:
        # Threads that yield to the sampler (Linux's SCHED_IDLE) get every core; elsewhere
        # the pools split them. At most one per sub-env (2 per pool here).
        cores = usable_cores() if idle_class_granted() else usable_cores() // 2
        expected = max(1, min(2, cores))
        assert [p.config["num_threads"] for p in split.pools] == [expected, expected]
        assert [p.config["seed"] for p in split.pools] == [0, 2]
    finally:
        split.stop()
    split = make_envpool_splits("CartPole-v1", 4, 2, 0, {"num_threads": 2})
    try:
        assert [p.config["num_threads"] for p in split.pools] == [2, 2]
    finally:
        split.stop()


def idle_class_granted() -> bool:
    """Whether a thread of this process may put itself in SCHED_IDLE (asked as the split
    pools' maker asks)."""
    return _on_idle_thread(lambda idle_class: idle_class)


def thread_classes() -> dict[int, int]:
    """This process's threads and their scheduling classes (Linux)."""
    return {int(t): os.sched_getscheduler(int(t)) for t in os.listdir("/proc/self/task")}


@needs_envpool
@pytest.mark.skipif(
    not (os.path.isdir("/proc/self/task") and hasattr(os, "SCHED_IDLE") and idle_class_granted()),
    reason="needs Linux's per-thread scheduling classes, SCHED_IDLE granted (a container's "
    "seccomp policy may refuse it)",
)
def test_split_pools_threads_run_only_on_cores_the_sampler_leaves_idle():
    before = thread_classes()
    split = make_envpool_splits("CartPole-v1", 4, 2, 0)
    try:
        after = thread_classes()
        new = {tid: policy for tid, policy in after.items() if tid not in before}
        assert new, "the pools started no threads"
        assert set(new.values()) == {os.SCHED_IDLE}
        # The process's other threads (the sampler's among them) keep theirs.
        assert all(after[tid] == policy for tid, policy in before.items() if tid in after)
    finally:
        split.stop()
    # One pool (env_splits 1) is left in EnvPool's own class.
    before = thread_classes()
    pool = make_envpool_env("CartPole-v1", 2, 0)
    try:
        new = {tid: policy for tid, policy in thread_classes().items() if tid not in before}
        assert new and set(new.values()) == {os.SCHED_OTHER}
    finally:
        pool.close()


@needs_envpool
def test_split_pools_where_the_idle_class_is_refused_split_the_cores(monkeypatch):
    # E.g. a container whose seccomp policy refuses sched_setscheduler: the pools keep
    # their class and split the cores instead of each taking them all.
    def refuse(*args):
        raise PermissionError("refused")

    monkeypatch.setattr(os, "sched_setscheduler", refuse, raising=False)
    split = make_envpool_splits("CartPole-v1", 8, 2, 0)
    try:
        expected = max(1, min(4, usable_cores() // 2))
        assert [p.config["num_threads"] for p in split.pools] == [expected, expected]
    finally:
        split.stop()


def test_the_pools_maker_hands_its_error_to_the_caller():
    def fail(idle_class):
        raise ValueError("no such task")

    with pytest.raises(ValueError, match="no such task"):
        _on_idle_thread(fail)
    # The caller's own thread keeps its class.
    if hasattr(os, "sched_getscheduler"):
        assert os.sched_getscheduler(0) != getattr(os, "SCHED_IDLE", -1)


@needs_envpool
def test_split_atari_frames_are_channels_last_as_with_one_pool():
    trainer, worker = make_worker(
        vectorize_mode="envpool",
        env="Pong-v5",
        num_envs_per_worker=2,
        env_splits=2,
        rollout_fragment_length=4,
    )
    try:
        batch = worker.sample()
        assert batch[SampleBatch.OBS].shape[1:] == (84, 84, 4)
        check_frames_against_a_pool(batch, num_envs=2, steps=4)
    finally:
        trainer.stop()


@pytest.mark.parametrize(
    ("config", "match"),
    [
        (
            {"vectorize_mode": "native", "env_splits": 2},
            r"env_splits=2 needs vectorize_mode='envpool'",
        ),
        ({"env_splits": 2}, r"got vectorize_mode='sequential'"),
        (
            {"vectorize_mode": "envpool", "env_splits": 3},
            r"env_splits=3 must divide num_envs_per_worker=4",
        ),
    ],
)
def test_env_splits_that_cannot_work_are_refused_at_construction(config, match):
    with pytest.raises(ValueError, match=match):
        make_worker(**config)


def test_env_splits_must_be_a_positive_int():
    with pytest.raises(ValueError, match="env_splits"):
        make_worker(vectorize_mode="envpool", env_splits=0)


@needs_envpool
def test_split_pools_refuse_a_recurrent_policy_by_name():
    with pytest.raises(NotImplementedError, match="env_splits > 1 with a recurrent policy"):
        make_worker(vectorize_mode="envpool", env_splits=2, model={"use_lstm": True})


@needs_envpool
@pytest.mark.parametrize("env_splits", [1, 2])
def test_pool_episodes_read_their_rows_when_they_end(env_splits):
    check_episode_rows_at_their_end(vectorize_mode="envpool", env_splits=env_splits)


@needs_envpool
def test_ppo_learns_on_split_pools_in_a_remote_worker():
    from corral.agents.ppo import PPOTrainer

    trainer = PPOTrainer(
        config={
            "num_workers": 1,
            "vectorize_mode": "envpool",
            "num_envs_per_worker": 8,
            "env_splits": 2,
            "rollout_fragment_length": 64,
            "train_batch_size": 512,
            "sgd_minibatch_size": 256,
            "num_sgd_iter": 8,
            "lr": 2.5e-3,
            "model": {"fcnet_hiddens": [64, 64], "vf_share_layers": False},
            "seed": 0,
        },
        env="CartPole-v1",
    )
    try:
        best = 0.0
        for _ in range(40):
            best = max(best, trainer.train()["episode_reward_mean"])
            if best > 150:
                break
        assert best > 150, best
    finally:
        trainer.stop()


@needs_envpool
def test_split_pools_sample_what_one_pool_samples_when_acting_greedily():
    # Greedy actions do not depend on the order of the random draws: the fragments are
    # those of one pool (float columns to rounding: 2 and 4 rows per forward pass differ
    # in the last bits), here with a soft horizon cutting episodes in both groups.
    runs = {}
    for splits in (1, 2):
        trainer, worker = make_worker(
            vectorize_mode="envpool",
            env_splits=splits,
            explore=False,
            soft_horizon=True,
            horizon=10,
        )
        try:
            batches = [worker.sample() for _ in range(3)]
            metrics = [(m.episode_length, m.episode_reward) for m in worker.get_metrics()]
            runs[splits] = (batches, metrics)
        finally:
            trainer.stop()
    (one, one_metrics), (split, split_metrics) = runs[1], runs[2]
    assert split_metrics == one_metrics and len(one_metrics) > 10
    for a, b in zip(one, split):
        columns = set(a.keys())
        assert columns == set(b.keys())
        for k in columns:
            if k in (SampleBatch.EPS_ID, SampleBatch.UNROLL_ID):  # random / per-process ids
                continue
            if a[k].dtype.kind == "f":
                np.testing.assert_allclose(a[k], b[k], rtol=1e-5, atol=1e-6, err_msg=k)
            else:
                np.testing.assert_array_equal(a[k], b[k], k)
