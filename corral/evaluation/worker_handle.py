"""The worker-handle contract: what the driver may do with a worker that lives elsewhere.

A remote rollout worker (or data-parallel learner) is reached through a handle that
returns futures. Two backends provide handles: `backend.ProcessWorker` (a child
process of this machine, backend="local") and `ray_backend.RayWorker` (a Ray actor,
backend="ray"); the driver's GPU learner has a third, in-process one
(`core.learner.distributed.InProcessLearner`). `WorkerSet`, `LearnerGroup` and the
trainer's recovery see only `WorkerHandle` and `WorkerFuture`, and mypy checks that
every backend's handle satisfies them.

`start_worker` is the one place that picks the backend: callers describe the worker
(`WorkerSpec`) and get a handle back.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ray.util.placement_group import PlacementGroup

# Where a Ray actor goes: (placement group, bundle index).
Placement = tuple["PlacementGroup", int]


class ServedWorker(Protocol):
    """What a `WorkerSpec.factory` builds (a `RolloutWorker`, a `LearnerWorker`): the
    object whose methods a handle's `call` runs; `stop()` runs before its process ends."""

    def stop(self) -> None:
        """Releases what the worker holds (envs, process groups)."""
        ...


class WorkerFuture(Protocol):
    """The pending result of one call on a worker."""

    def done(self) -> bool:
        """Whether the call has finished (returned or failed); never blocks."""
        ...

    def default_timeout(self) -> float | None:
        """How long `result()` waits when given no timeout (the handle's `call_timeout_s`)."""
        ...

    def result(self, timeout: float | None = None, *, _since: float | None = None) -> Any:
        """Waits for the call and returns its value.

        Args:
            timeout: seconds to wait; None: `default_timeout()`.
            _since: when the wait began (`time.monotonic()`), for the message of a
                timeout shared by several futures (`backend.wait_all`).

        Raises:
            WorkerFailure: the worker died (`WorkerCrashedError`), the call raised in
                it (`RemoteWorkerError`) or did not finish in time
                (`WorkerTimeoutError`, also a `TimeoutError`).
        """
        ...


class WorkerHandle(Protocol):
    """A worker in another process (or actor): calls on it return `WorkerFuture`s.

    Attributes:
        worker_index: the worker's index in its set (1..n; learner k has k + 1).
        call_timeout_s: how long a future's `result()` waits by default.
        pid: the worker's process id (None until known, e.g. before a Ray actor
            answered `wait_ready`).
    """

    @property
    def worker_index(self) -> int:
        """The worker's index in its set."""
        ...

    @property
    def call_timeout_s(self) -> float:
        """How long a future's `result()` waits by default."""
        ...

    @property
    def pid(self) -> int | None:
        """The worker's process id (None until known)."""
        ...

    def wait_ready(self, timeout: float | None = None) -> None:
        """Blocks until the worker is built; raises what building it raised."""
        ...

    def call(self, method: str, *args: Any, **kwargs: Any) -> WorkerFuture:
        """Runs `worker.<method>(*args, **kwargs)` in the worker."""
        ...

    def apply(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> WorkerFuture:
        """Runs `func(worker, *args, **kwargs)` in the worker."""
        ...

    def is_alive(self) -> bool:
        """False once the worker is known to be dead (without asking it)."""
        ...

    def stop(self, timeout: float = 2.0) -> None:
        """Asks the worker to clean up and exit; kills it if it does not in time."""
        ...

    def kill(self) -> None:
        """Ends the worker at once (a hung or stopped one too)."""
        ...


@dataclass(frozen=True)
class WorkerSpec:
    """What both backends need to start one worker.

    Attributes:
        worker_index: the worker's index in its set (1..n).
        factory: builds the worker inside its process (called with no arguments;
            the Ray backend cloudpickles it, so closures and lambdas are fine).
        env_vars: extra environment variables there (`extra_python_environs_for_worker`).
        num_threads: torch threads there (`num_cpus_per_worker`, `num_cpus_per_learner`).
        call_timeout_s: how long `result()` of a call waits by default
            (`sample_timeout_s`); past it the worker is treated as failed.
    """

    worker_index: int
    factory: Callable[[], ServedWorker]
    env_vars: dict[str, str] = field(default_factory=dict)
    num_threads: int = 1
    call_timeout_s: float = 600.0


def start_worker(
    spec: WorkerSpec,
    backend: str = "local",
    *,
    resources: dict[str, Any] | None = None,
    placement: Placement | None = None,
) -> WorkerHandle:
    """Starts the worker of `spec` on `backend` and returns its handle (does not wait).

    Args:
        spec: the worker to start.
        backend: "local" (a child process of this machine) or "ray" (a Ray actor).
        resources: the Ray actor's options (`num_cpus`, `num_gpus`, `resources`);
            not used by "local".
        placement: (placement group, bundle index) to schedule the Ray actor in;
            not used by "local".

    Raises:
        ValueError: `backend` is neither "local" nor "ray".
    """
    if backend == "ray":
        from corral.evaluation.ray_backend import RayWorker

        return RayWorker(spec, resources=resources, placement=placement)
    if backend == "local":
        from corral.evaluation.backend import ProcessWorker

        _warn_if_ray_is_initialised()
        return ProcessWorker(spec)
    raise ValueError(f"backend must be 'local' or 'ray', got {backend!r}.")


def _warn_if_ray_is_initialised() -> None:
    """Warns once when this process has called `ray.init()` and starts local workers:
    they are forked processes, in which Ray cannot be used (an env that asks Ray for an
    actor, as RLlib 1.x envs could in Ray's workers, hangs there until the start-up
    timeout). Never imports Ray."""
    import sys

    ray = sys.modules.get("ray")
    is_initialized = getattr(ray, "is_initialized", None)
    if is_initialized is None or not is_initialized():
        return
    from corral.utils.deprecation import log_once

    if log_once("local_workers_with_ray_initialised"):
        import logging

        logging.getLogger(__name__).warning(
            "Ray is initialised in this process, but remote workers start with "
            "backend='local': as forked processes, in which Ray cannot be used (an env "
            'or callback of theirs that calls Ray hangs). Set "backend": "ray" to '
            "run them as Ray actors, as RLlib 1.x did."
        )


def wait_all_ready(handles: Sequence[WorkerHandle], timeout: float | None) -> None:
    """Waits until each of the just-started `handles` is built; if one fails to start,
    ends them all (none is left running half a set) and raises its error."""
    try:
        for handle in handles:
            handle.wait_ready(timeout)
    except BaseException:
        for handle in handles:
            handle.kill()
        raise


class RemoteMethod:
    """RLlib-style `handle.<method>.remote(*args)`: `handle.call("<method>", *args)`."""

    def __init__(self, handle: WorkerHandle, name: str) -> None:
        self._handle, self._name = handle, name

    def remote(self, *args: Any, **kwargs: Any) -> WorkerFuture:
        """`handle.call(name, *args, **kwargs)`."""
        return self._handle.call(self._name, *args, **kwargs)
