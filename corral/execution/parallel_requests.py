"""Asynchronous requests to remote workers (RLlib 1.13's `execution.parallel_requests`).

Remote worker handles (`corral.evaluation.backend`: local processes or Ray actors) return
futures. `AsyncRequestsManager` keeps up to `max_remote_requests_in_flight_per_worker`
requests in flight on each worker and hands back whichever results are ready, so that a
driver never waits for the slowest worker; RLlib 1.13's functional form,
`asynchronous_parallel_requests` / `wait_asynchronous_requests`, is built on the same
waiting. A request that fails (the worker died, raised, or did not answer within the
manager's `request_timeout_s`) raises its `WorkerFailure` from `get_ready()`, after the
results that were ready with it are kept for the next call: recovery (the trainer's
`ignore_worker_failures` / `recreate_failed_workers`) then runs, and no batch is lost.
"""

from __future__ import annotations

import collections
import time
from collections.abc import Callable, Iterable
from typing import Any

from corral.evaluation.backend import WorkerFailure, timeout_error

# How long one poll of the local backend's futures sleeps (seconds): the driver thread
# wakes this often while it waits, cheap next to a sample of any size.
_POLL_S = 0.001


def wait_any(futures: list[Any], timeout: float | None) -> list[Any]:
    """The futures of `futures` that are done, waiting up to `timeout` s for at least one.

    `timeout` 0: only look; None: wait until one is done. Ray futures are waited on with
    one `ray.wait` call, the local backend's by polling their `done()`.
    """
    if not futures:
        return []
    deadline = None if timeout is None else time.monotonic() + timeout
    refs = [getattr(f, "_ref", None) for f in futures]
    if all(r is not None for r in refs):
        ray = futures[0]._handle._ray
        ready_refs, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
        if not ready_refs and timeout != 0:
            ready_refs, _ = ray.wait(refs, num_returns=1, timeout=timeout)
        ready = {id(r) for r in ready_refs}
        return [f for f, r in zip(futures, refs) if id(r) in ready]
    while True:
        done = [f for f in futures if f.done()]
        if done or (deadline is not None and time.monotonic() >= deadline):
            return done
        time.sleep(_POLL_S)


class _Request:
    """One in-flight call: its future, what it was (for errors), a caller's tag, and
    when it reached the head of its worker's queue (the worker runs calls in order)."""

    __slots__ = ("future", "what", "tag", "head_since")

    def __init__(self, future: Any, what: str, tag: Any, head_since: float | None) -> None:
        self.future, self.what, self.tag, self.head_since = future, what, tag, head_since


