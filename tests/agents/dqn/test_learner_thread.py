"""Ape-X's learner thread: trains a DQN policy on queued prioritized replay samples and
hands back one TD error per replayed row, for the replay actor the batch came from."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from corral.agents.dqn import DEFAULT_CONFIG, DQNTorchPolicy
from corral.agents.dqn.learner_thread import LEARNER_QUEUE_MAX_SIZE, LearnerThread
from corral.agents.trainer import Trainer
from corral.evaluation.rollout_worker import RolloutWorker
from corral.utils.replay_buffers import BATCH_INDEXES, MultiAgentPrioritizedReplayBuffer

PID = "default_policy"


@pytest.fixture
def worker():
    config = Trainer.merge_trainer_configs(
        DEFAULT_CONFIG,
        {"model": {"fcnet_hiddens": [16]}, "hiddens": [16], "lr": 1e-2, "seed": 0},
    )
    worker = RolloutWorker(
        env_creator=lambda ctx: gym.make("CartPole-v1"),
        policy_spec=DQNTorchPolicy,
        policy_config=config,
        rollout_fragment_length=200,
        seed=0,
    )
    yield worker
    worker.stop()


@pytest.fixture
def buffer(worker):
    buffer = MultiAgentPrioritizedReplayBuffer(capacity=1000, learning_starts=0, seed=0)
    buffer.add(worker.sample())
    return buffer


@pytest.fixture
def thread(worker):
    thread = LearnerThread(worker)
    thread.start()
    yield thread
    thread.stop()


def _abs_td(td_error):
    return float(np.mean(np.abs(td_error)))


def test_trains_on_replayed_rows_and_reports_one_td_error_per_row(worker, buffer, thread):
    policy = worker.get_policy()
    # The TD errors must be the update's own (the loss's), not a second pass.
    policy.compute_td_error = lambda batch: pytest.fail("TD errors were recomputed")
    before = policy.get_weights()
    batch = buffer.sample(32)
    indexes = batch.policy_batches[PID][BATCH_INDEXES].copy()
    thread.inqueue.put(("shard-0", batch))
    actor, prio_dict, env_steps, agent_steps = thread.outqueue.get(timeout=30)
    assert (actor, env_steps, agent_steps) == ("shard-0", 32, 32)
    batch_indexes, td_error = prio_dict[PID]
    np.testing.assert_array_equal(batch_indexes, indexes)
    assert td_error.shape == (32,) and np.isfinite(td_error).all() and np.any(td_error != 0)
    assert thread.weights_updated
    after = policy.get_weights()
    assert any(not np.array_equal(before[k], after[k]) for k in before)
    info = thread.learner_info[PID]
    np.testing.assert_array_equal(info["td_error"], td_error)
    assert np.isfinite(info["learner_stats"]["mean_td_error"])

    # The priorities go back into the buffer: |td| + eps on exactly those rows.
    buffer.update_priorities(prio_dict)
    priorities = buffer.replay_buffers[PID].get_state()["priorities"]
    np.testing.assert_allclose(priorities[indexes], np.abs(td_error) + buffer.eps, rtol=1e-6)

    # Training on the same rows again and again fits them: the TD errors shrink.
    for _ in range(30):
        thread.inqueue.put(("shard-0", batch))
    errors = [_abs_td(thread.outqueue.get(timeout=30)[1][PID][1]) for _ in range(30)]
    assert errors[-1] < 0.5 * _abs_td(td_error), errors

    stats = thread.stats()
    assert stats["num_updates"] == 31
    assert stats["learner_queue"]["size_count"] == 31
    assert stats["timing_breakdown"]["learner_grad_time_ms"] > 0
    assert thread.inqueue.maxsize == LEARNER_QUEUE_MAX_SIZE == 16


def test_empty_items_are_skipped_and_stop_ends_the_thread(worker, thread):
    thread.inqueue.put(("shard-0", None))
    thread.stop()
    assert not thread.is_alive() and thread.stopped and thread.error is None
    assert thread.outqueue.empty() and thread.num_steps == 0 and not thread.weights_updated


def test_td_errors_fall_back_to_a_second_pass(worker, buffer, thread):
    policy = worker.get_policy()
    policy.pop_td_errors = lambda: None  # the loss kept none
    calls = []
    own_compute = policy.compute_td_error

    def compute(batch):
        calls.append(batch.count)
        return own_compute(batch)

    policy.compute_td_error = compute
    thread.inqueue.put((None, buffer.sample(16)))
    _, prio_dict, _, _ = thread.outqueue.get(timeout=30)
    assert calls == [16] and prio_dict[PID][1].shape == (16,)


def test_a_failing_update_ends_the_thread_with_its_error(worker, buffer, thread):
    def broken(batch):
        raise RuntimeError("boom")

    worker.learn_on_batch = broken
    thread.inqueue.put((None, buffer.sample(8)))
    thread.join(timeout=30)
    assert not thread.is_alive() and thread.stopped
    assert isinstance(thread.error, RuntimeError)
