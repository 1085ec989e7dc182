"""AsyncRequestsManager and RLlib 1.13's asynchronous_parallel_requests."""

import time

import pytest

from corral.evaluation.backend import Future, RemoteWorkerError, WorkerTimeoutError
from corral.evaluation.worker_set import WorkerSet
from corral.execution.parallel_requests import (
    AsyncRequestsManager,
    asynchronous_parallel_requests,
    wait_asynchronous_requests,
)


class FakeHandle:
    """A worker handle whose futures the test completes by hand."""

    call_timeout_s = 60.0

    def __init__(self, index):
        self.worker_index = index
        self.pid = 1000 + index
        self.futures = []

    def call(self, method, *args, **kwargs):
        f = Future(self, method)
        self.futures.append(f)
        return f

    def apply(self, fn, *args, **kwargs):
        return self.call("apply")


def test_keeps_at_most_max_in_flight_and_returns_only_ready_results():
    a, b = FakeHandle(1), FakeHandle(2)
    manager = AsyncRequestsManager([a, b], max_remote_requests_in_flight_per_worker=2)
    assert manager.call_on_all_available(tag_fn=lambda w: w.worker_index * 10) == 4
    assert manager.call_on_all_available() == 0  # all slots taken
    assert manager.get_ready() == {}
    b.futures[0]._set("b0")
    assert manager.get_ready(with_tags=True) == {b: [("b0", 20)]}
    assert manager.num_in_flight(a) == 2 and manager.num_in_flight(b) == 1
    assert manager.call_on_all_available() == 1  # b's free slot is refilled


def test_failure_raises_after_keeping_the_good_results():
    a, b = FakeHandle(1), FakeHandle(2)
    manager = AsyncRequestsManager([a, b], max_remote_requests_in_flight_per_worker=1)
    manager.call_on_all_available()
    a.futures[0]._set("a0")
    b.futures[0]._set(error=RemoteWorkerError("env raised", 2, b))
    with pytest.raises(RemoteWorkerError):
        manager.get_ready()
    assert manager.num_in_flight(b) == 0
    assert manager.get_ready() == {a: ["a0"]}


def test_a_request_past_its_timeout_fails_its_worker():
    a = FakeHandle(1)
    manager = AsyncRequestsManager([a], 2, request_timeout_s=0.2)
    manager.call_on_all_available()
    start = time.monotonic()
    # The wait is cut short at the request's deadline, not at the 5 s asked for.
    with pytest.raises(WorkerTimeoutError, match="did not answer `sample`"):
        manager.get_ready(timeout=5.0)
    assert 0.15 < time.monotonic() - start < 2.0
    assert manager.num_in_flight() == 0


def test_set_workers_drops_the_removed_workers_requests():
    a, b = FakeHandle(1), FakeHandle(2)
    manager = AsyncRequestsManager([a, b], 1)
    manager.call_on_all_available()
    manager.set_workers([b])
    a.futures[0]._set("late")
    assert manager.workers == [b] and manager.get_ready() == {}


def test_bad_in_flight_count_is_a_clear_error():
    with pytest.raises(ValueError, match="max_remote_requests_in_flight_per_worker"):
        AsyncRequestsManager([], 0)


def test_rllib_functional_form_on_real_workers():
    workers = WorkerSet(
        env_creator=lambda ctx: __import__("gymnasium").make("CartPole-v1"),
        policy_class=__import__(
            "corral.agents.pg.pg_torch_policy", fromlist=["PGTorchPolicy"]
        ).PGTorchPolicy,
        trainer_config={
            **__import__("corral.agents.pg.pg", fromlist=["DEFAULT_CONFIG"]).DEFAULT_CONFIG,
            "num_workers": 2,
            "rollout_fragment_length": 20,
        },
        num_workers=2,
    )
    try:
        in_flight = {}
        got = {}
        deadline = time.monotonic() + 30
        while sum(len(v) for v in got.values()) < 4 and time.monotonic() < deadline:
            for w, results in asynchronous_parallel_requests(
                in_flight, workers.remote_workers(), ray_wait_timeout_s=1.0
            ).items():
                got.setdefault(w, []).extend(results)
        assert sum(len(v) for v in got.values()) >= 4
        assert all(b.count == 20 for v in got.values() for b in v)
        assert all(len(s) <= 2 for s in in_flight.values())
        rest = wait_asynchronous_requests(in_flight, ray_wait_timeout_s=10.0)
        assert all(b.count == 20 for v in rest.values() for b in v)
    finally:
        workers.stop()