class AsyncRequestsManager:
    """Keeps requests in flight on remote workers and collects the ready results.

    Args:
        workers: the remote worker handles.
        max_remote_requests_in_flight_per_worker: requests kept in flight per worker
            (2 hides the round trip between one sample and the next).
        ray_wait_timeout_s: how long `get_ready()` waits for a first result by default
            (0: return at once with what is ready).
        request_timeout_s: a request that has been running (at the head of its
            worker's queue) this long fails with `WorkerTimeoutError`; None: the
            handles' own `call_timeout_s`.
    """

    def __init__(
        self,
        workers: Iterable[Any],
        max_remote_requests_in_flight_per_worker: int = 2,
        ray_wait_timeout_s: float = 0.0,
        request_timeout_s: float | None = None,
    ) -> None:
        if (
            isinstance(max_remote_requests_in_flight_per_worker, bool)
            or not isinstance(max_remote_requests_in_flight_per_worker, int)
            or max_remote_requests_in_flight_per_worker < 1
        ):
            raise ValueError(
                "max_remote_requests_in_flight_per_worker must be an int >= 1, got "
                f"{max_remote_requests_in_flight_per_worker!r}."
            )
        self.max_in_flight = max_remote_requests_in_flight_per_worker
        self.ray_wait_timeout_s = ray_wait_timeout_s
        self.request_timeout_s = request_timeout_s
        self._in_flight: dict[Any, collections.deque[_Request]] = {}
        # Results that were ready when another request failed: returned next time.
        self._carried: list[tuple[Any, Any, Any]] = []
        self.num_requests_launched = 0
        self.num_results_returned = 0
        self.add_workers(workers)

    # -- workers ------------------------------------------------------------

    @property
    def workers(self) -> list[Any]:
        return list(self._in_flight)

    def add_workers(self, workers: Iterable[Any]) -> None:
        for w in workers:
            self._in_flight.setdefault(w, collections.deque())

    def remove_workers(self, workers: Iterable[Any]) -> None:
        """Forgets `workers` and their in-flight requests (their results are dropped)."""
        for w in list(workers):
            self._in_flight.pop(w, None)
        self._carried = [c for c in self._carried if c[0] in self._in_flight]

    def set_workers(self, workers: Iterable[Any]) -> None:
        """Makes `workers` the managed set (after recovery replaced some)."""
        wanted = list(workers)
        self.remove_workers([w for w in self._in_flight if w not in wanted])
        self.add_workers(wanted)

    def num_in_flight(self, worker: Any = None) -> int:
        if worker is not None:
            return len(self._in_flight.get(worker, ()))
        return sum(len(q) for q in self._in_flight.values())

    # -- requests -----------------------------------------------------------

    def call(
        self,
        remote_fn: str | Callable = "sample",
        *,
        worker: Any,
        fn_args: tuple = (),
        fn_kwargs: dict | None = None,
        tag: Any = None,
    ) -> bool:
        """Sends one request to `worker` unless it has the maximum in flight.

        `remote_fn`: a `RolloutWorker` method name, or `fn(worker, *args, **kwargs)`.
        `tag` comes back with the result (`get_ready(with_tags=True)`). Returns whether
        the request was sent.
        """
        queue = self._in_flight.get(worker)
        if queue is None:
            raise ValueError(f"{worker!r} is not one of this manager's workers.")
        if len(queue) >= self.max_in_flight:
            return False
        kwargs = fn_kwargs or {}
        if isinstance(remote_fn, str):
            future = worker.call(remote_fn, *fn_args, **kwargs)
            what = remote_fn
        else:
            future = worker.apply(remote_fn, *fn_args, **kwargs)
            what = getattr(remote_fn, "__name__", "apply")
        queue.append(_Request(future, what, tag, None if queue else time.monotonic()))
        self.num_requests_launched += 1
        return True

    def call_on_all_available(
        self,
        remote_fn: str | Callable = "sample",
        *,
        fn_args: tuple = (),
        fn_kwargs: dict | None = None,
        tag_fn: Callable[[Any], Any] | None = None,
    ) -> int:
        """Fills every worker's free slots with requests; returns how many were sent.

        `tag_fn(worker)` gives each request's tag (e.g. the weights version it samples with).
        """
        sent = 0
        for w, queue in self._in_flight.items():
            while len(queue) < self.max_in_flight:
                tag = tag_fn(w) if tag_fn is not None else None
                self.call(remote_fn, worker=w, fn_args=fn_args, fn_kwargs=fn_kwargs, tag=tag)
                sent += 1
        return sent

    def get_ready(
        self, timeout: float | None = None, *, with_tags: bool = False
    ) -> dict[Any, list[Any]]:
        """Results of the requests that are done: worker -> [result, ...] in request order
        (with `with_tags`: [(result, tag), ...]).

        Waits up to `timeout` seconds (default `ray_wait_timeout_s`) for a first result.
        Raises the `WorkerFailure` of a failed or timed-out request after dropping that
        worker's in-flight requests; the other results stay for the next call.
        """
        if timeout is None:
            timeout = self.ray_wait_timeout_s
        futures = [r.future for q in self._in_flight.values() for r in q]
        if not self._carried and futures:
            wait_any(futures, self._wait_limit(timeout))
        out: list[tuple[Any, Any, Any]] = list(self._carried)
        self._carried = []
        failure: WorkerFailure | None = None
        now = time.monotonic()
        for w, queue in list(self._in_flight.items()):
            # A worker answers in order: only a done head lets the next one count.
            while queue and queue[0].future.done():
                request = queue.popleft()
                if queue:
                    queue[0].head_since = now
                try:
                    out.append((w, request.future.result(0), request.tag))
                except WorkerFailure as e:
                    failure = failure or e
                    queue.clear()
                    break
            if queue and failure is None:
                failure = self._timed_out(w, queue[0], now)
                if failure is not None:
                    queue.clear()
        if failure is not None:
            self._carried = out
            raise failure
        results: dict[Any, list[Any]] = collections.defaultdict(list)
        for w, value, tag in out:
            results[w].append((value, tag) if with_tags else value)
        self.num_results_returned += len(out)
        return dict(results)

    def _limit(self, request: _Request) -> float | None:
        if self.request_timeout_s is not None:
            return self.request_timeout_s
        default = getattr(request.future, "default_timeout", None)
        return default() if default is not None else None

    def _wait_limit(self, timeout: float | None) -> float | None:
        """`timeout`, shortened so that a wait never outlasts a request's deadline."""
        now = time.monotonic()
        limits = [timeout] if timeout is not None else []
        for queue in self._in_flight.values():
            if queue and queue[0].head_since is not None:
                limit = self._limit(queue[0])
                if limit is not None:
                    limits.append(max(0.0, queue[0].head_since + limit - now))
        return min(limits) if limits else None

    def _timed_out(self, worker: Any, request: _Request, now: float) -> WorkerFailure | None:
        limit = self._limit(request)
        if request.head_since is None or limit is None:
            return None
        waited = now - request.head_since
        return timeout_error(worker, request.what, waited) if waited >= limit else None

    def get_manager_statistics(self) -> dict[str, Any]:
        return {
            "num_in_flight_per_worker": {
                getattr(w, "worker_index", i): len(q)
                for i, (w, q) in enumerate(self._in_flight.items())
            },
            "num_requests_launched": self.num_requests_launched,
            "num_results_returned": self.num_results_returned,
        }


