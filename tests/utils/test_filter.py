"""Observation filters: exact merging of worker statistics, state round trips, and the
MeanStdFilter in a real training run (sampler, driver sync, checkpoint)."""

import json
import os

import numpy as np
import pytest

from corral.tune.trainable import checkpoint_folder
from corral.utils.filter import FilterManager, MeanStdFilter, NoFilter, RunningStat, get_filter


def _feed(f, rows, batched):
    if batched:
        f(rows)
    else:
        for row in rows:
            f(row)


@pytest.mark.parametrize("batched", [False, True])
def test_merged_workers_equal_statistics_of_all_observations(batched):
    rng = np.random.default_rng(0)
    obs_1 = rng.normal(3.0, 2.0, size=(57, 3))
    obs_2 = rng.normal(-1.0, 0.5, size=(31, 3))
    driver, w1, w2 = MeanStdFilter((3,)), MeanStdFilter((3,)), MeanStdFilter((3,))
    _feed(w1, obs_1, batched)
    _feed(w2, obs_2, batched)
    driver.apply_changes(w1)
    driver.apply_changes(w2)
    everything = np.concatenate([obs_1, obs_2])
    assert driver.running_stats.n == len(everything)
    np.testing.assert_allclose(driver.running_stats.mean, everything.mean(0), rtol=1e-12)
    np.testing.assert_allclose(driver.running_stats.std, everything.std(0, ddof=1), rtol=1e-12)


def test_flushing_counts_each_observation_once():
    rng = np.random.default_rng(1)
    driver, worker = MeanStdFilter((2,)), MeanStdFilter((2,))
    seen = []
    for _ in range(3):
        rows = rng.normal(size=(10, 2))
        seen.append(rows)
        worker(rows)
        driver.apply_changes(worker.as_serializable())
        worker.clear_buffer()
        worker.sync(driver)  # what the driver pushes back
    assert driver.running_stats.n == 30
    np.testing.assert_allclose(driver.running_stats.mean, np.concatenate(seen).mean(0))
    assert worker.running_stats.n == 30


def test_normalises_and_update_false_leaves_statistics_alone():
    f = MeanStdFilter((2,))
    f(np.array([[0.0, 10.0], [2.0, 30.0]]))
    out = f(np.array([1.0, 20.0]), update=False)
    np.testing.assert_allclose(out, [0.0, 0.0], atol=1e-6)
    assert f.running_stats.n == 2
    assert out.dtype == np.float32
    with pytest.raises(ValueError, match="shape"):
        f(np.zeros(5))


def test_state_is_json_and_round_trips():
    f = MeanStdFilter((2, 2))
    f(np.arange(8.0).reshape(2, 2, 2))
    state = json.loads(json.dumps(f.get_state()))
    g = MeanStdFilter((2, 2))
    g.set_state(state)
    np.testing.assert_array_equal(g.running_stats.mean, f.running_stats.mean)
    assert g.buffer.n == f.buffer.n == 2
    with pytest.raises(ValueError, match="shape"):
        MeanStdFilter((3,)).set_state(state)
    assert NoFilter().get_state() == {"type": "NoFilter"}


def test_running_stat_single_and_batch_agree():
    xs = np.random.default_rng(2).normal(size=(20, 4))
    a, b = RunningStat((4,)), RunningStat((4,))
    for x in xs:
        a.push(x)
    b.push_batch(xs)
    np.testing.assert_allclose(a.mean, b.mean)
    np.testing.assert_allclose(a.var, b.var)


def test_get_filter_names():
    assert isinstance(get_filter("NoFilter", (3,)), NoFilter)
    assert isinstance(get_filter("MeanStdFilter", (3,)), MeanStdFilter)
    with pytest.raises(ValueError, match="'Bogus'"):
        get_filter("Bogus", (3,))


class _Handle:
    """A remote-worker handle stand-in: `.call(method, ...)` returns a done future."""

    def __init__(self, worker):
        self.worker = worker

    def call(self, method, *args, **kwargs):
        from corral.evaluation.backend import Future

        future = Future()
        future._set(getattr(self.worker, method)(*args, **kwargs))
        return future


