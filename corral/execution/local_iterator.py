"""The iterators RLlib 1.x's execution plans are made of (Ray's `ray.util.iter` and
`ray.util.iter_metrics`), in-process.

An execution plan is a chain of lazy operators over an iterator: `LocalIterator` runs its
transforms (`for_each`, `filter`, `batch`, `flatten`, `combine`, `union`, ...) in the
driver when `next()` is called on it; `ParallelIterator` (`from_actors`) runs its
transforms in the remote rollout workers (corral's worker handles, local processes or
Ray actors) and is read through `gather_sync()` / `gather_async()`.

Every chain shares one `MetricsContext` (`counters`, `timers`, `info`, `current_actor`):
an operator reads it with `LocalIterator.get_metrics()` (RLlib's `_get_shared_metrics()`)
while it runs; `union` merges the contexts of the iterators it joins.

An iterator that has nothing ready yields a `NextValueNotReady` instance instead of
blocking when it runs inside an asynchronous `union` (Ray's `_NextValueNotReady`; a
`Replay` of a buffer that is still filling yields one always); transforms pass such
items through untouched, and a `for_each` function that returns one is called again
with the same item (`Enqueue` into a full queue).

Porting: `from ray.util.iter import LocalIterator` (or `from_actors`, `ParallelIterator`,
`_NextValueNotReady`) and `from ray.util.iter_metrics import SharedMetrics` (or
`MetricsContext`) become imports from `corral.execution.local_iterator`.
"""

from __future__ import annotations

import collections
import contextlib
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Generic, TypeVar

from corral.evaluation.backend import wait_all
from corral.execution.parallel_requests import AsyncRequestsManager, wait_any
from corral.utils.timer import TimerStat

T = TypeVar("T")
U = TypeVar("U")

# A base iterator: `fn(timeout) -> iterable`; `timeout` None blocks for each item, a
# number lets the iterator yield `NextValueNotReady` instead (see `LocalIterator`).
BaseIterator = Callable[[float | None], Iterable[Any]]
Transform = Callable[[Iterator[Any]], Iterator[Any]]

# How long a blocking gather waits per round before it checks again (seconds); a
# request that outlives its worker's `sample_timeout_s` fails anyway.
_GATHER_WAIT_S = 1.0
# How long an asynchronous union sleeps after a round in which nothing was ready, so
# that waiting for workers does not spin a core.
_IDLE_SLEEP_S = 0.001
# Items an asynchronous union takes from one input in a row ("*" weight) before it
# looks at the next one.
_MAX_GREEDY_PULL = 100
# Shard iterators a worker process keeps (one per gather of a `ParallelIterator`).
_MAX_SHARD_ITERATORS = 16


class NextValueNotReady(Exception):  # noqa: N818 (Ray's name; yielded, never raised)
    """Yielded by an iterator that has no item ready right now (Ray's `_NextValueNotReady`)."""


_NextValueNotReady = NextValueNotReady


class MetricsContext:
    """What the operators of one execution plan share (Ray's `iter_metrics.MetricsContext`).

    Attributes:
        counters: named step counters (`num_steps_sampled`, `num_env_steps_trained`, ...).
        timers: named `TimerStat`s, created on first use.
        info: other values to report (`info["learner"]`: the latest learner info).
        current_actor: the worker handle the item being processed came from (set by
            `gather_async`).
    """

    def __init__(self) -> None:
        self.counters: dict[str, int] = collections.defaultdict(int)
        self.timers: collections.defaultdict[str, TimerStat] = collections.defaultdict(TimerStat)
        self.info: dict[str, Any] = {}
        self.current_actor: Any = None

    def save(self) -> dict[str, Any]:
        """The counters and info, for a checkpoint (timers are not saved)."""
        return {"counters": dict(self.counters), "info": dict(self.info), "timers": None}

    def restore(self, values: dict[str, Any]) -> None:
        """Sets what `save` returned (the timers start over)."""
        self.counters.clear()
        self.counters.update(values["counters"])
        self.timers.clear()
        self.info = dict(values["info"])


