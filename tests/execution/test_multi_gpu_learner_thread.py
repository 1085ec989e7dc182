"""RLlib 1.13's `MultiGPULearnerThread`: loader threads, tower-stack slots, passes in
minibatches on corral's learner; and IMPALA's `make_learner_thread`, which builds it."""

import queue

import numpy as np
import pytest
import torch

from corral.agents.impala import ImpalaTrainer
from corral.agents.impala.impala import make_learner_thread
from corral.agents.ppo import PPOTrainer
from corral.core.learner import Learner
from corral.execution import MultiGPULearnerThread
from corral.execution.learner_thread import LearnerThread

PPO_SMALL = {
    "env": "CartPole-v1",
    "num_workers": 0,
    "rollout_fragment_length": 200,
    "train_batch_size": 200,
    "sgd_minibatch_size": 50,
    "model": {"fcnet_hiddens": [16]},
    "seed": 0,
}


def _weights(worker):
    return {k: np.array(v, copy=True) for k, v in worker.get_policy().get_weights().items()}


def _same(a, b):
    return a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)


def _results(thread, n, timeout=60.0):
    return [thread.outqueue.get(timeout=timeout) for _ in range(n)]


@pytest.fixture
def ppo():
    trainer = PPOTrainer(config=PPO_SMALL)
    yield trainer
    trainer.stop()


def test_trains_num_sgd_iter_passes_over_several_stacks(ppo):
    worker = ppo.workers.local_worker()
    batches = [worker.sample() for _ in range(3)]
    before = _weights(worker)
    thread = MultiGPULearnerThread(
        worker, num_gpus=0, num_multi_gpu_tower_stacks=2, num_sgd_iter=2, num_data_load_threads=4
    )
    assert len(thread.loader_threads) == 2  # no more loaders than slots
    thread.start()
    try:
        for batch in batches:
            thread.inqueue.put(batch)
        # RLlib's warm-up: the first batch gets 1 pass, each later one 2 (num_sgd_iter).
        results = _results(thread, 5)
        with pytest.raises(queue.Empty):
            thread.outqueue.get(timeout=0.5)
        assert [count for count, _ in results] == [200] * 5
        assert thread.num_batches_loaded == 3 and thread.num_steps_trained == 1000
        stats = results[-1][1]["default_policy"]["learner_stats"]
        assert np.isfinite(stats["total_loss"])
        assert not _same(before, _weights(worker))
        # Every slot left the ring after its last pass (back to the loaders).
        assert thread.minibatch_buffer.buffers == [None, None]
        assert thread.ready_tower_stacks.empty()
        weights, seqs = thread.published_weights()
        assert _same(weights["default_policy"], _weights(worker))
        assert seqs == worker.get_weights_seqs()
    finally:
        thread.stop()
    assert not thread.is_alive()
    assert not any(loader.is_alive() for loader in thread.loader_threads)
    assert thread.idle_tower_stacks.qsize() == 2  # a stopped loader gives its slot back
    assert thread.error is None


def test_a_pass_is_one_epoch_of_sgd_minibatch_size_minibatches(ppo):
    worker = ppo.workers.local_worker()
    batch = worker.sample()
    twin = PPOTrainer(config=PPO_SMALL)
    try:
        twin_worker = twin.workers.local_worker()
        assert _same(_weights(worker), _weights(twin_worker))
        thread = MultiGPULearnerThread(worker, num_gpus=0, num_sgd_iter=1)
        thread.start()
        try:
            thread.inqueue.put(batch)
            _results(thread, 1)
        finally:
            thread.stop()
        # The same update straight on corral's learner: 4 minibatches of 50 rows.
        learner = Learner(twin_worker.policy_map, twin_worker.policy_config)
        whole = {k: v.copy() for k, v in _weights(twin_worker).items()}
        learner.update(batch=batch.copy(), minibatch_size=50)
        assert _same(_weights(worker), _weights(twin_worker))
        assert not _same(whole, _weights(twin_worker))
    finally:
        twin.stop()


