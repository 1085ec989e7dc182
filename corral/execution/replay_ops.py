"""Replay in execution plans (RLlib 1.13's `execution.replay_ops`).

`StoreToReplayBuffer` (a `for_each` function) adds batches to a buffer, or to Ray replay
actors (`ReplayActor`); `Replay` is an iterator of batches sampled from it (them), not
ready while there is none to give (run the two together with `Concurrently`).
`MixInReplay` mixes replayed batches into a stream of new ones, drawn from its
`SimpleReplayBuffer` (a ring of whole batches).
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from typing import Any

from corral.execution.common import STEPS_SAMPLED_COUNTER, _get_shared_metrics
from corral.execution.local_iterator import LocalIterator, NextValueNotReady
from corral.utils.replay_buffers.simple_replay_buffer import SimpleReplayBuffer as _BatchRing


def _check_one_source(local_buffer: Any, actors: Any) -> None:
    if (local_buffer is None) == (actors is None):
        raise ValueError("Exactly one of `local_buffer` and `actors` must be given.")
    if actors is not None and not actors:
        raise ValueError("`actors` must hold at least one replay actor.")


class StoreToReplayBuffer:
    """A `for_each` function that adds each batch to `local_buffer`, or to one of the
    replay `actors` drawn at random (Ray actors, e.g. of `ReplayActor`: the call is not
    waited for), and returns it.

    The buffer's `add` is used where it has one, else its `add_batch` (RLlib 1.13's
    execution buffers); an actor's `add`.
    """

    def __init__(self, *, local_buffer: Any = None, actors: Any = None) -> None:
        _check_one_source(local_buffer, actors)
        self.local_actor = local_buffer
        self.replay_actors = None if actors is None else list(actors)
        self._add = None if local_buffer is None else _add_method(local_buffer)
        # (An actor's missing method would only fail inside the call, which is not waited
        # for: each actor's is looked up here.)
        self._actor_adds = [_add_method(a) for a in self.replay_actors or ()]

    def __call__(self, batch: Any) -> Any:
        if self._add is not None:
            self._add(batch)
        else:
            random.choice(self._actor_adds).remote(batch)
        return batch


def _add_method(buffer: Any) -> Any:
    """A buffer's (or a buffer actor's) `add`, else its `add_batch` (RLlib 1.13's
    execution buffers)."""
    add = getattr(buffer, "add", None)
    return add if add is not None else buffer.add_batch


def Replay(  # noqa: N802 (RLlib's name)
    *,
    local_buffer: Any = None,
    num_items_to_replay: int | None = None,
    actors: Any = None,
    num_async: int = 4,
) -> LocalIterator[Any]:
    """Batches sampled from `local_buffer`, one per `next()`, or from the replay `actors`
    as their samples arrive; not ready (see `NextValueNotReady`) while there is none to
    give (an empty buffer, or one before its `learning_starts`).

    Args:
        local_buffer: the buffer.
        num_items_to_replay: items per batch, sampled with `sample(n)`; None calls the
            buffer's `replay()` (`replay_batch_size` items of RLlib's multi-agent
            buffers; pass a number for a buffer whose `replay` needs one).
        actors: Ray actors of replay buffers (e.g. of `ReplayActor`), sampled
            asynchronously (RLlib's `gather_async`): each keeps `num_async` requests in
            flight, and batches come in the order they are ready.
        num_async: requests in flight per replay actor (with `actors`).
    """
    _check_one_source(local_buffer, actors)
    if actors is not None:
        return _replay_from_actors(list(actors), num_items_to_replay, num_async)

    def draw() -> Any:
        if num_items_to_replay is None:
            return local_buffer.replay()
        return local_buffer.sample(num_items_to_replay)

    def gen_replay(_timeout: float | None) -> Iterator[Any]:
        while True:
            if _is_empty(local_buffer):
                yield NextValueNotReady()
                continue
            item = draw()
            if _is_nothing(item):
                yield NextValueNotReady()
            else:
                yield item

    return LocalIterator(gen_replay, name="Replay")


def _replay_from_actors(
    actors: list[Any], num_items: int | None, num_async: int
) -> LocalIterator[Any]:
    if num_async < 1:
        raise ValueError(f"num_async must be >= 1, got {num_async}.")
    from corral.utils.actors import import_ray

    ray = import_ray("Replay(actors=...)")

    def request(actor: Any) -> Any:
        return actor.replay.remote() if num_items is None else actor.sample.remote(num_items)

    def gen_replay(timeout: float | None) -> Iterator[Any]:
        in_flight = {request(a): a for a in actors for _ in range(num_async)}
        while True:
            # Without a timeout (a deterministic union), wait for the next one to arrive.
            ready, _ = ray.wait(list(in_flight), num_returns=1, timeout=timeout)
            if not ready:
                yield NextValueNotReady()
                continue
            actor = in_flight.pop(ready[0])
            in_flight[request(actor)] = actor
            item = ray.get(ready[0])
            yield NextValueNotReady() if _is_nothing(item) else item

    return LocalIterator(gen_replay, name="Replay(actors)")


def _is_nothing(item: Any) -> bool:
    """A replay that gave nothing (None, or an empty batch)."""
    return item is None or getattr(item, "count", 1) == 0


def _is_empty(buffer: Any) -> bool:
    try:
        return len(buffer) == 0
    except TypeError:  # a buffer without a length answers None while it is empty
        return False


class WaitUntilTimestepsElapsed:
    """A `filter` function: true once more than `target_num_timesteps` steps were
    sampled."""

    def __init__(self, target_num_timesteps: int) -> None:
        self.target_num_timesteps = target_num_timesteps

    def __call__(self, item: Any) -> bool:
        return _get_shared_metrics().counters[STEPS_SAMPLED_COUNTER] > self.target_num_timesteps


class SimpleReplayBuffer(_BatchRing):
    """RLlib 1.x's ring of the last `num_slots` batches; `replay()` returns one of them
    drawn uniformly (`corral.utils.replay_buffers.SimpleReplayBuffer` with RLlib 1.x's
    `add_batch` / `replay` calls). With `num_slots` 0 nothing is kept.

    Args:
        num_slots: batches kept.
        replay_proportion: kept for RLlib's signature.
        seed: seed of the draws.
    """

    def __init__(
        self, num_slots: int, replay_proportion: float | None = None, seed: int | None = None
    ) -> None:
        super().__init__(capacity=max(1, num_slots), seed=seed)
        self.num_slots = num_slots

    def add(self, batch: Any, **kwargs: Any) -> Any:
        if self.num_slots > 0:
            super().add(batch, **kwargs)

    def add_batch(self, batch: Any, **kwargs: Any) -> None:
        self.add(batch, **kwargs)

    def replay(self, num_items: int = 1, **kwargs: Any) -> Any:  # type: ignore[override]
        """One of the kept batches."""
        return self.sample()


class MixInReplay:
    """A `for_each` function that keeps each new batch among the last `num_slots` ones
    (`replay_buffer`, a `SimpleReplayBuffer`) and returns it with `replay_proportion`
    batches drawn uniformly from them on average, the new one included (a list: use
    `.flatten()`), as RLlib 1.13's: the integer part of the proportion always, one more
    with the probability of its fraction.

    Raises:
        ValueError: `replay_proportion > 0` with `num_slots` 0.
    """

    def __init__(self, num_slots: int, replay_proportion: float, seed: int | None = None) -> None:
        if replay_proportion > 0 and num_slots == 0:
            raise ValueError("You must set num_slots > 0 if replay_proportion > 0.")
        self.replay_buffer = SimpleReplayBuffer(num_slots, seed=seed)
        self.replay_proportion = replay_proportion
        self._rng = random.Random(seed)

    def __call__(self, batch: Any) -> list[Any]:
        self.replay_buffer.add_batch(batch)
        out = [batch]
        if self.replay_proportion > 0:
            whole = int(self.replay_proportion)
            extra = self._rng.random() < self.replay_proportion - whole
            out += [self.replay_buffer.replay() for _ in range(whole + extra)]
        return out


__all__ = [
    "MixInReplay",
    "Replay",
    "SimpleReplayBuffer",
    "StoreToReplayBuffer",
    "WaitUntilTimestepsElapsed",
]
