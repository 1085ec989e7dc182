"""Gymnasium's native vector envs (`vectorize_mode="native"`): one call steps all
sub-envs, and NEXT_STEP autoresets map to corral's episodes with none lost or merged.

The reference is a raw loop over the same kind of vector env with the same seed,
fed each sub-env's actions as corral recorded them: its transitions and finished
episodes must be corral's, row for row.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from corral.agents.callbacks import DefaultCallbacks
from corral.agents.pg import PGTrainer
from corral.env.native_vector_env import BatchedVectorEnv, InfoRows
from corral.policy.sample_batch import SampleBatch
from corral.tune.registry import register_env

COLUMNS = (
    SampleBatch.OBS,
    SampleBatch.ACTIONS,
    SampleBatch.REWARDS,
    SampleBatch.NEXT_OBS,
    SampleBatch.TERMINATEDS,
    SampleBatch.TRUNCATEDS,
)


def make_worker(**config: Any) -> tuple[PGTrainer, Any]:
    """A PG trainer's local worker (PG leaves the sampled columns as they are)."""
    trainer = PGTrainer(
        config={
            "env": "CartPole-v1",
            "num_workers": 0,
            "num_envs_per_worker": 4,
            "rollout_fragment_length": 40,
            "seed": 3,
            **config,
        }
    )
    return trainer, trainer.workers.local_worker()


def native_cartpole(num_envs: int) -> gym.vector.VectorEnv:
    return gym.make_vec("CartPole-v1", num_envs=num_envs, vectorization_mode="vector_entry_point")


def rows_by_env(batches: list[SampleBatch], num_envs: int) -> list[dict[str, np.ndarray]]:
    """Each sub-env's rows over all `batches`, in order."""
    out = []
    for i in range(num_envs):
        out.append(
            {
                k: np.concatenate([b[k][b[SampleBatch.ENV_ID] == i] for b in batches])
                for k in (*COLUMNS, SampleBatch.EPS_ID, SampleBatch.T)
            }
        )
    return out


def reference_loop(
    vector: Any, reset: Callable[[], Any], actions: list[np.ndarray], vector_steps: int
) -> tuple[list[dict[str, np.ndarray]], list[tuple[int, float]]]:
    """Steps a NEXT_STEP vector env `vector_steps` times, sub-env `i` taking the
    actions `actions[i]` in order (none in its autoreset steps, whose action is
    ignored); returns each sub-env's transitions and the finished episodes'
    (length, return) in the order they ended."""
    n = vector.num_envs
    obs, _ = reset()
    pos = [0] * n
    autoreset = np.zeros(n, np.bool_)
    rows: list[dict[str, list]] = [{k: [] for k in COLUMNS} for _ in range(n)]
    finished: list[tuple[int, float]] = []
    length, ret = [0] * n, [0.0] * n
    for _ in range(vector_steps):
        act = np.array([actions[i][pos[i]] if not autoreset[i] else 0 for i in range(n)])
        next_obs, rew, term, trunc, _ = vector.step(act)
        for i in range(n):
            if autoreset[i]:
                assert rew[i] == 0 and not term[i] and not trunc[i]
                continue
            for k, v in zip(COLUMNS, (obs[i], act[i], rew[i], next_obs[i], term[i], trunc[i])):
                rows[i][k].append(np.copy(v))
            pos[i] += 1
            length[i] += 1
            ret[i] += float(rew[i])
            if term[i] or trunc[i]:
                finished.append((length[i], ret[i]))
                length[i], ret[i] = 0, 0.0
        autoreset = np.logical_or(term, trunc)
        obs = np.copy(next_obs)
    assert pos == [len(a) for a in actions], "corral and the raw loop did not step alike"
    return [{k: np.array(v) for k, v in r.items()} for r in rows], finished


