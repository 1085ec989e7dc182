"""RLlib 1.13's Ray actor utilities (`ray.rllib.utils.actors`), and its replay actors.

- :class:`TaskPool`: the in-flight remote calls of a set of actors, handed back as
  they finish (RLlib's asynchronous optimizers and Ape-X's replay loop use it);
- :func:`create_colocated_actors` / :func:`try_create_colocated` /
  :func:`split_colocated`: Ray actors placed on one node, by default the driver's
  (Ape-X's replay shards, IMPALA's aggregation workers), with the deprecated
  :func:`create_colocated` and :func:`drop_colocated`;
- :func:`replay_actor_class`: a replay buffer class as a Ray actor class (RLlib's
  ``ReplayActor`` names of the multi-agent buffer modules).

A node is named by its host name (``platform.node()``), as in RLlib: an actor's node is
what its ``get_host()`` method returns (RLlib's rollout workers and buffers have one);
for an actor class without ``get_host`` corral asks the actor process itself.

Ray is an extra of corral (`pip install "corral[ray]"`): this module imports without it,
and everything that talks to Ray raises an ``ImportError`` saying how to install it.
"""

from __future__ import annotations

import logging
import platform
from collections import defaultdict, deque
from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import Any

from corral.utils.deprecation import Deprecated

logger = logging.getLogger(__name__)

__all__ = [
    "TaskPool",
    "create_colocated",
    "create_colocated_actors",
    "drop_colocated",
    "import_ray",
    "replay_actor_class",
    "split_colocated",
    "try_create_colocated",
]

# RLlib's default `node`: the node (host name) of the process calling.
LOCALHOST = "localhost"


def import_ray(what: str) -> ModuleType:
    """Imports Ray for `what`, or raises an ImportError naming corral's `ray` extra.

    Args:
        what: what needs Ray, for the message (e.g. "corral.utils.actors.TaskPool").

    Raises:
        ImportError: Ray is not installed.
    """
    try:
        import ray
    except ImportError as e:
        raise ImportError(
            f"{what} needs Ray, which is not installed: pip install 'corral[ray]' "
            "(the `ray` extra)."
        ) from e
    return ray


class TaskPool:
    """The in-flight remote calls of several actors (workers), collected as they finish.

    Each call is added with the worker it was made on; :meth:`completed` hands back
    (worker, object refs) pairs of the calls that have finished.
    """

    def __init__(self) -> None:
        import_ray("corral.utils.actors.TaskPool")
        # First object ref of a call -> the worker it runs on / all its object refs.
        self._tasks: dict[Any, Any] = {}
        self._objects: dict[Any, Any] = {}
        # Finished calls not handed out yet by `completed_prefetch` (one deque for the
        # pool's lifetime: generators still running hold it).
        self._fetching: deque[tuple[Any, Any]] = deque()

    def add(self, worker: Any, all_obj_refs: Any) -> None:
        """Tracks a call made on `worker`: its object ref, or a list of them (the
        call's returns; the first one tells when the call finished)."""
        obj_ref = all_obj_refs[0] if isinstance(all_obj_refs, list) else all_obj_refs
        self._tasks[obj_ref] = worker
        self._objects[obj_ref] = all_obj_refs

    def completed(self, blocking_wait: bool = False) -> Iterator[tuple[Any, Any]]:
        """Yields (worker, object refs) of each finished call, which leaves the pool.

        Args:
            blocking_wait: when none has finished, wait (up to 10 s) for one.
        """
        pending = list(self._tasks)
        if not pending:
            return
        ray = import_ray("TaskPool.completed")
        ready, _ = ray.wait(pending, num_returns=len(pending), timeout=0)
        if not ready and blocking_wait:
            ready, _ = ray.wait(pending, num_returns=1, timeout=10.0)
        for obj_ref in ready:
            yield self._tasks.pop(obj_ref), self._objects.pop(obj_ref)

    def completed_prefetch(
        self, blocking_wait: bool = False, max_yield: int = 999
    ) -> Iterator[tuple[Any, Any]]:
        """As :meth:`completed`, at most `max_yield` at a time: finished calls beyond
        that are kept and handed out by the next calls (oldest first).

        Each call is assumed to have one object ref.
        """
        for worker, obj_ref in self.completed(blocking_wait=blocking_wait):
            self._fetching.append((worker, obj_ref))
        for _ in range(max_yield):
            if not self._fetching:
                break
            yield self._fetching.popleft()

    def reset_workers(self, workers: Sequence[Any]) -> None:
        """Forgets the calls of workers not in `workers` (e.g. after some were removed
        or recreated), finished or not."""
        for obj_ref, worker in list(self._tasks.items()):
            if worker not in workers:
                del self._tasks[obj_ref]
                del self._objects[obj_ref]
        for _ in range(len(self._fetching)):
            worker, obj_ref = self._fetching.popleft()
            if worker in workers:
                self._fetching.append((worker, obj_ref))

    @property
    def count(self) -> int:
        """Calls still in flight."""
        return len(self._tasks)


def _node(node: str | None) -> str | None:
    return platform.node() if node == LOCALHOST else node


def _this_host(_actor: Any) -> str:
    """Runs inside an actor (`__ray_call__`): the actor process's host name."""
    return platform.node()


def _hosts(ray: ModuleType, actors: Sequence[Any]) -> list[str]:
    """The host name of each actor (its `get_host()`, else asked of its process)."""
    refs = [
        a.get_host.remote() if hasattr(a, "get_host") else a.__ray_call__.remote(_this_host)
        for a in actors
    ]
    return list(ray.get(refs))


