"""RLlib 1.13's execution-plan operators (rollout, train, metric, concurrency and replay
ops) on small inputs."""

from __future__ import annotations

import logging
import queue

import numpy as np
import pytest

from corral.agents.pg import PGTrainer
from corral.execution.algorithm_ops import (
    BroadcastUpdateLearnerWeights,
    UpdateKL,
    UpdateWorkerWeights,
    warn_about_bad_reward_scales,
)
from corral.execution.buffers.mixin_replay_buffer import MixInMultiAgentReplayBuffer
from corral.execution.buffers.multi_agent_replay_buffer import MultiAgentReplayBuffer
from corral.execution.common import _get_shared_metrics, count_sampled_in_plan
from corral.execution.concurrency_ops import Concurrently, Dequeue, Enqueue
from corral.execution.local_iterator import (
    LocalIterator,
    NextValueNotReady,
    ParallelIterator,
    SharedMetrics,
    from_actors,
)
from corral.execution.metric_ops import (
    CollectMetrics,
    OncePerTimeInterval,
    OncePerTimestepsElapsed,
    StandardMetricsReporting,
)
from corral.execution.replay_ops import (
    MixInReplay,
    Replay,
    SimpleReplayBuffer,
    StoreToReplayBuffer,
    WaitUntilTimestepsElapsed,
)
from corral.execution.rollout_ops import (
    AsyncGradients,
    ConcatBatches,
    ParallelRollouts,
    SelectExperiences,
    StandardizeFields,
)
from corral.execution.train_ops import (
    ApplyGradients,
    AverageGradients,
    ComputeGradients,
    TrainOneStep,
    UpdateTargetNetwork,
)
from corral.policy.sample_batch import MultiAgentBatch, SampleBatch


def batch(n, start=0, **columns):
    return SampleBatch({"obs": np.arange(start, start + n, dtype=np.float32)[:, None], **columns})


def run(fn, *items):
    """`fn` applied to `items` inside an iterator (so it sees a metrics context); returns
    the outputs and the context."""
    it = LocalIterator(lambda _t: iter(items), SharedMetrics()).for_each(fn)
    return list(it), it.shared_metrics.get()


def forever(value=0):
    def gen(_timeout):
        while True:
            yield value

    return LocalIterator(gen, SharedMetrics())


@pytest.fixture(scope="module")
def trainer():
    """A PG trainer with two remote workers (its WorkerSet is not running a plan, so the
    operators train through the local worker's own learn_on_batch, as RLlib's do)."""
    t = PGTrainer(
        config={
            "env": "CartPole-v1",
            "num_workers": 2,
            "rollout_fragment_length": 20,
            "train_batch_size": 40,
            "model": {"fcnet_hiddens": [8]},
            "seed": 0,
        }
    )
    yield t
    t.stop()


# -- rollout ops ------------------------------------------------------------------------


def test_concat_batches_collects_until_min_size():
    concat = ConcatBatches(min_batch_size=10)
    (out, ctx) = run(concat, batch(4), batch(4, 4), batch(0), batch(4, 8), batch(3))
    assert [len(o) for o in out] == [0, 0, 0, 1, 0]
    assert out[3][0].count == 12 and out[3][0]["obs"][-1, 0] == 11
    assert ctx.timers["sample"].has_units_processed()
    ma = MultiAgentBatch({"a": batch(3), "b": batch(3)}, 3)
    out, _ = run(ConcatBatches(5, count_steps_by="agent_steps"), ma)
    assert out[0][0].agent_steps() == 6
    with pytest.raises(ValueError, match="MultiAgentBatches"):
        run(ConcatBatches(5, count_steps_by="agent_steps"), batch(3))
    with pytest.raises(ValueError, match="count_steps_by"):
        ConcatBatches(5, count_steps_by="episodes")
    with pytest.raises(ValueError, match="SampleBatch or MultiAgentBatch"):
        run(ConcatBatches(5), [1, 2])


def test_select_experiences_and_standardize_fields():
    ma = MultiAgentBatch({"a": batch(2), "b": batch(2)}, 2)
    assert set(SelectExperiences(["a"])(ma).policy_batches) == {"a"}
    single = batch(2)
    assert SelectExperiences(["a"])(single) is single
    with pytest.raises(ValueError, match="policy_ids"):
        SelectExperiences()

    class Worker:
        def is_policy_to_train(self, pid, batch=None):
            return pid == "b"

    assert set(SelectExperiences(local_worker=Worker())(ma).policy_batches) == {"b"}
    b = batch(4, advantages=np.array([1.0, 2.0, 3.0, 4.0], np.float32))
    out = StandardizeFields(["advantages"])(b)
    assert abs(out["advantages"].mean()) < 1e-6 and abs(out["advantages"].std() - 1) < 1e-3
    with pytest.raises(KeyError, match="advantages"):
        StandardizeFields(["advantages"])(batch(2))