def check_against_reference(
    worker: Any, vector: Any, reset: Callable[[], Any], fragments: int
) -> list[dict[str, np.ndarray]]:
    """Samples `fragments` fragments and checks them (and the episode metrics)
    against `reference_loop`; returns corral's rows by sub-env."""
    n = worker.async_env.num_envs
    T = worker.sampler.fragment_length  # vector steps per fragment
    batches = [worker.sample() for _ in range(fragments)]
    ours = rows_by_env(batches, n)
    theirs, finished = reference_loop(
        vector, reset, [r[SampleBatch.ACTIONS] for r in ours], fragments * T
    )
    for i in range(n):
        for k in COLUMNS:
            np.testing.assert_array_equal(ours[i][k], theirs[i][k].astype(ours[i][k].dtype), k)
    metrics = [(m.episode_length, m.episode_reward) for m in worker.get_metrics()]
    assert metrics == finished
    assert finished, "no episode ended: the test checks no boundary"
    return ours


def check_boundaries(rows: dict[str, np.ndarray]) -> None:
    """Within one sub-env's rows: an episode continues where its last row left off;
    after an end, a new episode starts at t=0."""
    done = rows[SampleBatch.TERMINATEDS] | rows[SampleBatch.TRUNCATEDS]
    eps, t = rows[SampleBatch.EPS_ID], rows[SampleBatch.T]
    for j in range(len(done) - 1):
        if done[j]:
            assert eps[j + 1] != eps[j] and t[j + 1] == 0
        else:
            assert eps[j + 1] == eps[j] and t[j + 1] == t[j] + 1
            np.testing.assert_array_equal(
                rows[SampleBatch.OBS][j + 1], rows[SampleBatch.NEXT_OBS][j]
            )


@pytest.mark.parametrize("max_steps", [None, 9])
def test_batches_and_episodes_equal_a_raw_loop_over_the_same_vector_env(max_steps):
    env_config = {} if max_steps is None else {"max_episode_steps": max_steps}
    trainer, worker = make_worker(vectorize_mode="native", env_config=env_config)
    try:
        assert isinstance(worker.async_env, BatchedVectorEnv)
        vector = gym.make_vec(
            "CartPole-v1", num_envs=4, vectorization_mode="vector_entry_point", **env_config
        )
        ours = check_against_reference(worker, vector, lambda: vector.reset(seed=3), 3)
        # No exact resumes of a batched vector env's episodes: no action log either.
        assert worker.sampler.replay_log.log == [] and worker.sampler.get_resume_state() is None
        truncated = sum(int(r[SampleBatch.TRUNCATEDS].sum()) for r in ours)
        assert (truncated > 0) == (max_steps is not None)
        for rows in ours:
            check_boundaries(rows)
            # Each episode end but maybe the last drops the next vector step (the reset).
            done = int((rows[SampleBatch.TERMINATEDS] | rows[SampleBatch.TRUNCATEDS]).sum())
            assert 3 * 40 - done <= len(rows[SampleBatch.OBS]) <= 3 * 40 - done + 1
    finally:
        trainer.stop()


def test_complete_episodes_are_whole():
    trainer, worker = make_worker(vectorize_mode="native", batch_mode="complete_episodes")
    try:
        for _ in range(3):
            batch = worker.sample()
            assert batch.count >= 4 * 40
            for episode in batch.split_by_episode():
                assert episode[SampleBatch.T][0] == 0
                assert episode[SampleBatch.DONES][-1] and not episode[SampleBatch.DONES][:-1].any()
                np.testing.assert_array_equal(
                    episode[SampleBatch.OBS][1:], episode[SampleBatch.NEXT_OBS][:-1]
                )
    finally:
        trainer.stop()


def test_an_env_creator_may_return_a_vector_env():
    register_env(
        "h9_native_cartpole",
        lambda ctx: gym.make_vec(
            "CartPole-v1", num_envs=3, vectorization_mode="vector_entry_point"
        ),
    )
    # RLlib 1.13's count: a fragment is rollout_fragment_length x num_envs_per_worker env
    # steps, here 120 over the vector env's 3 sub-envs (40 steps each).
    trainer, worker = make_worker(
        env="h9_native_cartpole", num_envs_per_worker=1, rollout_fragment_length=120
    )
    try:
        assert worker.async_env.num_envs == 3
        assert worker.env.observation_space.shape == (4,)
        assert worker.sampler.fragment_length == 40
        vector = native_cartpole(3)
        ours = check_against_reference(worker, vector, lambda: vector.reset(seed=3), 2)
        for rows in ours:
            check_boundaries(rows)
    finally:
        trainer.stop()


