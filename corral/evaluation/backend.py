"""Where remote workers run, behind one small handle interface.

A handle runs methods of a `RolloutWorker` that lives elsewhere and returns
`Future`s: `handle.call("sample")`, `handle.apply(fn)` (runs `fn(worker)`
there), `handle.kill()`, `handle.is_alive()`. RLlib-style
`handle.sample.remote()` works too. The rest of corral only sees this
interface, so the "local" backend (processes on this machine, below) and the
"ray" backend (Ray actors) are interchangeable.

The local backend forks worker processes (start-up in milliseconds, and env
creators that are lambdas or closures need no pickling). Each handle has a
reader thread that drains replies, so a large request and a large reply can
never block each other.
"""

from __future__ import annotations

import collections
import contextlib
import multiprocessing as mp
import os
import signal
import sys
import threading
import traceback
from collections.abc import Callable, Iterable
from typing import Any

import cloudpickle


class WorkerFailure(RuntimeError):
    """A remote worker failed: it died, or a call raised inside it.

    This is corral's counterpart of Ray's `RayError`: `Trainer.step()` treats
    it as a worker failure (recovery with `ignore_worker_failures` /
    `recreate_failed_workers`), not as a bug in the driver.
    """

    def __init__(self, message: str, worker_index: int) -> None:
        super().__init__(message)
        self.worker_index = worker_index


class WorkerCrashedError(WorkerFailure):
    """The worker's process is gone (killed, segfault, out of memory)."""


class RemoteWorkerError(WorkerFailure):
    """A call raised an exception inside the worker; the message has its traceback."""


class Future:
    """The pending result of one call on a remote worker."""

    __slots__ = ("_event", "_value", "_error")

    def __init__(self) -> None:
        self._event = threading.Event()
        self._value: Any = None
        self._error: BaseException | None = None

    def _set(self, value: Any = None, error: BaseException | None = None) -> None:
        self._value, self._error = value, error
        self._event.set()

    def done(self) -> bool:
        return self._event.is_set()

    def result(self, timeout: float | None = None) -> Any:
        """Waits for the call; raises its `WorkerFailure` if it failed."""
        if not self._event.wait(timeout):
            raise TimeoutError(f"No reply from the worker within {timeout} s.")
        if self._error is not None:
            raise self._error
        return self._value


def wait_all(futures: Iterable[Future], timeout: float | None = None) -> list[Any]:
    """Results of all `futures` in order (the first failure is raised)."""
    return [f.result(timeout) for f in futures]


# `ray.get`-like spelling for ported code.
get = wait_all


class _RemoteMethod:
    def __init__(self, handle: ProcessWorker, name: str) -> None:
        self._handle, self._name = handle, name

    def remote(self, *args: Any, **kwargs: Any) -> Future:
        return self._handle.call(self._name, *args, **kwargs)


