"""The "ray" backend: remote rollout workers as Ray actors.

`RayWorker` is the same small handle as the local backend's `ProcessWorker`
(`call`, `apply`, `wait_ready`, `is_alive`, `stop`, `kill`, futures with
`result(timeout)`), so `WorkerSet` and the trainer do not know which backend
runs their workers. Ray core does the work: one actor per worker, placed in a
placement group bundle (`placement_strategy`, one bundle of
`num_cpus_per_worker` CPUs, `num_gpus_per_worker` GPUs and
`custom_resources_per_worker` per worker), results as object refs.

Ray is an optional dependency (`pip install "corral[ray]"`): nothing here
imports it until a worker set with `backend="ray"` starts. When Ray is not
initialised yet, corral calls `ray.init()`, which joins the cluster named by
`RAY_ADDRESS` if one is set and otherwise starts a local Ray instance.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import time
from collections.abc import Callable
from types import ModuleType
from typing import TYPE_CHECKING, Any

import cloudpickle

if TYPE_CHECKING:
    import ray
    from ray.util.placement_group import PlacementGroup

from corral.evaluation.backend import RemoteWorkerError, WorkerCrashedError, timeout_error
from corral.evaluation.worker_handle import Placement, RemoteMethod, ServedWorker, WorkerSpec
from corral.utils.child_process import prepare_worker_process

RAY_MISSING = (
    "backend='ray' needs Ray, which is not installed: `pip install \"corral[ray]\"` "
    "(or `pip install ray`), or use backend='local' (worker processes on this machine)."
)


def ray_available() -> bool:
    """Whether Ray can be imported (without importing it)."""
    return importlib.util.find_spec("ray") is not None


def _ray() -> ModuleType:
    if not ray_available():
        raise ImportError(RAY_MISSING)
    import ray

    if not ray.is_initialized():
        ray.init()
    return ray


class _RolloutActor:
    """Lives in a Ray worker process and holds one `RolloutWorker` (or learner).

    Args:
        factory: the cloudpickled `WorkerSpec.factory` (it may be a closure), unpickled
            after the environment is set (its modules may read it at import).
        env_vars: as `WorkerSpec.env_vars`.
        num_threads: as `WorkerSpec.num_threads`.
    """

    def __init__(self, factory: bytes, env_vars: dict[str, str], num_threads: int) -> None:
        prepare_worker_process(env_vars, num_threads)
        self._worker: ServedWorker | None = None
        self._error: BaseException | None = None
        try:
            self._worker = cloudpickle.loads(factory)()
        except BaseException as e:  # noqa: BLE001 - reported by ready()
            self._error = e

    def ready(self) -> int:
        """The actor's pid once the worker is built; raises what its constructor raised."""
        if self._error is not None:
            raise self._error
        return os.getpid()

    def call(self, method: str, args: tuple, kwargs: dict) -> Any:
        return getattr(self._worker, method)(*args, **kwargs)

    def apply(self, func: bytes, args: tuple, kwargs: dict) -> Any:
        return cloudpickle.loads(func)(self._worker, *args, **kwargs)

    def stop(self) -> None:
        if self._worker is not None:
            self._worker.stop()


_actor_classes: dict[str, Any] = {}


def _actor_class(ray: ModuleType) -> Any:
    """The Ray actor class of `_RolloutActor` (made once per process)."""
    if "actor" not in _actor_classes:
        _actor_classes["actor"] = ray.remote(_RolloutActor)
    return _actor_classes["actor"]


def ray_actor_class(cls: type, **options: Any) -> Any:
    """`cls` as a Ray actor class with these `ray.remote` options (None ones left out):
    RLlib 1.13's `RolloutWorker.as_remote`. Ray is not initialised here.

    Raises:
        ImportError: Ray is not installed.
    """
    if not ray_available():
        raise ImportError(
            f"{cls.__name__}.as_remote() builds a Ray actor class and needs Ray, which is "
            'not installed: `pip install "corral[ray]"`. Trainers run their workers '
            "without Ray by default (backend='local')."
        )
    import ray

    given = {k: v for k, v in options.items() if v is not None}
    # (`ray.remote()` with no options is refused by Ray: then the bare decorator.)
    return ray.remote(**given)(cls) if given else ray.remote(cls)


def is_bare_actor(obj: Any) -> bool:
    """Whether `obj` is a Ray actor handle itself (a worker built with
    `RolloutWorker.as_remote().remote(...)`, RLlib 1.13's hand-built workers), not one
    of corral's worker handles. Never imports Ray."""
    import sys

    ray_actor = sys.modules.get("ray.actor")
    return ray_actor is not None and isinstance(obj, ray_actor.ActorHandle)