def test_stats_and_the_queued_policy_lag(ppo):
    worker = ppo.workers.local_worker()
    batch = worker.sample()
    thread = MultiGPULearnerThread(worker, num_gpus=0, train_batch_size=200)
    assert thread.devices == ["cpu"] and thread.train_batch_size == 200
    thread.start()
    try:
        seq = worker.get_weights_seqs()["default_policy"]
        thread.inqueue.put((batch, {"default_policy": [seq]}))
        _results(thread, 1)
    finally:
        thread.stop()
    result = thread.add_learner_metrics({"info": {}})
    info = result["info"]
    timing = info["timing_breakdown"]
    for key in (
        "learner_grad_time_ms",
        "learner_load_time_ms",
        "learner_load_wait_time_ms",
        "learner_dequeue_time_ms",
    ):
        assert timing[key] >= 0
    assert thread.load_timer.count == 1 and thread.grad_timer.count == 1
    assert info["policy_lag"]["max"] == 1  # one update since the batch was sampled
    assert "total_loss" in info["learner"]["default_policy"]["learner_stats"]


def test_fake_gpus_train_through_the_device_path(ppo):
    worker = ppo.workers.local_worker()
    before = _weights(worker)
    thread = MultiGPULearnerThread(worker, num_gpus=1, _fake_gpus=True)
    # The driver's GPU learner path (policy copies), on the CPU.
    assert thread.devices == ["cpu"]
    assert thread.update_fn.learner_group.remote_learners
    thread.start()
    try:
        thread.inqueue.put(worker.sample())
        _results(thread, 1)
    finally:
        thread.stop()
    assert not _same(before, _weights(worker))


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_trains_on_the_gpu(ppo):
    worker = ppo.workers.local_worker()
    before = _weights(worker)
    thread = MultiGPULearnerThread(worker, num_gpus=1, num_multi_gpu_tower_stacks=2)
    assert thread.devices == ["cuda"]
    thread.start()
    try:
        thread.inqueue.put(worker.sample())
        _results(thread, 1)
    finally:
        thread.stop()
    assert not _same(before, _weights(worker))  # the weights came back to the policy


@pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")
def test_gpus_without_cuda_are_refused(ppo):
    with pytest.raises(ValueError, match="num_gpus=1"):
        MultiGPULearnerThread(ppo.workers.local_worker(), num_gpus=1)


@pytest.mark.parametrize(
    "key", ["num_multi_gpu_tower_stacks", "num_sgd_iter", "num_data_load_threads"]
)
def test_bad_counts_are_refused(ppo, key):
    with pytest.raises(ValueError, match=f"{key} must be an int >= 1, got 0"):
        MultiGPULearnerThread(ppo.workers.local_worker(), num_gpus=0, **{key: 0})


IMPALA_SMALL = {
    "env": "CartPole-v1",
    "num_workers": 0,
    "rollout_fragment_length": 50,
    "train_batch_size": 100,
    "model": {"fcnet_hiddens": [16]},
    "seed": 3,
}


def test_make_learner_thread_picks_rllibs_thread_and_trains_identically():
    a = ImpalaTrainer(config=IMPALA_SMALL)
    b = ImpalaTrainer(config=IMPALA_SMALL)
    try:
        wa, wb = a.workers.local_worker(), b.workers.local_worker()
        start = _weights(wa)
        assert _same(start, _weights(wb))
        multi = make_learner_thread(wa, dict(a.config))
        plain = make_learner_thread(wb, dict(b.config, simple_optimizer=True))
        assert type(multi) is MultiGPULearnerThread and type(plain) is LearnerThread
        batches = [wa.sample().as_multi_agent() for _ in range(3)]
        for thread in (multi, plain):
            thread.start()
            try:
                for batch in batches:
                    thread.inqueue.put(batch.copy())
                _results(thread, 3)
            finally:
                thread.stop()
        assert _same(_weights(wa), _weights(wb))
        assert not _same(start, _weights(wa))
    finally:
        a.stop()
        b.stop()


def test_make_learner_thread_fits_the_ring_to_the_stacks(caplog):
    trainer = ImpalaTrainer(config=IMPALA_SMALL)
    try:
        config = dict(trainer.config, minibatch_buffer_size=3, num_multi_gpu_tower_stacks=2)
        thread = make_learner_thread(trainer.workers.local_worker(), config)
        assert config["minibatch_buffer_size"] == 2
        assert thread.minibatch_buffer.size == 2
        assert "num_multi_gpu_tower_stacks=2 < minibatch_buffer_size=3" in caplog.text
    finally:
        trainer.stop()