def test_parallel_rollouts_modes(trainer):
    workers = trainer.workers
    with pytest.raises(ValueError, match="mode"):
        ParallelRollouts(workers, mode="sync")
    bulk = ParallelRollouts(workers, mode="bulk_sync")
    first = next(bulk)
    assert first.count == 40  # one fragment from each of the two workers
    counters = bulk.shared_metrics.get().counters
    assert counters["num_steps_sampled"] == counters["num_env_steps_sampled"] == 40
    rollouts = ParallelRollouts(workers, mode="async", num_async=2)
    seen = set()
    for _ in range(6):
        assert next(rollouts).count == 20
        seen.add(rollouts.shared_metrics.get().current_actor)
    assert seen == set(workers.remote_workers())
    raw = ParallelRollouts(workers, mode="raw")
    assert isinstance(raw, ParallelIterator) and raw.num_shards() == 2


def test_parallel_iterator_runs_transforms_in_the_workers(trainer):
    shards = from_actors(trainer.workers.remote_workers())
    counts = shards.for_each(lambda b: b.count).batch(2).for_each(sum)
    # In a worker, two fragments per item; one item of each worker per round.
    assert counts.batch_across_shards().take(2) == [[40, 40], [40, 40]]
    assert counts.gather_sync().take(3) == [40, 40, 40]
    pids = shards.for_each(lambda b: __import__("os").getpid()).gather_async(num_async=1)
    got = {next(pids) for _ in range(6)}
    assert got == {w.pid for w in trainer.workers.remote_workers()}
    shards.filter(lambda b: b.count > 0).show(1)
    with pytest.raises(TypeError, match="gather"):
        iter(shards)


def test_local_worker_samples_when_there_are_no_remote_workers():
    t = PGTrainer(config={"env": "CartPole-v1", "num_workers": 0, "rollout_fragment_length": 16})
    try:
        for mode in ("bulk_sync", "async", "raw"):
            assert next(ParallelRollouts(t.workers, mode=mode)).count == 16
        grads, count = next(AsyncGradients(t.workers))
        assert count == 16 and len(grads) == len(list(t.get_policy().model.parameters()))
    finally:
        t.stop()


# -- train ops --------------------------------------------------------------------------


def test_train_one_step_trains_counts_and_syncs(trainer):
    workers = trainer.workers
    before = trainer.get_policy().get_weights()
    plan = ParallelRollouts(workers).for_each(TrainOneStep(workers))
    sample, info = next(plan)
    counters = plan.shared_metrics.get().counters
    assert counters["num_steps_trained"] == counters["num_env_steps_trained"] == sample.count
    assert counters["num_steps_trained_this_iter"] == sample.count
    assert "policy_loss" in info["default_policy"]["learner_stats"]
    after = trainer.get_policy().get_weights()
    assert any(not np.array_equal(before[k], after[k]) for k in before)
    # The workers got the new weights.
    remote = workers.remote_workers()[0].call("get_weights").result()["default_policy"]
    assert all(np.array_equal(remote[k], after[k]) for k in after)
    # Minibatch SGD over several epochs.
    sample, info = next(
        ParallelRollouts(workers).for_each(
            TrainOneStep(workers, num_sgd_iter=2, sgd_minibatch_size=10)
        )
    )
    assert "learner_stats" in info["default_policy"]


def test_compute_apply_and_average_gradients(trainer):
    workers = trainer.workers
    policy = trainer.get_policy()
    before = policy.get_weights()
    grads_op = ParallelRollouts(workers).for_each(ComputeGradients(workers))
    grads, count = next(grads_op)
    assert count == 40 and len(grads) == len(list(policy.model.parameters()))
    assert "learner_stats" in grads_op.shared_metrics.get().info["learner"]["default_policy"]
    summed, total = AverageGradients()([(grads, count), (grads, count)])
    assert total == 80 and np.allclose(summed[0], 2 * grads[0])
    out, ctx = run(ApplyGradients(workers), (grads, count))
    assert out == [None] and ctx.counters["num_steps_trained"] == 40
    after = policy.get_weights()
    assert any(not np.array_equal(before[k], after[k]) for k in before)
    with pytest.raises(ValueError, match="tuple"):
        run(ApplyGradients(workers), grads)
    with pytest.raises(ValueError, match="current_actor"):
        run(ApplyGradients(workers, update_all=False), (grads, count))
    dict_sum, _ = AverageGradients()([({"p": [np.ones(2)]}, 1), ({"p": [np.ones(2)]}, 1)])
    assert np.array_equal(dict_sum["p"][0], [2.0, 2.0])