class SharedMetrics:
    """A `MetricsContext` shared by a chain of iterators (Ray's `iter_metrics.SharedMetrics`).

    Args:
        metrics: the context (default: a new one).
        parents: the `SharedMetrics` of iterators joined into this one (`union`); they
            are pointed at this context too, so that their operators count into it.
    """

    def __init__(
        self, metrics: MetricsContext | None = None, parents: Iterable[SharedMetrics] = ()
    ) -> None:
        self.parents = list(parents)
        self.metrics = metrics or MetricsContext()
        self.set(self.metrics)

    def set(self, metrics: MetricsContext) -> None:
        """Points this and every parent at `metrics`."""
        self.metrics = metrics
        for parent in self.parents:
            parent.set(metrics)

    def get(self) -> MetricsContext:
        return self.metrics


class LocalIterator(Generic[T]):
    """An iterator whose transforms run in this process, lazily, one item at a time.

    Args:
        base_iterator: `fn(timeout) -> iterable` producing the items; called once, on
            the first `next()`. With `timeout` not None it should yield
            `NextValueNotReady` rather than block.
        shared_metrics: the chain's metrics (default: new ones).
        local_transforms: functions from iterator to iterator applied on top, in order.
        timeout: passed to `base_iterator` (`union` sets 0 on the inputs it joins
            asynchronously).
        name: for `repr`.
    """

    # A `for_each` function with this method has it called before each item is fetched
    # (e.g. to time the wait for it).
    ON_FETCH_START_HOOK_NAME = "_on_fetch_start"

    thread_local = threading.local()

    def __init__(
        self,
        base_iterator: BaseIterator,
        shared_metrics: SharedMetrics | None = None,
        local_transforms: list[Transform] | None = None,
        timeout: float | None = None,
        name: str | None = None,
    ) -> None:
        self.base_iterator = base_iterator
        self.shared_metrics = shared_metrics if shared_metrics is not None else SharedMetrics()
        self.local_transforms = list(local_transforms or [])
        self.timeout = timeout
        self.name = name or "unknown"
        self.built_iterator: Iterator[Any] | None = None

    @staticmethod
    def get_metrics() -> MetricsContext:
        """The metrics context of the operator running now (only inside a function
        given to `for_each` or `filter`)."""
        metrics = getattr(LocalIterator.thread_local, "metrics", None)
        if metrics is None:
            raise ValueError("Cannot access context outside an iterator.")
        return metrics

    @contextlib.contextmanager
    def _metrics_context(self) -> Iterator[None]:
        previous = getattr(self.thread_local, "metrics", None)
        self.thread_local.metrics = self.shared_metrics.get()
        try:
            yield
        finally:
            self.thread_local.metrics = previous

    def _build_once(self) -> Iterator[Any]:
        if self.built_iterator is None:
            it: Iterator[Any] = iter(self.base_iterator(self.timeout))
            for transform in self.local_transforms:
                it = transform(it)
            self.built_iterator = it
        return self.built_iterator

    def __iter__(self) -> Iterator[T]:
        return self._build_once()

    def __next__(self) -> T:
        return next(self._build_once())

    def __repr__(self) -> str:
        return f"LocalIterator[{self.name}]"

    __str__ = __repr__

    def _with_transform(self, transform: Transform, suffix: str) -> LocalIterator[Any]:
        return LocalIterator(
            self.base_iterator,
            self.shared_metrics,
            [*self.local_transforms, transform],
            timeout=self.timeout,
            name=self.name + suffix,
        )

    # -- transforms ---------------------------------------------------------

    def for_each(
        self, fn: Callable[[T], U], max_concurrent: int = 1, resources: dict | None = None
    ) -> LocalIterator[U]:
        """`fn(item)` for each item.

        A `fn` that returns `NextValueNotReady` is called again with the same item the
        next time this iterator is pulled (a non-blocking `fn`). `max_concurrent` and
        `resources` (Ray remote functions in Ray) are accepted; `fn` runs here, in order.
        """
        metrics_context = self._metrics_context

        def apply_foreach(it: Iterator[Any]) -> Iterator[Any]:
            for item in it:
                if isinstance(item, NextValueNotReady):
                    yield item
                    continue
                while True:
                    with metrics_context():
                        result = fn(item)
                    yield result
                    if not isinstance(result, NextValueNotReady):
                        break

        transform: Transform = apply_foreach
        on_fetch_start = getattr(fn, LocalIterator.ON_FETCH_START_HOOK_NAME, None)
        if on_fetch_start is not None:

            def with_fetch_hook(it: Iterator[Any]) -> Iterator[Any]:
                # The hook runs once per new item, not again for each not-ready answer.
                def hooked() -> Iterator[Any]:
                    while True:
                        with metrics_context():
                            on_fetch_start()
                        while True:
                            try:
                                item = next(it)
                            except StopIteration:
                                return
                            yield item
                            if not isinstance(item, NextValueNotReady):
                                break

                return apply_foreach(hooked())

            transform = with_fetch_hook
        return self._with_transform(transform, ".for_each()")

    def filter(self, fn: Callable[[T], bool]) -> LocalIterator[T]:
        """Only the items for which `fn(item)` is true."""
        metrics_context = self._metrics_context

        def apply_filter(it: Iterator[Any]) -> Iterator[Any]:
            for item in it:
                if isinstance(item, NextValueNotReady):
                    yield item
                    continue
                with metrics_context():
                    keep = fn(item)
                if keep:
                    yield item

        return self._with_transform(apply_filter, ".filter()")

    def batch(self, n: int) -> LocalIterator[list[T]]:
        """Lists of `n` consecutive items (the last one shorter when the input ends)."""

        def apply_batch(it: Iterator[Any]) -> Iterator[Any]:
            batch: list[Any] = []
            for item in it:
                if isinstance(item, NextValueNotReady):
                    yield item
                    continue
                batch.append(item)
                if len(batch) >= n:
                    yield batch
                    batch = []
            if batch:
                yield batch

        return self._with_transform(apply_batch, f".batch({n})")

    def flatten(self) -> LocalIterator[Any]:
        """The elements of each item (each item is an iterable)."""

        def apply_flatten(it: Iterator[Any]) -> Iterator[Any]:
            for item in it:
                if isinstance(item, NextValueNotReady):
                    yield item
                else:
                    yield from item

        return self._with_transform(apply_flatten, ".flatten()")

    def combine(self, fn: Callable[[T], Iterable[U]]) -> LocalIterator[U]:
        """`for_each(fn).flatten()`: `fn` returns a list of zero or more items per item."""
        it = self.for_each(fn).flatten()
        it.name = self.name + ".combine()"
        return it

    def shuffle(self, shuffle_buffer_size: int, seed: int | None = None) -> LocalIterator[T]:
        """Items in random order through a buffer of `shuffle_buffer_size` items."""
        rng = random.Random(seed)

        def apply_shuffle(it: Iterator[Any]) -> Iterator[Any]:
            buffer: list[Any] = []
            for item in it:
                if isinstance(item, NextValueNotReady):
                    yield item
                    continue
                buffer.append(item)
                if len(buffer) >= shuffle_buffer_size:
                    yield buffer.pop(rng.randint(0, len(buffer) - 1))
            while buffer:
                yield buffer.pop(rng.randint(0, len(buffer) - 1))

        return self._with_transform(apply_shuffle, f".shuffle({shuffle_buffer_size})")

    def zip_with_source_actor(self) -> LocalIterator[tuple[Any, T]]:
        """`(worker handle, item)`: the worker each item came from (after `gather_async`)."""

        def zip_with_source(item: Any) -> tuple[Any, Any]:
            actor = LocalIterator.get_metrics().current_actor
            if actor is None:
                raise ValueError("Could not identify source actor of item")
            return actor, item

        it = self.for_each(zip_with_source)
        it.name = self.name + ".zip_with_source_actor()"
        return it

    # -- reading ------------------------------------------------------------

    def take(self, n: int) -> list[T]:
        """The next `n` items (fewer when the iterator ends first)."""
        out: list[T] = []
        if n <= 0:
            return out
        for item in self:
            if isinstance(item, NextValueNotReady):
                continue
            out.append(item)
            if len(out) >= n:
                break
        return out

    def show(self, n: int = 20) -> None:
        """Prints the next `n` items."""
        for item in self.take(n):
            print(item)

    def duplicate(self, n: int) -> list[LocalIterator[T]]:
        """`n` iterators that each yield every item of this one (buffered per copy)."""
        if n < 2:
            raise ValueError("Number of copies must be >= 2")
        queues: list[collections.deque[Any]] = [collections.deque() for _ in range(n)]

        def fill_next(timeout: float | None) -> None:
            self.timeout = timeout
            item = next(self)
            for q in queues:
                q.append(item)

        def make_next(i: int) -> BaseIterator:
            def gen(timeout: float | None) -> Iterator[Any]:
                while True:
                    if not queues[i]:
                        try:
                            fill_next(timeout)
                        except StopIteration:
                            return
                    yield queues[i].popleft()

            return gen

        return [
            LocalIterator(make_next(i), self.shared_metrics, name=f"{self.name}.duplicate[{i}]")
            for i in range(n)
        ]

    def union(
        self,
        *others: LocalIterator[Any],
        deterministic: bool = False,
        round_robin_weights: list[float | str] | None = None,
    ) -> LocalIterator[Any]:
        """One iterator over this one and `others`, in rounds.

        Args:
            others: the other iterators.
            deterministic: True: each round takes the given number of items from each
                input in order, waiting for them; False: the same without waiting
                (inputs that have nothing ready are skipped for the round).
            round_robin_weights: items per round from each input (a float: its integer
                part, plus one with the probability of its fraction); "*" takes items
                from that input until it has none ready. Default: 1 each. Given
                weights override `deterministic`: an input weighted "*" is read
                without waiting, the others are waited for.
        """
        for it in others:
            if not isinstance(it, LocalIterator):
                raise ValueError(f"other must be of type LocalIterator, got {type(it)}")
        parents = [self, *others]
        if round_robin_weights is not None:
            if len(round_robin_weights) != len(parents):
                raise ValueError(
                    "Length of round robin weights must equal number of iterators total."
                )
            weights = list(round_robin_weights)
            # Ray's rule: "*" inputs never block, the others are waited for.
            timeouts = [0.0 if w == "*" else None for w in weights]
        else:
            weights = [1] * len(parents)
            timeouts = [None if deterministic else 0.0] * len(parents)
        for w in weights:
            if w != "*" and (isinstance(w, str) or w < 0):
                raise ValueError(f"A round robin weight must be a number >= 0 or '*', got {w!r}.")
        shared = SharedMetrics(parents=[p.shared_metrics for p in parents])
        active: list[tuple[Any, LocalIterator[Any]]] = [
            (w, LocalIterator(p.base_iterator, shared, p.local_transforms, timeout=t))
            for w, p, t in zip(weights, parents, timeouts)
        ]

        def build_union(timeout: float | None) -> Iterator[Any]:
            while active:
                yielded = False
                for weight, it in list(active):
                    pulls = _MAX_GREEDY_PULL if weight == "*" else _randomized_int(float(weight))
                    try:
                        for _ in range(pulls):
                            item = next(it)
                            if isinstance(item, NextValueNotReady):
                                if timeout is not None:
                                    yield item
                                break
                            yielded = True
                            yield item
                    except StopIteration:
                        active.remove((weight, it))
                if not yielded and active:
                    if timeout is not None:
                        yield NextValueNotReady()
                    else:
                        time.sleep(_IDLE_SLEEP_S)

        names = ", ".join(str(o) for o in others)
        return LocalIterator(build_union, shared, name=f"LocalUnion[{self}, {names}]")