class ProcessWorker:
    """A `RolloutWorker` in a child process of this machine.

    Args:
        worker_index: the worker's index in its worker set (1..n).
        factory: builds the worker inside the child (called with no args).
        env_vars: extra environment variables for the child
            (`extra_python_environs_for_worker`).
        num_threads: torch threads in the child (`num_cpus_per_worker`).
    """

    def __init__(
        self,
        worker_index: int,
        factory: Callable[[], Any],
        env_vars: dict[str, str] | None = None,
        num_threads: int = 1,
    ) -> None:
        self.worker_index = worker_index
        ctx = mp.get_context("fork" if sys.platform.startswith("linux") else "spawn")
        parent_conn, child_conn = ctx.Pipe(duplex=True)
        self._conn = parent_conn
        self._process = ctx.Process(
            target=_worker_main,
            args=(child_conn, factory, worker_index, env_vars or {}, max(1, int(num_threads))),
            name=f"corral-worker-{worker_index}",
            daemon=True,
        )
        self._process.start()
        child_conn.close()
        self._pending: collections.deque[Future] = collections.deque()
        self._lock = threading.Lock()
        self._dead: WorkerFailure | None = None
        self._ready = Future()
        self._pending.append(self._ready)
        self._reader = threading.Thread(target=self._read_replies, daemon=True)
        self._reader.start()

    @property
    def pid(self) -> int | None:
        return self._process.pid

    def wait_ready(self, timeout: float | None = None) -> None:
        """Blocks until the worker is built (raises what its constructor raised)."""
        self._ready.result(timeout)

    # -- calls --------------------------------------------------------------

    def call(self, method: str, *args: Any, **kwargs: Any) -> Future:
        """Runs `worker.<method>(*args, **kwargs)` in the child."""
        return self._send(("call", method, args, kwargs))

    def apply(self, func: Callable, *args: Any, **kwargs: Any) -> Future:
        """Runs `func(worker, *args, **kwargs)` in the child."""
        return self._send(("apply", cloudpickle.dumps(func), args, kwargs))

    def __getattr__(self, name: str) -> _RemoteMethod:
        if name.startswith("_"):
            raise AttributeError(name)
        return _RemoteMethod(self, name)

    def _send(self, message: tuple) -> Future:
        future = Future()
        with self._lock:
            if self._dead is not None:
                future._set(error=self._dead)
                return future
            self._pending.append(future)
            # On a dead pipe the reader thread notices the death and fails the future.
            with contextlib.suppress(OSError, EOFError, BrokenPipeError):
                self._conn.send(message)
        return future

    def _read_replies(self) -> None:
        while True:
            try:
                status, payload = self._conn.recv()
            except (EOFError, OSError):
                self._mark_dead()
                return
            with self._lock:
                future = self._pending.popleft()
            if status == "ok":
                future._set(payload)
            else:
                future._set(
                    error=RemoteWorkerError(_format_remote(self, payload), self.worker_index)
                )

    def _mark_dead(self) -> None:
        self._process.join(timeout=1.0)
        code = self._process.exitcode
        how = f"killed by signal {-code}" if code and code < 0 else f"exit code {code}"
        error = WorkerCrashedError(
            f"Rollout worker {self.worker_index} (pid {self.pid}) died ({how}).",
            self.worker_index,
        )
        with self._lock:
            self._dead = error
            pending, self._pending = list(self._pending), collections.deque()
        for future in pending:
            future._set(error=error)

    # -- lifecycle ----------------------------------------------------------

    def is_alive(self) -> bool:
        return self._dead is None and self._process.is_alive()

    def stop(self, timeout: float = 2.0) -> None:
        """Asks the worker to close its envs and exit; kills it if it does not."""
        if self._process.is_alive():
            self._send(("stop", None, (), {}))
            self._process.join(timeout)
        self.kill()

    def kill(self) -> None:
        if self._process.is_alive():
            os.kill(self._process.pid, signal.SIGKILL)
            self._process.join(timeout=5.0)
        self._conn.close()

    def __repr__(self) -> str:
        return f"ProcessWorker(index={self.worker_index}, pid={self.pid})"


def _format_remote(handle: ProcessWorker, payload: tuple[str, str, str]) -> str:
    kind, message, tb = payload
    return (
        f"Rollout worker {handle.worker_index} (pid {handle.pid}) raised {kind}: {message}\n"
        f"--- traceback in the worker ---\n{tb}"
    )


def _worker_main(
    conn: Any,
    factory: Callable[[], Any],
    worker_index: int,
    env_vars: dict[str, str],
    num_threads: int,
) -> None:
    os.environ.update({k: str(v) for k, v in env_vars.items()})
    # Workers sample with small batches: one thread each is fastest, and n
    # workers on n cores must not fight over threads.
    import torch

    torch.set_num_threads(num_threads)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        worker = factory()
    except BaseException as e:  # noqa: BLE001 - reported to the driver
        conn.send(("err", _describe(e)))
        return
    conn.send(("ok", None))
    while True:
        try:
            kind, target, args, kwargs = conn.recv()
        except (EOFError, OSError):
            return
        if kind == "stop":
            _stop_quietly(worker)
            conn.send(("ok", None))
            return
        try:
            if kind == "call":
                result = getattr(worker, target)(*args, **kwargs)
            else:
                result = cloudpickle.loads(target)(worker, *args, **kwargs)
            reply = ("ok", result)
        except BaseException as e:  # noqa: BLE001 - reported to the driver
            reply = ("err", _describe(e))
        try:
            conn.send(reply)
        except Exception as e:  # the result could not be pickled
            conn.send(("err", _describe(e)))


def _describe(e: BaseException) -> tuple[str, str, str]:
    return type(e).__name__, str(e), traceback.format_exc()


def _stop_quietly(worker: Any) -> None:
    with contextlib.suppress(Exception):  # the process exits anyway
        worker.stop()