def test_async_gradients_update_only_their_worker(trainer):
    workers = trainer.workers
    plan = AsyncGradients(workers).for_each(ApplyGradients(workers, update_all=False))
    for _ in range(4):
        next(plan)
    ctx = plan.shared_metrics.get()
    assert ctx.counters["num_steps_sampled"] == ctx.counters["num_steps_trained"] == 80
    assert "grad_wait" in ctx.timers and "learner" in ctx.info
    # The worker of the last item has the driver's weights now.
    newest = trainer.get_policy().get_weights()
    got = ctx.current_actor.call("get_weights").result()["default_policy"]
    assert all(np.array_equal(got[k], newest[k]) for k in newest)


def test_update_target_network_every_n_steps():
    updated = []

    class Policy:
        def update_target(self):
            updated.append(1)

    class Worker:
        def get_policies_to_train(self, batch=None):
            return {"p"}

        def foreach_trainable_policy(self, fn):
            return [fn(Policy(), "p")]

    class Workers:
        def local_worker(self):
            return Worker()

    op = UpdateTargetNetwork(Workers(), target_update_freq=100)

    def step(x):
        _get_shared_metrics().counters["num_steps_sampled"] += 50
        return op(x)

    # At 50, 100, 150, 200, 250 steps sampled: more than 100 steps since the last update
    # (RLlib's strict `>`) first at 150, then not again by 250.
    _, ctx = run(step, *range(5))
    assert len(updated) == 1 and ctx.counters["num_target_updates"] == 1
    assert ctx.counters["last_target_update_ts"] == 150


# -- metric ops -------------------------------------------------------------------------


def test_reporting_filters():
    once = OncePerTimeInterval(None)
    assert once(1) and once(2)
    slow = OncePerTimeInterval(1000)
    assert slow(1) and not slow(2)

    def sampled_ten(x):
        count_sampled_in_plan(_get_shared_metrics().counters, batch(10))
        return x

    it = (
        LocalIterator(lambda _t: iter(range(10)), SharedMetrics())
        .for_each(sampled_ten)
        .filter(OncePerTimestepsElapsed(25))
    )
    assert list(it) == [2, 5, 8]  # at 30, 60, 90 steps
    waited = LocalIterator(lambda _t: iter(range(5)), SharedMetrics())
    assert list(waited.for_each(sampled_ten).filter(WaitUntilTimestepsElapsed(30))) == [3, 4]


def test_standard_metrics_reporting_lays_out_a_train_result(trainer):
    workers = trainer.workers
    train_op = ParallelRollouts(workers).for_each(TrainOneStep(workers))
    config = dict(trainer.config, min_sample_timesteps_per_reporting=100)
    reports = StandardMetricsReporting(train_op, workers, config)
    result = next(reports)
    assert result["timesteps_total"] == 120  # three rounds of 40 reach 100 steps
    for key in (
        "episode_reward_mean",
        "episodes_this_iter",
        "hist_stats",
        "sampler_perf",
        "custom_metrics",
        "num_healthy_workers",
        "agent_timesteps_total",
        "num_env_steps_sampled",
        "off_policy_estimator",
        "timers",
    ):
        assert key in result, key
    assert result["info"]["num_env_steps_trained"] == 120
    assert "policy_loss" in result["info"]["learner"]["default_policy"]["learner_stats"]
    assert result["timesteps_this_iter"] == 40 and result["num_healthy_workers"] == 2
    assert result["timers"]["learn_time_ms"] >= 0
    by_trained = CollectMetrics(workers, by_steps_trained=True)
    out, _ = run(by_trained, None)
    assert out[0]["timesteps_total"] == 0