def _randomized_int(value: float) -> int:
    """`value`'s integer part, plus one with the probability of its fraction."""
    base = int(value)
    return base + (1 if random.random() < value - base else 0)


def next_ready(iterator: Iterator[T], idle_sleep_s: float = _IDLE_SLEEP_S) -> T:
    """The next item of `iterator` that is not a `NextValueNotReady` (waiting for it)."""
    while True:
        item = next(iterator)
        if not isinstance(item, NextValueNotReady):
            return item
        time.sleep(idle_sleep_s)


# --------------------------------------------------------------------------------------
# Parallel iterators over remote rollout workers
# --------------------------------------------------------------------------------------


class _ShardEnded:
    """What a worker answers when its shard iterator has no more items."""


# The shard iterators of this (worker) process: gather key -> iterator.
_SHARD_ITERATORS: collections.OrderedDict[str, Iterator[Any]] = collections.OrderedDict()


def _shard_items(worker: Any) -> Iterator[Any]:
    """A rollout worker's items: one `sample()` after another (RLlib's
    `ParallelIteratorWorker` item generator of a `RolloutWorker`)."""
    while True:
        yield worker.sample()


def _next_shard_item(worker: Any, key: str, transforms: list[Callable] | None) -> Any:
    """In a worker process: the next item of the shard iterator `key` (built from this
    worker's samples and `transforms` by the gather's first request)."""
    it = _SHARD_ITERATORS.get(key)
    if it is None:
        if transforms is None:
            raise RuntimeError(f"Shard iterator {key!r} was not set up on this worker.")
        local: LocalIterator[Any] = LocalIterator(lambda _timeout: _shard_items(worker))
        for transform in transforms:
            local = transform(local)
        it = iter(local)
        _SHARD_ITERATORS[key] = it
        while len(_SHARD_ITERATORS) > _MAX_SHARD_ITERATORS:
            _SHARD_ITERATORS.popitem(last=False)
    while True:
        try:
            item = next(it)
        except StopIteration:
            return _ShardEnded()
        if not isinstance(item, NextValueNotReady):
            return item