class _FakeWorker:
    def __init__(self, rows):
        self.filters = {"p": MeanStdFilter((1,))}
        self.filters["p"](rows)

    def get_filters(self, flush_after=False):
        out = {k: f.as_serializable() for k, f in self.filters.items()}
        if flush_after:
            for f in self.filters.values():
                f.clear_buffer()
        return out

    def sync_filters(self, new_filters):
        for k, f in new_filters.items():
            self.filters[k].sync(f)


def test_filter_manager_merges_and_pushes_back():
    workers = [_FakeWorker(np.array([[1.0], [3.0]])), _FakeWorker(np.array([[5.0]]))]
    local = {"p": MeanStdFilter((1,))}
    FilterManager.synchronize(local, [_Handle(w) for w in workers])
    assert local["p"].running_stats.n == 3
    np.testing.assert_allclose(local["p"].running_stats.mean, [3.0])
    for w in workers:
        assert w.filters["p"].running_stats.n == 3
        assert w.filters["p"].buffer.n == 0
    # A second sync with nothing new changes nothing.
    FilterManager.synchronize(local, [_Handle(w) for w in workers])
    assert local["p"].running_stats.n == 3


def test_pendulum_ppo_with_mean_std_filter_trains_and_checkpoints(tmp_path):
    from corral.agents.ppo import PPOTrainer

    config = {
        "num_workers": 1,
        "observation_filter": "MeanStdFilter",
        "rollout_fragment_length": 200,
        "train_batch_size": 200,
        "sgd_minibatch_size": 100,
        "num_sgd_iter": 2,
        "model": {"fcnet_hiddens": [16]},
        "seed": 0,
    }
    trainer = PPOTrainer(env="Pendulum-v1", config=config)
    try:
        for _ in range(2):
            result = trainer.train()
        assert np.isfinite(
            result["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"]
        )
        local = trainer.workers.local_worker().filters["default_policy"]
        # 400 steps plus the reset observation of each of the 3 episodes started.
        assert local.running_stats.n == 403
        remote = trainer.workers.remote_workers()[0].call("get_filters").result()
        np.testing.assert_allclose(
            remote["default_policy"].running_stats.mean, local.running_stats.mean
        )
        # The sampler stored normalised observations.
        batch = trainer.workers.remote_workers()[0].call("sample").result()
        assert abs(float(np.mean(batch["obs"]))) < 3.0

        path = checkpoint_folder(trainer.save(str(tmp_path)))
        with open(os.path.join(path, "worker_state.json")) as f:
            saved = json.load(f)["filters"]["default_policy"]
        assert saved["type"] == "MeanStdFilter"
        assert saved["running_stats"]["n"] == 403
        restored = PPOTrainer(env="Pendulum-v1", config=config)
        try:
            restored.restore(path)
            again = restored.workers.local_worker().filters["default_policy"]
            np.testing.assert_allclose(again.running_stats.mean, local.running_stats.mean)
        finally:
            restored.stop()
    finally:
        trainer.stop()


def test_concurrent_mean_std_filter_counts_every_observation_from_threads():
    import pickle
    import threading

    from corral.utils.filter import ConcurrentMeanStdFilter, MeanStdFilter, get_filter

    shared = get_filter("ConcurrentMeanStdFilter", (3,))
    assert isinstance(shared, ConcurrentMeanStdFilter)
    rows = np.random.default_rng(0).normal(size=(4, 500, 3))

    def push(block):
        for row in block:
            shared(row)

    threads = [threading.Thread(target=push, args=(rows[i],)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert shared.running_stats.n == 2000
    np.testing.assert_allclose(shared.running_stats.mean, rows.reshape(-1, 3).mean(0), atol=1e-9)
    # It travels to other processes (the lock stays behind) and merges like a MeanStdFilter.
    copy = pickle.loads(pickle.dumps(shared))
    assert isinstance(copy, ConcurrentMeanStdFilter) and copy.running_stats.n == 2000
    copy(np.ones(3))
    plain = MeanStdFilter((3,))
    plain.apply_changes(shared)
    assert plain.running_stats.n == 2000
    assert isinstance(shared.copy(), ConcurrentMeanStdFilter)