class BareActorFuture:
    """The pending result of a method called on a bare Ray actor (see `is_bare_actor`):
    `wait_all`'s future. Its errors are Ray's own, as RLlib 1.13's `ray.get` gave them."""

    __slots__ = ("_ref",)

    def __init__(self, actor: Any, method: str, *args: Any, **kwargs: Any) -> None:
        self._ref = getattr(actor, method).remote(*args, **kwargs)

    def done(self) -> bool:
        """Whether the call has finished; never blocks."""
        ready, _ = _ray().wait([self._ref], timeout=0)
        return bool(ready)

    def default_timeout(self) -> float | None:
        """None: a bare actor has no call timeout of corral's."""
        return None

    def result(self, timeout: float | None = None, *, _since: float | None = None) -> Any:
        """`ray.get` of the call's object ref."""
        return _ray().get(self._ref, timeout=timeout)


class RayFuture:
    """The pending result of one call on a Ray actor (wraps its object ref)."""

    __slots__ = ("_handle", "_ref", "_what")

    def __init__(self, handle: RayWorker, ref: ray.ObjectRef, what: str = "call") -> None:
        self._handle, self._ref, self._what = handle, ref, what

    def done(self) -> bool:
        """Whether the call has finished (returned or failed); never blocks."""
        ready, _ = self._handle._ray.wait([self._ref], timeout=0)
        return bool(ready)

    def default_timeout(self) -> float | None:
        """How long `result()` waits when given no timeout."""
        return self._handle.call_timeout_s

    def result(self, timeout: float | None = None, *, _since: float | None = None) -> Any:
        """Waits for the call; raises `WorkerFailure` subclasses as the local backend does.

        Without a timeout it waits the handle's `call_timeout_s`; past the
        limit, `WorkerTimeoutError` (the actor is treated as failed).
        """
        ray = self._handle._ray
        if timeout is None:
            timeout = self.default_timeout()
        try:
            return ray.get(self._ref, timeout=timeout)
        except ray.exceptions.GetTimeoutError:
            # (Only a finite wait ends here: `timeout` is a number.)
            waited = float(timeout or 0.0) if _since is None else time.monotonic() - _since
            raise timeout_error(self._handle, self._what, waited) from None
        except ray.exceptions.RayActorError as e:
            raise self._handle._crashed(e) from None
        except ray.exceptions.RayTaskError as e:
            cause = e.cause if isinstance(e.cause, BaseException) else e
            # str(e) is Ray's report of the failed call, with the actor's traceback.
            raise RemoteWorkerError(
                f"Rollout worker {self._handle.worker_index} (Ray actor, pid "
                f"{self._handle.pid}) raised {type(cause).__name__}: {cause}\n"
                f"--- traceback in the worker ---\n{e}",
                self._handle.worker_index,
                self._handle,
            ) from None


