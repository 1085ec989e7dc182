"""Running several operators of an execution plan together (RLlib 1.13's
`execution.concurrency_ops`): `Concurrently` interleaves iterators; `Enqueue` and
`Dequeue` pass items through a `queue.Queue` to and from a thread (a learner thread).
"""

from __future__ import annotations

import queue
from collections.abc import Callable, Iterator
from typing import Any

from corral.execution.local_iterator import LocalIterator, NextValueNotReady

# How long Enqueue / Dequeue wait on their queue before answering "not ready" (s).
_QUEUE_WAIT_S = 0.001


def Concurrently(  # noqa: N802 (RLlib's name)
    ops: list[LocalIterator[Any]],
    *,
    mode: str = "round_robin",
    output_indexes: list[int] | None = None,
    round_robin_weights: list[float | str] | None = None,
) -> LocalIterator[Any]:
    """Runs `ops` together: one iterator whose `next()` advances them in turn.

    Args:
        ops: two or more iterators.
        mode: "round_robin": in order, each op's items (`round_robin_weights` of them
            per round, default 1), waiting for each; "async": whatever each op has
            ready, skipping ops that have nothing ready.
        output_indexes: the ops whose items are returned (default: all); the others run
            for their effects (e.g. storing into a replay buffer).
        round_robin_weights: items per round from each op ("*": as many as it has
            ready); round_robin mode only.

    Raises:
        ValueError: fewer than two ops, an unknown mode, weights in async mode, all
            weights "*", or an output index out of range.
    """
    if len(ops) < 2:
        raise ValueError("Should specify at least 2 ops.")
    if mode == "round_robin":
        deterministic = True
    elif mode == "async":
        deterministic = False
        if round_robin_weights:
            raise ValueError("round_robin_weights cannot be specified in async mode")
    else:
        raise ValueError(f"Unknown mode {mode!r}: expected 'round_robin' or 'async'.")
    if round_robin_weights and all(w == "*" for w in round_robin_weights):
        raise ValueError("Cannot specify all round robin weights = *")
    if output_indexes:
        for i in output_indexes:
            if not 0 <= i < len(ops):
                raise ValueError(f"Index out of range: {i} (there are {len(ops)} ops).")
        ops = [_tagged(op, i) for i, op in enumerate(ops)]
    output = ops[0].union(
        *ops[1:], deterministic=deterministic, round_robin_weights=round_robin_weights
    )
    if output_indexes:
        wanted = set(output_indexes)
        output = output.filter(lambda tagged: tagged[0] in wanted).for_each(lambda t: t[1])
    return output


def _tagged(op: LocalIterator[Any], index: int) -> LocalIterator[tuple[int, Any]]:
    return op.for_each(lambda item: (index, item))


class Enqueue:
    """A `for_each` function that puts each item into `output_queue` and returns it
    (not ready, and retried, while the queue is full)."""

    def __init__(self, output_queue: queue.Queue) -> None:
        if not isinstance(output_queue, queue.Queue):
            raise ValueError(f"Expected queue.Queue, got {type(output_queue)}")
        self.queue = output_queue

    def __call__(self, item: Any) -> Any:
        try:
            self.queue.put(item, timeout=_QUEUE_WAIT_S)
        except queue.Full:
            return NextValueNotReady()
        return item


def Dequeue(  # noqa: N802 (RLlib's name)
    input_queue: queue.Queue, check: Callable[[], bool] = lambda: True
) -> LocalIterator[Any]:
    """The items put into `input_queue` (by a thread); not ready while it is empty.

    Args:
        input_queue: the queue to read.
        check: called before each read; once it returns False (e.g. the thread died),
            the iterator raises RuntimeError.
    """
    if not isinstance(input_queue, queue.Queue):
        raise ValueError(f"Expected queue.Queue, got {type(input_queue)}")

    def base_iterator(_timeout: float | None) -> Iterator[Any]:
        while check():
            try:
                yield input_queue.get(timeout=_QUEUE_WAIT_S)
            except queue.Empty:
                yield NextValueNotReady()
        raise RuntimeError(
            "Dequeue `check()` returned False! Exiting with Exception from Dequeue iterator."
        )

    return LocalIterator(base_iterator, name="Dequeue")


__all__ = ["Concurrently", "Dequeue", "Enqueue"]