def asynchronous_parallel_requests(
    remote_requests_in_flight: dict[Any, set],
    actors: list[Any],
    ray_wait_timeout_s: float | None = None,
    max_remote_requests_in_flight_per_actor: int = 2,
    remote_fn: Callable | None = None,
    remote_args: list[list] | None = None,
    remote_kwargs: list[dict] | None = None,
    return_result_obj_ref_ids: bool = False,
    num_requests_to_launch: int = 1,
) -> dict[Any, list[Any]]:
    """RLlib 1.13's functional form: launch up to `num_requests_to_launch` requests per
    actor (capped at `max_remote_requests_in_flight_per_actor` in flight), then return
    the results that are ready, `{actor: [result, ...]}`.

    `remote_requests_in_flight` (actor -> set of futures) is the caller's bookkeeping,
    updated in place. `remote_fn(worker, *args, **kwargs)` runs on each actor; None (the
    default) samples (`worker.sample()`). `ray_wait_timeout_s` None waits for at least
    one result; a number waits at most that long (then `{}`).
    `return_result_obj_ref_ids` returns the futures instead of their values.
    """
    for name, per_actor in (("remote_args", remote_args), ("remote_kwargs", remote_kwargs)):
        if per_actor is not None and len(per_actor) != len(actors):
            raise ValueError(
                f"`{name}` must have one entry per actor ({len(actors)}), got {len(per_actor)}."
            )
    for i, actor in enumerate(actors):
        in_flight = remote_requests_in_flight.setdefault(actor, set())
        args = remote_args[i] if remote_args else []
        kwargs = remote_kwargs[i] if remote_kwargs else {}
        for _ in range(num_requests_to_launch):
            if len(in_flight) >= max_remote_requests_in_flight_per_actor:
                break
            if remote_fn is None:
                in_flight.add(actor.call("sample"))
            else:
                in_flight.add(actor.apply(remote_fn, *args, **kwargs))
    owner = {f: a for a, fs in remote_requests_in_flight.items() if a in actors for f in fs}
    ready = wait_any(list(owner), ray_wait_timeout_s)
    out: dict[Any, list[Any]] = collections.defaultdict(list)
    for f in ready:
        actor = owner[f]
        remote_requests_in_flight[actor].discard(f)
        out[actor].append(f if return_result_obj_ref_ids else f.result(0))
    return dict(out)


def wait_asynchronous_requests(
    remote_requests_in_flight: dict[Any, set], ray_wait_timeout_s: float | None = None
) -> dict[Any, list[Any]]:
    """The ready results of requests already in flight (launches none)."""
    return asynchronous_parallel_requests(
        remote_requests_in_flight,
        list(remote_requests_in_flight),
        ray_wait_timeout_s=ray_wait_timeout_s,
        max_remote_requests_in_flight_per_actor=0,
    )


__all__ = [
    "AsyncRequestsManager",
    "asynchronous_parallel_requests",
    "wait_any",
    "wait_asynchronous_requests",
]