def test_collect_metrics_totals_rllibs_plan_counters(trainer):
    """A user's own operator that counts RLlib 1.x's plan counters only (as RLlib's did):
    `timesteps_total` is RLlib's `num_steps_sampled` (`num_steps_trained` by steps
    trained), so that Tune's `stop={"timesteps_total": ...}` sees it."""

    def own_op(x):
        counters = _get_shared_metrics().counters
        counters["num_steps_sampled"] += 50
        counters["num_steps_trained"] += 30
        return x

    report = CollectMetrics(trainer.workers)
    out, _ = run(lambda x: report(own_op(x)), None, None)
    assert [r["timesteps_total"] for r in out] == [50, 100]
    by_trained = CollectMetrics(trainer.workers, by_steps_trained=True)
    out, _ = run(lambda x: by_trained(own_op(x)), None)
    assert out[0]["timesteps_total"] == 30


# -- concurrency ops --------------------------------------------------------------------


def test_concurrently_round_robin_and_output_indexes():
    a, b = forever("a"), forever("b")
    assert Concurrently([a, b]).take(4) == ["a", "b", "a", "b"]
    weighted = Concurrently(
        [forever("a"), forever("b")], mode="round_robin", round_robin_weights=[2, 1]
    )
    assert weighted.take(6) == ["a", "a", "b", "a", "a", "b"]
    only_b = Concurrently([forever("a"), forever("b")], output_indexes=[1])
    assert only_b.take(3) == ["b", "b", "b"]
    assert Concurrently([forever("a"), forever("b")], mode="async").take(4) == ["a", "b"] * 2
    with pytest.raises(ValueError, match="at least 2"):
        Concurrently([forever()])
    with pytest.raises(ValueError, match="Unknown mode"):
        Concurrently([forever(), forever()], mode="parallel")
    with pytest.raises(ValueError, match="async mode"):
        Concurrently([forever(), forever()], mode="async", round_robin_weights=[1, 1])
    with pytest.raises(ValueError, match="all round robin weights"):
        Concurrently([forever(), forever()], round_robin_weights=["*", "*"])
    with pytest.raises(ValueError, match="out of range"):
        Concurrently([forever(), forever()], output_indexes=[2])


def test_enqueue_and_dequeue_through_a_queue():
    q = queue.Queue(maxsize=2)
    enqueue = Enqueue(q)
    assert enqueue(1) == 1 and enqueue(2) == 2
    assert isinstance(enqueue(3), NextValueNotReady)  # full: retried later
    out = Dequeue(q)
    assert [next(out), next(out)] == [1, 2]
    assert isinstance(next(out), NextValueNotReady)
    alive = iter([True, False])
    stopped = Dequeue(queue.Queue(), check=lambda: next(alive))
    next(stopped)
    with pytest.raises(RuntimeError, match="check"):
        next(stopped)
    with pytest.raises(ValueError, match="queue"):
        Enqueue([])


# -- replay ops -------------------------------------------------------------------------


def test_store_and_replay_through_a_buffer():
    buffer = MultiAgentReplayBuffer(learning_starts=8, capacity=100, replay_batch_size=4)
    store = LocalIterator(lambda _t: (batch(4, 4 * i) for i in range(10)), SharedMetrics())
    store = store.for_each(StoreToReplayBuffer(local_buffer=buffer))
    replay = Replay(local_buffer=buffer)
    assert isinstance(next(replay), NextValueNotReady)  # empty
    both = Concurrently([store, replay], mode="round_robin", output_indexes=[1])
    first = next(both)
    assert buffer.num_added == 8  # replay waited for learning_starts
    assert first.policy_batches["default_policy"].count == 4
    with pytest.raises(ValueError, match="Exactly one"):
        Replay()
    with pytest.raises(ValueError, match="Exactly one"):
        StoreToReplayBuffer(local_buffer=buffer, actors=["actor"])
    # (Replay actors: tests/utils/test_actors.py, with Ray.)


def test_replay_with_a_count_and_the_simple_buffers():
    ring = SimpleReplayBuffer(num_slots=2, seed=0)
    for i in range(3):
        ring.add_batch(batch(2, 10 * i))
    assert len(ring) == 2 and ring.replay()["obs"][0, 0] in (10.0, 20.0)
    nothing = SimpleReplayBuffer(num_slots=0)
    nothing.add_batch(batch(2))
    assert len(nothing) == 0
    assert isinstance(next(Replay(local_buffer=nothing, num_items_to_replay=1)), NextValueNotReady)
    assert next(Replay(local_buffer=ring, num_items_to_replay=1)).count == 2
    mix = MixInReplay(num_slots=2, replay_proportion=1.0, seed=0)
    assert len(mix(batch(1))) == 2 and len(mix(batch(1))) == 2
    with pytest.raises(ValueError, match="num_slots"):
        MixInReplay(num_slots=0, replay_proportion=0.5)


