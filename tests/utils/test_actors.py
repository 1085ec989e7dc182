"""RLlib 1.13's Ray actor utilities (`corral.utils.actors`) and the replay buffers' Ray
actors (`ReplayActor`): on a local Ray (one `ray.init` for the module), skipped when the
`ray` extra is missing; without Ray, a clear ImportError naming the extra."""

from __future__ import annotations

import importlib
import platform
import sys
import time

import numpy as np
import pytest

from corral.policy.sample_batch import SampleBatch
from corral.utils import actors
from corral.utils.actors import (
    TaskPool,
    create_colocated,
    create_colocated_actors,
    drop_colocated,
    split_colocated,
    try_create_colocated,
)
from corral.utils.replay_buffers import BATCH_INDEXES

REPLAY_MODULES = (
    "corral.execution.buffers.multi_agent_replay_buffer",
    "corral.utils.replay_buffers.multi_agent_replay_buffer",
    "corral.utils.replay_buffers.multi_agent_prioritized_replay_buffer",
)


@pytest.fixture(scope="module")
def ray():
    ray = pytest.importorskip("ray", reason="the `ray` extra is not installed")
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()


def _rows(n, start=0):
    return SampleBatch(
        {
            "obs": np.arange(start, start + n, dtype=np.float32)[:, None],
            "actions": np.zeros(n, dtype=np.int64),
            "rewards": np.ones(n, dtype=np.float32),
        }
    )


def _one_row_dominates():
    """New priorities of a 10-row buffer: row 3's much larger than all others."""
    td = np.full(10, 1e-3)
    td[3] = 1e3
    return np.arange(10), td


def _actor_classes(ray):
    @ray.remote(num_cpus=0)
    class Sleeper:
        def sleep(self, seconds, value):
            time.sleep(seconds)
            return value

        def get_host(self):
            return platform.node()

    @ray.remote(num_cpus=0)
    class NoHost:
        def __init__(self, x, y=0):
            self.value = x + y

        def value_of(self):
            return self.value

    return Sleeper, NoHost


# -- without Ray ----------------------------------------------------------------------