class RayWorker:
    """A `RolloutWorker` (or learner) in a Ray actor; a `WorkerHandle`, as `ProcessWorker`.

    Args:
        spec: the worker to start (index, factory, environment, threads, call timeout).
        resources: Ray actor options (`num_cpus`, `num_gpus`, `resources`).
        placement: (placement group, bundle index) to schedule the actor in.
    """

    def __init__(
        self,
        spec: WorkerSpec,
        *,
        resources: dict[str, Any] | None = None,
        placement: Placement | None = None,
    ) -> None:
        self._ray = _ray()
        self.worker_index = spec.worker_index
        self.call_timeout_s = spec.call_timeout_s
        self.pid: int | None = None
        self._dead: WorkerCrashedError | None = None
        options: dict[str, Any] = {"max_restarts": 0, **(resources or {})}
        if placement is not None:
            from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

            group, bundle = placement
            options["scheduling_strategy"] = PlacementGroupSchedulingStrategy(
                placement_group=group, placement_group_bundle_index=bundle
            )
        self._actor = (
            _actor_class(self._ray)
            .options(**options)
            .remote(cloudpickle.dumps(spec.factory), spec.env_vars, spec.num_threads)
        )
        self._ready: RayFuture | None = RayFuture(self, self._actor.ready.remote(), "start")

    def wait_ready(self, timeout: float | None = None) -> None:
        """Blocks until the worker is built (raises what its constructor raised)."""
        if self._ready is not None:
            self.pid = self._ready.result(timeout)

    # A handle pickled into another Ray process (a tree-aggregation actor calls the
    # rollout workers it was given) reaches the same actor; the Ray module and the
    # start-up future stay behind (the sender waited for that).
    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        del state["_ray"]
        state["_ready"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._ray = _ray()

    # -- calls --------------------------------------------------------------

    def call(self, method: str, *args: Any, **kwargs: Any) -> RayFuture:
        """Runs `worker.<method>(*args, **kwargs)` in the actor."""
        return RayFuture(self, self._actor.call.remote(method, args, kwargs), method)

    def apply(self, func: Callable, *args: Any, **kwargs: Any) -> RayFuture:
        """Runs `func(worker, *args, **kwargs)` in the actor."""
        return RayFuture(
            self, self._actor.apply.remote(cloudpickle.dumps(func), args, kwargs), "apply"
        )

    def __getattr__(self, name: str) -> RemoteMethod:
        if name.startswith("_"):
            raise AttributeError(name)
        return RemoteMethod(self, name)

    def _crashed(self, cause: BaseException) -> WorkerCrashedError:
        if self._dead is None:
            first_line = (str(cause).strip().splitlines() or [repr(cause)])[0]
            self._dead = WorkerCrashedError(
                f"Rollout worker {self.worker_index} (Ray actor, pid {self.pid}) died: "
                f"{first_line}",
                self.worker_index,
                self,
            )
        return self._dead

    # -- lifecycle ----------------------------------------------------------

    def is_alive(self) -> bool:
        """False once a call has found the actor dead (`probe` with a `ping` to check now)."""
        return self._dead is None

    def stop(self, timeout: float = 2.0) -> None:
        """Asks the worker to close its envs, then ends the actor."""
        if self._dead is None:
            with contextlib.suppress(Exception):  # the actor is killed anyway
                self._ray.get(self._actor.stop.remote(), timeout=timeout)
        self.kill()

    def kill(self) -> None:
        """Ends the actor at once (no restart); later calls fail as crashed."""
        self._ray.kill(self._actor, no_restart=True)
        if self._dead is None:
            self._dead = WorkerCrashedError(
                f"Rollout worker {self.worker_index} was stopped.", self.worker_index
            )

    def __repr__(self) -> str:
        return f"RayWorker(index={self.worker_index}, pid={self.pid})"


class RayPlacement:
    """Placement groups for a worker set's actors: one bundle per worker.

    Each `add_workers` call reserves a group for its new workers (all or
    nothing, with `placement_strategy`); a recreated worker goes back into
    the bundle of the one it replaces.

    Inside a Ray Tune trial, whose placement group Tune reserved from
    `Trainer.default_resource_request` (driver, rollout workers, evaluation workers,
    learners, in that order), the actors go into the trial's own bundles instead:
    `trial_offset` is the bundle of this set's first actor (index `first_index`), and
    nothing is reserved twice.
    """

    def __init__(
        self,
        strategy: str,
        bundle: dict[str, float],
        trial_offset: int | None = None,
        first_index: int = 1,
    ) -> None:
        self._ray = _ray()
        self._strategy = strategy
        self._bundle = bundle
        self._groups: list[PlacementGroup] = []
        self._by_index: dict[int, Placement] = {}
        self._trial_offset = trial_offset
        self._first_index = first_index

    def _trial_bundles(self, indices: list[int]) -> list[Placement] | None:
        """(the trial's group, bundle) per index when running inside a Tune trial
        whose bundles at this set's offset match this set's bundle; else None."""
        if self._trial_offset is None:
            return None
        group = self._ray.util.get_current_placement_group()
        if group is None:
            return None
        places = [(group, self._trial_offset + i - self._first_index) for i in indices]
        specs = group.bundle_specs
        wanted = {k: float(v) for k, v in self._bundle.items()}
        for _, bundle in places:
            if bundle >= len(specs):
                return None
            have = {k: float(v) for k, v in specs[bundle].items() if k in wanted or v}
            if have != wanted:
                return None
        return places

    def reserve(self, indices: list[int], timeout: float) -> None:
        """Reserves one bundle per index (or takes the Tune trial's), waiting up to `timeout` s."""
        from ray.util.placement_group import placement_group

        in_trial = self._trial_bundles(indices)
        if in_trial is not None:
            self._by_index.update(zip(indices, in_trial))
            return
        group = placement_group([dict(self._bundle) for _ in indices], strategy=self._strategy)
        ready, _ = self._ray.wait([group.ready()], timeout=timeout)
        if not ready:
            self._ray.util.remove_placement_group(group)
            raise TimeoutError(
                f"Ray could not reserve {len(indices)} x {self._bundle} "
                f"({self._strategy}) for the remote workers or learners within {timeout} s; "
                f"the cluster has {self._ray.available_resources()} available."
            )
        self._groups.append(group)
        for k, index in enumerate(indices):
            self._by_index[index] = (group, k)

    def of(self, index: int) -> Placement | None:
        """The placement of the worker (or learner) with this index, if reserved."""
        return self._by_index.get(index)

    def release(self) -> None:
        """Removes the placement groups this object reserved."""
        for group in self._groups:
            with contextlib.suppress(Exception):  # the cluster may be gone already
                self._ray.util.remove_placement_group(group)
        self._groups.clear()
        self._by_index.clear()