def test_trains_with_native_vector_envs():
    from corral.agents.ppo import PPOTrainer

    trainer = PPOTrainer(
        config={
            "env": "CartPole-v1",
            "num_workers": 0,
            "num_envs_per_worker": 4,
            "vectorize_mode": "native",
            "rollout_fragment_length": 50,
            "train_batch_size": 200,
            "sgd_minibatch_size": 64,
            "num_sgd_iter": 1,
        }
    )
    try:
        result = trainer.train()
        assert result["timesteps_total"] >= 200
        assert result["episodes_this_iter"] > 0
    finally:
        trainer.stop()


@pytest.mark.parametrize(
    ("config", "match"),
    [
        ({"env": "Pendulum-v1"}, "no vector entry point"),
        ({"env": "corral.env.random_env.RandomEnv"}, "registered Gymnasium id"),
        ({"horizon": 20}, "horizon=20"),
        ({"restart_failed_sub_environments": True}, "restart_failed_sub_environments"),
        ({"remote_worker_envs": True}, "remote_worker_envs"),
    ],
)
def test_what_a_batched_vector_env_cannot_do_is_refused(config, match):
    with pytest.raises(ValueError, match=match):
        make_worker(vectorize_mode="native", **config)


def test_unknown_mode_is_refused():
    with pytest.raises(ValueError, match="vectorize_mode"):
        make_worker(vectorize_mode="parallel")


def test_num_envs_per_worker_must_match_a_given_vector_env():
    register_env(
        "h9_native_cartpole_3",
        lambda ctx: gym.make_vec(
            "CartPole-v1", num_envs=3, vectorization_mode="vector_entry_point"
        ),
    )
    with pytest.raises(ValueError, match="num_envs_per_worker=4"):
        make_worker(env="h9_native_cartpole_3")


def test_other_autoreset_modes_are_refused():
    vector = gym.vector.SyncVectorEnv(
        [lambda: gym.make("CartPole-v1")] * 2, autoreset_mode=gym.vector.AutoresetMode.SAME_STEP
    )
    with pytest.raises(ValueError, match="NEXT_STEP"):
        BatchedVectorEnv(vector)


def test_info_rows_follow_the_masks():
    info = {"a": np.array([1, 2]), "_a": np.array([True, False]), "p": {"x": np.array([5, 6])}}
    rows = InfoRows(info, 2)
    assert rows[0] == {"a": 1, "p": {"x": 5}}
    assert rows[1] == {"p": {"x": 6}}
    assert len(rows) == 2 and rows[:1] == [rows[0]]


def test_an_observation_filter_sees_each_observation_once():
    trainer, worker = make_worker(vectorize_mode="native", observation_filter="MeanStdFilter")
    try:
        batches = [worker.sample() for _ in range(2)]
        # The first observations, then one row of new observations per vector step
        # (an autoreset step's row holds the new episode's first observation).
        assert worker.filters["default_policy"].running_stats.n == 4 + 2 * 40 * 4
        for rows in rows_by_env(batches, 4):
            check_boundaries(rows)
    finally:
        trainer.stop()


class EpisodeRows(DefaultCallbacks):
    """On each episode end: the episode's rows of the current fragment so far
    (`Episode.batch_builder`) and its length."""

    seen: list[tuple[int, int, bool]] = []

    def on_episode_end(self, *, worker, base_env, policies, episode, **kwargs):
        batches = episode.batch_builder.policy_collectors["default_policy"].batches
        rows = sum(b.count for b in batches)
        EpisodeRows.seen.append((rows, episode.length, bool(batches[-1]["dones"][-1])))


def check_episode_rows_at_their_end(**config: Any) -> None:
    """A batched vector env's episodes read their own rows up to their last step
    (the fragment's row being recorded) when they end."""
    EpisodeRows.seen = []
    trainer, worker = make_worker(callbacks=EpisodeRows, rollout_fragment_length=500, **config)
    try:
        worker.sample()
    finally:
        trainer.stop()
    # The first fragment: every episode started in it, so it reads all its rows.
    assert len(EpisodeRows.seen) >= 4
    assert all(rows == length and done for rows, length, done in EpisodeRows.seen)


def test_episodes_read_their_rows_when_they_end():
    check_episode_rows_at_their_end(vectorize_mode="native")