def test_without_ray_everything_says_to_install_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` fails
    monkeypatch.setattr(actors, "_replay_actors", {})
    with pytest.raises(ImportError, match=r"TaskPool needs Ray.*corral\[ray\]"):
        TaskPool()
    with pytest.raises(ImportError, match=r"corral\[ray\]"):
        create_colocated_actors([(object, None, None, 1)])
    for name in REPLAY_MODULES:
        module = importlib.import_module(name)
        with pytest.raises(ImportError, match=r"ReplayActor .*needs Ray.*corral\[ray\]"):
            module.ReplayActor  # noqa: B018
    with pytest.raises(AttributeError):
        module.NoSuchName  # noqa: B018


# -- TaskPool -------------------------------------------------------------------------


def test_task_pool_hands_back_finished_calls(ray):
    Sleeper, _ = _actor_classes(ray)
    fast, slow = Sleeper.remote(), Sleeper.remote()
    pool = TaskPool()
    assert list(pool.completed()) == [] and pool.count == 0
    slow_ref = slow.sleep.remote(60, "slow")
    pool.add(slow, slow_ref)
    fast_refs = [fast.sleep.remote(0, "fast"), fast.sleep.remote(0, "other")]
    pool.add(fast, fast_refs)  # a call with several returns: the first tells
    ray.get(fast_refs)
    assert pool.count == 2
    done = list(pool.completed(blocking_wait=True))
    assert done == [(fast, fast_refs)] and pool.count == 1
    assert list(pool.completed()) == []  # the slow one is still running

    # Prefetch: at most `max_yield` at a time, the rest on the next call.
    refs = [fast.sleep.remote(0, i) for i in range(3)]
    for ref in refs:
        pool.add(fast, ref)
    ray.get(refs)
    first = list(pool.completed_prefetch(max_yield=2))
    second = list(pool.completed_prefetch(max_yield=2))
    assert len(first) == 2 and len(second) == 1
    assert sorted(ray.get([r for _, r in first + second])) == [0, 1, 2]

    # Removed workers' calls are forgotten, finished (prefetched) or not.
    ref = fast.sleep.remote(0, "late")
    pool.add(fast, ref)
    ray.get(ref)
    assert list(pool.completed_prefetch(max_yield=0)) == []  # now waiting to be handed out
    pool.reset_workers([fast])
    assert pool.count == 0  # the slow call is gone
    assert list(pool.completed_prefetch()) == [(fast, ref)]
    pool.add(slow, slow_ref)
    pool.add(fast, fast.sleep.remote(0, "x"))
    pool.reset_workers([])
    assert pool.count == 0 and list(pool.completed_prefetch()) == []
    for a in (fast, slow):
        ray.kill(a)


# -- co-located actors ----------------------------------------------------------------


def test_actors_are_created_on_the_drivers_node(ray):
    Sleeper, NoHost = _actor_classes(ray)
    with_host, no_host = create_colocated_actors(
        [(Sleeper, None, None, 2), (NoHost, [1], {"y": 2}, 1)]
    )
    assert len(with_host) == 2 and len(no_host) == 1
    assert ray.get([a.get_host.remote() for a in with_host]) == [platform.node()] * 2
    assert ray.get(no_host[0].value_of.remote()) == 3
    # `node=None`: wherever most land; an actor without `get_host()` is asked directly.
    local, others = split_colocated(with_host + no_host, node=None)
    assert (local, others) == (with_host + no_host, [])
    assert split_colocated(no_host, node="another-host") == ([], no_host)

    # Not on the wanted node: terminated, and an error after `max_attempts`.
    assert try_create_colocated(NoHost, [0], 1, node="another-host") == []
    with pytest.raises(RuntimeError, match="another-host"):
        create_colocated_actors([(NoHost, [0], None, 1)], node="another-host", max_attempts=1)

    # The deprecated helpers.
    (one,) = create_colocated(NoHost, [5], 1)
    assert ray.get(one.value_of.remote()) == 5
    assert drop_colocated([one]) == []  # on this node: terminated
    with pytest.raises(ray.exceptions.RayActorError):
        ray.get(one.value_of.remote(), timeout=30)
    for a in with_host + no_host:
        ray.kill(a)


# -- ReplayActor ----------------------------------------------------------------------


def test_replay_actors_add_sample_and_update_priorities(ray):
    classes = {name: importlib.import_module(name).ReplayActor for name in REPLAY_MODULES}
    for name, cls in classes.items():
        assert importlib.import_module(name).ReplayActor is cls  # one class per module

    # The execution plans' buffer (RLlib 1.13's `add_batch` / `replay`).
    legacy = classes[REPLAY_MODULES[0]].remote(
        learning_starts=0, capacity=100, replay_batch_size=4, prioritized_replay_alpha=0.6
    )
    ray.get(legacy.add_batch.remote(_rows(10)))
    replayed = ray.get(legacy.replay.remote()).policy_batches["default_policy"]
    assert replayed.count == 4 and BATCH_INDEXES in replayed
    ray.get(legacy.update_priorities.remote({"default_policy": _one_row_dominates()}))
    again = [ray.get(legacy.replay.remote()).policy_batches["default_policy"] for _ in range(10)]
    assert np.mean(np.concatenate([b[BATCH_INDEXES] for b in again]) == 3) > 0.9
    assert ray.get(legacy.get_host.remote()) == platform.node()

    # The utils buffers, as Ape-X makes its shards (config as keyword arguments).
    config = {
        "type": "MultiAgentPrioritizedReplayBuffer",
        "capacity": 100,
        "learning_starts": 0,
        "prioritized_replay_alpha": 1.0,
        "replay_buffer_shards_colocated_with_driver": True,
    }
    for name in REPLAY_MODULES[1:]:
        kwargs = dict(config)
        if name.endswith(".multi_agent_replay_buffer"):
            kwargs.update(prioritized=True, alpha=1.0)
        [shard] = create_colocated_actors([(classes[name], None, kwargs, 1)])[0]
        ray.get(shard.add.remote(_rows(10)))
        sample = ray.get(shard.sample.remote(6)).policy_batches["default_policy"]
        assert sample.count == 6
        ray.get(shard.update_priorities.remote({"default_policy": _one_row_dominates()}))
        again = ray.get(shard.sample.remote(50)).policy_batches["default_policy"]
        assert np.mean(again[BATCH_INDEXES] == 3) > 0.9, name
        state = ray.get(shard.get_state.remote())
        assert state is not None
        ray.kill(shard)
    ray.kill(legacy)


def test_plans_store_to_and_replay_from_replay_actors(ray):
    from corral.execution.local_iterator import NextValueNotReady
    from corral.execution.replay_ops import Replay, StoreToReplayBuffer

    replay_actor = importlib.import_module(REPLAY_MODULES[1]).ReplayActor
    shards = [replay_actor.remote(capacity=100, learning_starts=0) for _ in range(2)]
    legacy = importlib.import_module(REPLAY_MODULES[0]).ReplayActor.remote(
        num_shards=1, learning_starts=0, capacity=100, replay_batch_size=4
    )
    try:
        replay = Replay(actors=shards, num_items_to_replay=4, num_async=2)
        assert isinstance(next(replay), NextValueNotReady)  # nothing stored yet
        store = StoreToReplayBuffer(actors=shards)
        for i in range(20):
            assert store(_rows(1, start=i)).count == 1
        # Every batch went to one of the shards (the calls are not waited for).
        deadline = time.monotonic() + 10
        while sum(ray.get([s.__len__.remote() for s in shards])) < 20:
            assert time.monotonic() < deadline, "stored batches did not reach the actors"
            time.sleep(0.05)
        got = [b for b in (next(replay) for _ in range(30)) if not isinstance(b, NextValueNotReady)]
        assert got and all(b.count == 4 for b in got)
        assert set(
            np.concatenate([b.policy_batches["default_policy"]["obs"][:, 0] for b in got])
        ) <= set(range(20))
        # An actor of RLlib 1.13's execution buffer (`add_batch`, `replay()`).
        StoreToReplayBuffer(actors=[legacy])(_rows(8))
        from_legacy = Replay(actors=[legacy])
        batch = next(b for b in from_legacy if not isinstance(b, NextValueNotReady))
        assert batch.policy_batches["default_policy"].count == 4
        with pytest.raises(ValueError, match="at least one replay actor"):
            Replay(actors=[])
        with pytest.raises(ValueError, match="num_async must be >= 1"):
            Replay(actors=shards, num_async=0)
    finally:
        for actor in (*shards, legacy):
            ray.kill(actor)