def _terminate(actors: Sequence[Any]) -> None:
    for actor in actors:
        actor.__ray_terminate__.remote()


def split_colocated(actors: Sequence[Any], node: str | None = LOCALHOST) -> tuple[list, list]:
    """Splits `actors` into those on `node` and the others.

    Args:
        actors: actor handles.
        node: a host name; "localhost" (the default) is the calling process's node;
            None: the largest group of actors that share a node (any node) counts as
            co-located.

    Returns:
        (co-located actors, the others), each in the order of `actors`.
    """
    ray = import_ray("corral.utils.actors.split_colocated")
    node = _node(node)
    hosts = _hosts(ray, actors)
    if node is None and hosts:
        groups: dict[str, int] = defaultdict(int)
        for host in hosts:
            groups[host] += 1
        node = max(groups, key=lambda h: groups[h])  # first-seen wins a tie
    local = [a for host, a in zip(hosts, actors) if host == node]
    others = [a for host, a in zip(hosts, actors) if host != node]
    return local, others


def try_create_colocated(
    cls: Any,
    args: Sequence[Any] | None,
    count: int,
    kwargs: dict[str, Any] | None = None,
    node: str | None = LOCALHOST,
) -> list:
    """Creates `count` actors of `cls` and keeps those placed on `node`.

    The others are terminated.

    Args:
        cls: an actor class (``ray.remote(...)`` of a class).
        args: its constructor's positional arguments (the same for each actor).
        count: how many actors to create.
        kwargs: its constructor's keyword arguments.
        node: as in :func:`split_colocated`.

    Returns:
        The co-located actors (maybe fewer than `count`).
    """
    import_ray("corral.utils.actors.try_create_colocated")
    actors = [cls.remote(*(args or ()), **(kwargs or {})) for _ in range(count)]
    local, others = split_colocated(actors, node=node)
    logger.info("Got %d colocated actors of %d.", len(local), count)
    _terminate(others)
    return local


def create_colocated_actors(
    actor_specs: Sequence[tuple[Any, Sequence[Any] | None, dict[str, Any] | None, int]],
    node: str | None = LOCALHOST,
    max_attempts: int = 10,
) -> list[list]:
    """Creates actors of one or more kinds, all on one node.

    Each attempt creates, for every spec still short of actors, `count` times the
    attempt's number of new actors, keeps those on the node and terminates the rest (and
    any beyond `count`), until every spec has its `count`.

    Args:
        actor_specs: (actor class, constructor args or None, constructor kwargs or None,
            count) per kind of actor.
        node: the node's host name; "localhost" (the default) is the calling process's
            node (the driver's); None: any node, the one where most of the first spec's
            actors land (all later actors join them).
        max_attempts: attempts before giving up.

    Returns:
        The actors of each spec, a list per spec in the order of `actor_specs` (RLlib's
        callers take ``[0]`` of a single spec).

    Raises:
        RuntimeError: `max_attempts` attempts left some spec short of actors (those
            created are terminated).
    """
    ray = import_ray("corral.utils.actors.create_colocated_actors")
    node = _node(node)
    ok: list[list] = [[] for _ in actor_specs]
    for attempt in range(1, max_attempts + 1):
        done = True
        for i, (cls, args, kwargs, count) in enumerate(actor_specs):
            if len(ok[i]) < count:
                new = try_create_colocated(cls, args, count * attempt, kwargs=kwargs, node=node)
                if node is None and new:
                    node = _hosts(ray, new[:1])[0]
                ok[i].extend(new)
                done = done and len(ok[i]) >= count
            if len(ok[i]) > count:
                _terminate(ok[i][count:])
                ok[i] = ok[i][:count]
        if done:
            return ok
    for actors in ok:
        _terminate(actors)
    wanted = [spec[3] for spec in actor_specs]
    raise RuntimeError(
        f"Could not create {wanted} actors all on node {node!r} in {max_attempts} attempts."
    )


@Deprecated(new="create_colocated_actors", error=False)
def create_colocated(cls: Any, args: Sequence[Any] | None, count: int) -> list:
    """`count` actors of `cls` on this node (use :func:`create_colocated_actors`)."""
    return create_colocated_actors([(cls, args, None, count)], node=LOCALHOST)[0]


@Deprecated(error=False)
def drop_colocated(actors: Sequence[Any]) -> list:
    """Terminates the actors on this node; returns the others."""
    local, others = split_colocated(actors)
    _terminate(local)
    return others


class _HostOf:
    """Gives a buffer actor RLlib's `get_host()` (used to co-locate replay shards)."""

    def get_host(self) -> str:
        """The host name of the actor's node."""
        return platform.node()


_replay_actors: dict[type, Any] = {}


def replay_actor_class(buffer_cls: type) -> Any:
    """`buffer_cls` as a Ray actor class taking no CPU (RLlib's ``ReplayActor``:
    ``ray.remote(num_cpus=0)(buffer_cls)``), with a `get_host()` method if the buffer
    lacks one. One class per buffer class (the same object on every call).

    Raises:
        ImportError: Ray is not installed.
    """
    actor_cls = _replay_actors.get(buffer_cls)
    if actor_cls is None:
        ray = import_ray(f"ReplayActor (a Ray actor of {buffer_cls.__name__})")
        cls = buffer_cls
        if not hasattr(cls, "get_host"):
            cls = type(buffer_cls.__name__, (buffer_cls, _HostOf), {})
        actor_cls = _replay_actors.setdefault(buffer_cls, ray.remote(num_cpus=0)(cls))
    return actor_cls
