"""The iterators of execution plans (corral.execution.local_iterator, Ray's ray.util.iter)."""

from __future__ import annotations

import itertools

import pytest

from corral.execution.common import _get_shared_metrics
from corral.execution.local_iterator import (
    LocalIterator,
    MetricsContext,
    NextValueNotReady,
    SharedMetrics,
    next_ready,
)


def items(values, name="items"):
    """A LocalIterator over `values` (RLlib's base iterators take a timeout argument)."""
    return LocalIterator(lambda _timeout: iter(values), SharedMetrics(), name=name)


def forever(start=0):
    return LocalIterator(lambda _timeout: itertools.count(start), SharedMetrics())


def test_transforms_are_lazy_and_chain():
    calls = []

    def double(x):
        calls.append(x)
        return 2 * x

    it = items(range(10)).for_each(double).filter(lambda x: x % 4 == 0)
    assert calls == []  # nothing runs before next()
    assert next(it) == 0 and calls == [0]
    assert it.take(3) == [4, 8, 12]
    assert list(items([[1, 2], [3]]).flatten()) == [1, 2, 3]
    assert list(items(range(5)).batch(2)) == [[0, 1], [2, 3], [4]]
    assert list(items([1, 2]).combine(lambda x: [x] * x)) == [1, 2, 2]
    assert "for_each" in repr(items([1]).for_each(abs))


def test_shuffle_keeps_every_item():
    out = list(items(range(20)).shuffle(5, seed=0))
    assert sorted(out) == list(range(20)) and out != list(range(20))


def test_show_prints_the_first_items(capsys):
    forever().show(3)
    assert capsys.readouterr().out.split() == ["0", "1", "2"]


def test_operators_share_one_metrics_context():
    def count(x):
        _get_shared_metrics().counters["seen"] += 1
        return x

    it = items(range(5)).for_each(count).filter(lambda x: x > 1).for_each(count)
    assert list(it) == [2, 3, 4]
    assert it.shared_metrics.get().counters["seen"] == 5 + 3
    with pytest.raises(ValueError, match="outside an iterator"):
        _get_shared_metrics()


def test_metrics_context_saves_and_restores():
    ctx = MetricsContext()
    ctx.counters["a"] += 3
    ctx.info["x"] = 1
    ctx.timers["t"].push(0.5)
    saved = ctx.save()
    other = MetricsContext()
    other.restore(saved)
    assert other.counters["a"] == 3 and other.info == {"x": 1} and not other.timers


def test_for_each_retries_a_function_that_is_not_ready():
    answers = iter([NextValueNotReady(), NextValueNotReady(), "done"])
    seen = []

    def not_ready_twice(x):
        seen.append(x)
        return next(answers)

    it = items([7]).for_each(not_ready_twice)
    out = list(it)
    assert seen == [7, 7, 7]  # the same item until it was taken
    assert isinstance(out[0], NextValueNotReady) and out[-1] == "done"
    answers = iter([NextValueNotReady(), "done"])
    assert next_ready(items([1]).for_each(lambda x: next(answers))) == "done"


def test_fetch_start_hook_runs_once_per_item():
    class Timed:
        def __init__(self):
            self.starts = 0

        def _on_fetch_start(self):
            self.starts += 1

        def __call__(self, x):
            return x

    fn = Timed()
    it = items([NextValueNotReady(), 1, NextValueNotReady(), 2]).for_each(fn)
    assert [x for x in it if not isinstance(x, NextValueNotReady)] == [1, 2]
    assert fn.starts == 3  # before item 1, before item 2, before the end


def test_duplicate_gives_every_item_to_each_copy():
    a, b = items(range(4)).duplicate(2)
    assert [next(a), next(a), next(b)] == [0, 1, 0]
    assert list(b) == [1, 2, 3] and list(a) == [2, 3]
    with pytest.raises(ValueError):
        items([1]).duplicate(1)


def test_deterministic_union_alternates_and_merges_metrics():
    def tag(name):
        def fn(x):
            _get_shared_metrics().counters[name] += 1
            return (name, x)

        return fn

    a = items(range(3)).for_each(tag("a"))
    b = items(range(2)).for_each(tag("b"))
    union = a.union(b, deterministic=True)
    assert list(union) == [("a", 0), ("b", 0), ("a", 1), ("b", 1), ("a", 2)]
    # One context for all: the inputs' counters are the union's.
    assert union.shared_metrics.get().counters == {"a": 3, "b": 2}
    assert a.shared_metrics.get() is union.shared_metrics.get()


def test_union_round_robin_weights():
    union = forever(0).union(forever(100), deterministic=True, round_robin_weights=[1, 3])
    assert union.take(8) == [0, 100, 101, 102, 1, 103, 104, 105]
    with pytest.raises(ValueError, match="Length of round robin weights"):
        forever().union(forever(), round_robin_weights=[1])
    with pytest.raises(ValueError):
        forever().union([1, 2])


def test_union_skips_inputs_that_are_not_ready():
    def sometimes(_timeout):
        for i in itertools.count():
            yield NextValueNotReady() if i % 2 else ("slow", i)

    slow = LocalIterator(sometimes, SharedMetrics())
    # Deterministic: a not-ready input is skipped for this round, never waited on.
    union = slow.union(forever(), deterministic=True)
    out = union.take(6)
    assert out == [("slow", 0), 0, 1, ("slow", 2), 2, 3]
    # Asynchronous: one ready item of each input per round, as Ray's (default weight 1).
    out = LocalIterator(sometimes, SharedMetrics()).union(items([10, 11])).take(4)
    assert out == [("slow", 0), 10, 11, ("slow", 2)]
    assert forever(0).union(forever(100)).take(4) == [0, 100, 1, 101]


def test_union_reads_star_weighted_inputs_without_waiting():
    """Given weights override `deterministic` (Ray's rule): a "*" input is read with
    timeout 0 (it must not block to fill its share), the others with None (waited for)."""
    seen = {}

    def recording(name):
        def base(timeout):
            seen[name] = timeout
            return itertools.count()

        return LocalIterator(base, SharedMetrics())

    union = recording("a").union(recording("b"), deterministic=True, round_robin_weights=[1, "*"])
    union.take(3)
    assert seen == {"a": None, "b": 0}
    recording("a").union(recording("b"), round_robin_weights=[2, 1]).take(3)
    assert seen == {"a": None, "b": None}
    recording("a").union(recording("b")).take(3)
    assert seen == {"a": 0, "b": 0}


def test_zip_with_source_actor_needs_an_actor():
    it = items([1]).zip_with_source_actor()
    with pytest.raises(ValueError, match="source actor"):
        next(it)
    it = items([1]).zip_with_source_actor()
    it.shared_metrics.get().current_actor = "worker-1"
    assert next(it) == ("worker-1", 1)