def test_mixin_multi_agent_replay_buffer():
    only_new = MixInMultiAgentReplayBuffer(capacity=10, replay_ratio=0.0, seed=0)
    assert only_new.replay() is None
    only_new.add_batch(batch(2))
    only_new.add_batch(batch(2, 2))
    assert only_new.replay().count == 4 and only_new.replay() is None
    mixed = MixInMultiAgentReplayBuffer(capacity=10, replay_ratio=0.5, seed=0)
    sizes = []
    for i in range(200):
        mixed.add_batch(batch(1, i))
        out = mixed.replay()
        assert out["obs"][0, 0] == i  # the newest batch comes first
        sizes.append(out.count)
    assert 1.6 < np.mean(sizes) < 2.4  # one replayed per new on average
    replay_only = MixInMultiAgentReplayBuffer(capacity=10, replay_ratio=1.0, seed=0)
    replay_only.add_batch(batch(3))
    assert replay_only.replay().count == 3 and replay_only.replay().count == 3
    with pytest.raises(ValueError, match="replay_ratio"):
        MixInMultiAgentReplayBuffer(capacity=10, replay_ratio=1.5)


# -- algorithm-specific ops -------------------------------------------------------------


class _Actor:
    def __init__(self):
        self.calls = []

    def call(self, method, *args):
        self.calls.append((method, args))


class _Thread:
    weights_updated = False

    def published_weights(self):
        return ({"p": {"w": np.ones(1)}}, {"p": 1})


class _LocalWorker:
    def __init__(self, policy=None):
        self.policy = policy
        self.global_vars = None

    def get_weights(self, policies=None):
        return {"p": {"w": np.zeros(1)}}

    def set_global_vars(self, global_vars):
        self.global_vars = global_vars

    def foreach_trainable_policy(self, fn):
        return [fn(self.policy, "p")]


class _Workers:
    def __init__(self, worker):
        self.worker = worker

    def local_worker(self):
        return self.worker


def test_worker_weight_updates_of_apex_and_impala():
    thread, actor = _Thread(), _Actor()
    workers = _Workers(_LocalWorker())
    apex = UpdateWorkerWeights(thread, workers, max_weight_sync_delay=10)
    out, ctx = run(apex, (actor, batch(6)), (actor, batch(6)), (actor, batch(6)))
    assert len(actor.calls) == 1 and ctx.counters["num_weight_syncs"] == 1
    assert actor.calls[0][1][0]["p"]["w"][0] == 1.0  # the thread's published copy
    impala = BroadcastUpdateLearnerWeights(thread, workers, broadcast_interval=2)
    actor = _Actor()
    thread.weights_updated = True
    out, ctx = run(impala, (actor, None), (actor, None), (actor, None))
    assert len(actor.calls) == 3 and ctx.counters["num_weight_broadcasts"] == 1
    assert actor.calls[0][1][0]["p"]["w"][0] == 0.0 and actor.calls[2][1][0]["p"]["w"][0] == 1.0
    assert not thread.weights_updated


def test_update_kl_and_reward_scale_warnings(caplog):
    class KLPolicy:
        kl = None

        def update_kl(self, kl):
            self.kl = kl

    policy = KLPolicy()
    update = UpdateKL(_Workers(_LocalWorker(policy)))
    update({"p": {"learner_stats": {"kl": 0.5}}})
    assert policy.kl == 0.5
    with pytest.raises(ValueError, match="nested"):
        update({"learner_stats": {}})
    # A policy that adapts its coefficient itself (corral's PPO) is left alone.
    UpdateKL(_Workers(_LocalWorker(object())))({"p": {"learner_stats": {"kl": 0.5}}})
    config = {"vf_loss_coeff": 1.0, "vf_clip_param": 1.0, "model": {"vf_share_layers": True}}
    stats = {"vf_loss": 500.0, "policy_loss": 1.0}
    result = {
        "episode_reward_mean": 1000.0,
        "info": {"learner": {"default_policy": {"learner_stats": stats}}},
    }
    with caplog.at_level(logging.WARNING):
        assert warn_about_bad_reward_scales(config, result) is result
    assert "value function loss" in caplog.text and "vf_clip_param" in caplog.text