class ParallelIterator(Generic[T]):
    """An iterator over remote rollout workers whose transforms run in the workers
    (Ray's `ParallelIterator`, built by `from_actors`).

    Each worker's shard yields its `sample()`s with the transforms applied there; read
    the shards with `gather_sync()`, `batch_across_shards()` or `gather_async()`.

    Args:
        actors: the worker handles (one shard each).
        transforms: functions `LocalIterator -> LocalIterator` applied in each worker.
        name: for `repr`.
    """

    def __init__(
        self, actors: list[Any], transforms: list[Callable] | None = None, name: str = ""
    ) -> None:
        self.actors = list(actors)
        self.transforms = list(transforms or [])
        self.name = name or f"from_actors[shards={len(self.actors)}]"

    def __iter__(self) -> Iterator[T]:
        raise TypeError(
            "You must use it.gather_sync() or it.gather_async() to iterate over the "
            "results of a ParallelIterator."
        )

    def __repr__(self) -> str:
        return f"ParallelIterator[{self.name}]"

    __str__ = __repr__

    def _with_transform(self, transform: Callable, suffix: str) -> ParallelIterator[Any]:
        return ParallelIterator(self.actors, [*self.transforms, transform], self.name + suffix)

    def for_each(
        self, fn: Callable[[T], U], max_concurrent: int = 1, resources: dict | None = None
    ) -> ParallelIterator[U]:
        """`fn(item)` on each item, in the workers (`fn` is pickled with cloudpickle)."""
        return self._with_transform(lambda it: it.for_each(fn), ".for_each()")

    def filter(self, fn: Callable[[T], bool]) -> ParallelIterator[T]:
        """Only the items for which `fn(item)` is true (decided in the workers)."""
        return self._with_transform(lambda it: it.filter(fn), ".filter()")

    def batch(self, n: int) -> ParallelIterator[list[T]]:
        """Lists of `n` consecutive items of each shard."""
        return self._with_transform(lambda it: it.batch(n), f".batch({n})")

    def flatten(self) -> ParallelIterator[Any]:
        """The elements of each item."""
        return self._with_transform(lambda it: it.flatten(), ".flatten()")

    def combine(self, fn: Callable[[T], Iterable[U]]) -> ParallelIterator[U]:
        """`for_each(fn).flatten()`, in the workers."""
        it = self.for_each(fn).flatten()
        it.name = self.name + ".combine()"
        return it

    def num_shards(self) -> int:
        return len(self.actors)

    def _first_args(self, key: str) -> Callable[[Any, set], tuple]:
        """The arguments of a request to a worker: the transforms with its first one."""
        transforms = self.transforms

        def args(worker: Any, started: set) -> tuple:
            first = worker not in started
            started.add(worker)
            return (key, transforms if first else None)

        return args

    def batch_across_shards(self) -> LocalIterator[list[T]]:
        """Rounds of one item from each shard, in the order of `actors`."""
        key = uuid.uuid4().hex
        args_for = self._first_args(key)

        def base_iterator(timeout: float | None) -> Iterator[Any]:
            active = list(self.actors)
            started: set = set()
            pending: list[Any] | None = None
            while active:
                if pending is None:
                    pending = [w.apply(_next_shard_item, *args_for(w, started)) for w in active]
                if timeout is not None and not all(f.done() for f in pending):
                    wait_any(pending, timeout)
                    if not all(f.done() for f in pending):
                        yield NextValueNotReady()
                        continue
                results = wait_all(pending)
                pending = None
                ended = [w for w, r in zip(active, results) if isinstance(r, _ShardEnded)]
                items = [r for r in results if not isinstance(r, _ShardEnded)]
                active = [w for w in active if w not in ended]
                if items:
                    yield items

        return LocalIterator(base_iterator, name=f"{self}.batch_across_shards()")

    def gather_sync(self) -> LocalIterator[T]:
        """One item of each shard in turn (`batch_across_shards().flatten()`)."""
        it = self.batch_across_shards().flatten()
        it.name = f"{self}.gather_sync()"
        return it

    def gather_async(self, batch_ms: float = 0, num_async: int = 1) -> LocalIterator[T]:
        """Items as the workers produce them, in no fixed order.

        Each worker has up to `num_async` requests in flight; the next one is sent
        after its item was processed downstream, so that what a `for_each` does with an
        item (e.g. send weights to `current_actor`) reaches the worker first.
        `metrics.current_actor` is the item's worker. `batch_ms` is accepted (Ray's
        batching latency) and has no effect.
        """
        if num_async < 1:
            raise ValueError("queue depth must be positive")
        key = uuid.uuid4().hex
        args_for = self._first_args(key)
        local_iter: LocalIterator[Any]

        def base_iterator(timeout: float | None) -> Iterator[Any]:
            manager = AsyncRequestsManager(self.actors, num_async)
            started: set = set()

            def launch(worker: Any) -> None:
                while manager.num_in_flight(worker) < num_async:
                    manager.call(_next_shard_item, worker=worker, fn_args=args_for(worker, started))

            for w in manager.workers:
                launch(w)
            while manager.workers:
                wait = _GATHER_WAIT_S if timeout is None else timeout
                ready = manager.get_ready(wait)
                for worker, results in ready.items():
                    for item in results:
                        if isinstance(item, _ShardEnded):
                            manager.remove_workers([worker])
                            break
                        local_iter.shared_metrics.get().current_actor = worker
                        yield item
                    if worker in manager.workers:
                        launch(worker)
                if not ready and timeout is not None:
                    yield NextValueNotReady()

        local_iter = LocalIterator(base_iterator, name=f"{self}.gather_async()")
        return local_iter

    def take(self, n: int) -> list[T]:
        """The first `n` items of `gather_sync()`."""
        return self.gather_sync().take(n)

    def show(self, n: int = 20) -> None:
        """Prints the first `n` items of `gather_sync()`."""
        self.gather_sync().show(n)


def from_actors(actors: list[Any], name: str | None = None) -> ParallelIterator[Any]:
    """A `ParallelIterator` over rollout workers' handles (e.g.
    `workers.remote_workers()`): each shard yields its worker's `sample()`s."""
    return ParallelIterator(list(actors), [], name or f"from_actors[shards={len(actors)}]")


__all__ = [
    "LocalIterator",
    "MetricsContext",
    "NextValueNotReady",
    "ParallelIterator",
    "SharedMetrics",
    "from_actors",
    "next_ready",
]
