"""Where remote workers run, behind one small handle interface.

A handle runs methods of a `RolloutWorker` that lives elsewhere and returns
`Future`s: `handle.call("sample")`, `handle.apply(fn)` (runs `fn(worker)`
there), `handle.kill()`, `handle.is_alive()`. RLlib-style
`handle.sample.remote()` works too. The rest of corral only sees this
interface, so the "local" backend (processes on this machine, below) and the
"ray" backend (Ray actors) are interchangeable.

The local backend forks worker processes (start-up in milliseconds, and env
creators that are lambdas or closures need no pickling). Each handle has a
reader thread that drains replies and a writer thread that sends requests, so
a large request and a large reply can never block each other, and a worker
that stopped reading (SIGSTOP, an env that blocks) never blocks the driver.

The driver never waits without a limit: a future's `result()` without a
timeout waits at most the handle's `call_timeout_s` (the trainer's
`sample_timeout_s`), then raises `WorkerTimeoutError`, a `WorkerFailure`
that recovery handles like a crash. A worker exits by itself within about a
second when its driver dies, even when the driver is SIGKILLed: it holds no
copy of the driver's pipe ends (so it sees EOF), asks Linux to kill it with
its parent (`PR_SET_PDEATHSIG`), and a thread watches the parent's pid.
"""

from __future__ import annotations

import collections
import contextlib
import multiprocessing as mp
import os
import pickle
import queue
import signal
import sys
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from multiprocessing.connection import Connection
from multiprocessing.reduction import ForkingPickler
from typing import Any

import cloudpickle

from corral.evaluation.worker_handle import (
    RemoteMethod,
    ServedWorker,
    WorkerFuture,
    WorkerHandle,
    WorkerSpec,
)
from corral.utils.child_process import DescribedError, prepare_worker_process, serve, start_forked

# How long a call may take when the handle is given no limit (COMMON_CONFIG's
# `sample_timeout_s` default): the driver never waits forever.
DEFAULT_CALL_TIMEOUT_S = 600.0
# How often a worker checks that its driver is still alive (seconds).
PARENT_WATCH_INTERVAL_S = 0.5
# Linux prctl option: the signal a process gets when its parent thread dies.
_PR_SET_PDEATHSIG = 1


class WorkerFailure(RuntimeError):
    """A remote worker failed: it died, or a call raised inside it.

    This is corral's counterpart of Ray's `RayError`: `Trainer.step()` treats
    it as a worker failure (recovery with `ignore_worker_failures` /
    `recreate_failed_workers`), not as a bug in the driver.
    """

    def __init__(self, message: str, worker_index: int, handle: WorkerHandle | None = None) -> None:
        super().__init__(message)
        self.worker_index = worker_index
        # The handle of the failed worker, so recovery knows which worker (of
        # which worker set) to drop, even when that worker still answers a ping.
        self.handle = handle

    def __reduce__(self) -> tuple:
        # The handle (threads, pipes) stays behind when the error is pickled.
        return type(self), (str(self), self.worker_index)


class WorkerCrashedError(WorkerFailure):
    """The worker's process is gone (killed, segfault, out of memory)."""


class RemoteWorkerError(WorkerFailure):
    """A call raised an exception inside the worker; the message has its traceback."""


class WorkerTimeoutError(WorkerFailure, TimeoutError):
    """The worker did not answer in time (hung, stopped, or too slow); it is
    treated as failed. Also a `TimeoutError`, for code that waits with a limit."""


def timeout_error(handle: WorkerHandle, what: str, waited: float) -> WorkerTimeoutError:
    """The error for `handle` not answering `what` within `waited` seconds."""
    return WorkerTimeoutError(
        f"Rollout worker {handle.worker_index} (pid {handle.pid}) did not answer `{what}` "
        f"within {waited:.1f} s; it is treated as failed (hung or stopped, or slower than "
        "`sample_timeout_s` allows).",
        handle.worker_index,
        handle,
    )


class Future:
    """The pending result of one call on a remote worker.

    Args:
        handle: the worker the call runs on (its `call_timeout_s` limits
            `result()` without a timeout); None: no default limit.
        what: the call's name, for the timeout error.
    """

    __slots__ = ("_event", "_value", "_error", "_handle", "_what")

    def __init__(self, handle: WorkerHandle | None = None, what: str = "call") -> None:
        self._event = threading.Event()
        self._value: Any = None
        self._error: BaseException | None = None
        self._handle = handle
        self._what = what

    def _set(self, value: Any = None, error: BaseException | None = None) -> None:
        self._value, self._error = value, error
        self._event.set()

    def done(self) -> bool:
        """Whether the call has finished (returned or failed); never blocks."""
        return self._event.is_set()

    def default_timeout(self) -> float | None:
        """How long `result()` waits when given no timeout."""
        return None if self._handle is None else self._handle.call_timeout_s

    def result(self, timeout: float | None = None, *, _since: float | None = None) -> Any:
        """Waits for the call; raises its `WorkerFailure` if it failed.

        Args:
            timeout: seconds to wait; None: the handle's `call_timeout_s`.
                Past it, `WorkerTimeoutError` (a `TimeoutError` too).
            _since: when the wait began (`time.monotonic()`), for the error
                message of `wait_all`, whose futures share one deadline.
        """
        if timeout is None:
            timeout = self.default_timeout()
        if not self._event.wait(timeout):
            # (Only a finite wait ends here: `timeout` is a number.)
            waited = float(timeout or 0.0) if _since is None else time.monotonic() - _since
            if self._handle is None:
                raise TimeoutError(f"No reply from the worker within {waited:.1f} s.")
            raise timeout_error(self._handle, self._what, waited)
        if self._error is not None:
            raise self._error
        return self._value


def wait_all(futures: Iterable[WorkerFuture], timeout: float | None = None) -> list[Any]:
    """Results of all `futures` in order (the first failure is raised).

    The futures run at the same time, so they share one deadline: `timeout`
    seconds from now, or each handle's `call_timeout_s` from now.
    """
    futures = list(futures)
    start = time.monotonic()
    results = []
    for f in futures:
        limit = f.default_timeout() if timeout is None else timeout
        if limit is not None:
            limit = max(0.0, limit - (time.monotonic() - start))
        results.append(f.result(limit, _since=start))
    return results


def wait_all_fail_fast(
    futures: Iterable[WorkerFuture], timeout: float | None = None, poll_s: float = 0.002
) -> list[Any]:
    """Results of all `futures` in order; the first failure of any of them is raised as
    soon as it happens, not when the wait reaches its future.

    For calls that wait for each other (members of one torch.distributed group): a
    member blocked in a collective with a dead peer would otherwise hold the wait up
    until its timeout. The deadline is shared, as in `wait_all`: `timeout` seconds
    from now, or the first future's `call_timeout_s` from now.
    """
    futures = list(futures)
    if not futures:
        return []
    limit = futures[0].default_timeout() if timeout is None else timeout
    deadline = None if limit is None else time.monotonic() + limit
    while not all(f.done() for f in futures):
        for f in futures:
            if f.done():
                f.result(0)  # raises that call's failure now
        if deadline is not None and time.monotonic() > deadline:
            break
        time.sleep(poll_s)
    remaining = None if deadline is None else max(0.0, deadline - time.monotonic())
    return wait_all(futures, remaining)


# `ray.get`-like spelling for ported code.
get = wait_all


def _request_bytes(message: tuple) -> bytes:
    """A request as bytes for the child: multiprocessing's pickler, or cloudpickle where
    that fails (a lambda or a local function among the arguments, as in RLlib 1.x's
    `worker.foreach_env.remote(lambda env: ...)`, which Ray pickles with cloudpickle).
    The child loads either with `pickle`. Raises what cloudpickle raises for what
    neither can pickle (a lock, an open socket)."""
    try:
        return bytes(ForkingPickler.dumps(message))
    except (pickle.PicklingError, AttributeError, TypeError):
        return cloudpickle.dumps(message)


class ProcessWorker:
    """A `RolloutWorker` (or learner) in a child process of this machine; a `WorkerHandle`.

    Args:
        spec: the worker to start (index, factory, environment, threads, call timeout).
    """

    # The driver's ends of the pipes of all live workers of this process: a
    # forked child closes its copies, so that each worker sees EOF (and exits)
    # when the driver dies, instead of a younger sibling keeping the pipe open.
    _parent_ends: weakref.WeakSet[Connection] = weakref.WeakSet()

    def __init__(self, spec: WorkerSpec) -> None:
        self.worker_index = spec.worker_index
        self.call_timeout_s = spec.call_timeout_s
        fork = sys.platform.startswith("linux")
        ctx = mp.get_context("fork") if fork else mp.get_context("spawn")
        parent_conn, child_conn = ctx.Pipe(duplex=True)
        self._conn = parent_conn
        # Only a forked child inherits the driver's pipe ends (spawn passes none).
        inherited = [parent_conn, *ProcessWorker._parent_ends] if fork else []
        watch = _ParentWatch(
            os.getpid(),
            # PR_SET_PDEATHSIG fires when the forking *thread* ends: only safe to
            # ask for when that thread is the main one (whose end is the process's).
            death_signal=fork and threading.current_thread() is threading.main_thread(),
        )
        self._process = ctx.Process(
            target=_worker_main,
            args=(child_conn, spec, inherited, watch),
            name=f"corral-worker-{spec.worker_index}",
            daemon=True,
        )
        if fork:
            start_forked(self._process.start)
        else:
            self._process.start()
        child_conn.close()
        ProcessWorker._parent_ends.add(parent_conn)
        self._pending: collections.deque[Future] = collections.deque()
        self._lock = threading.Lock()
        self._dead: WorkerFailure | None = None
        self._ready = Future(self, "start")
        self._pending.append(self._ready)
        self._outbox: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._reader = threading.Thread(target=self._read_replies, daemon=True)
        self._reader.start()
        self._writer = threading.Thread(target=self._write_requests, daemon=True)
        self._writer.start()

    @property
    def pid(self) -> int | None:
        """The worker process's pid."""
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

    def __getattr__(self, name: str) -> RemoteMethod:
        if name.startswith("_"):
            raise AttributeError(name)
        return RemoteMethod(self, name)

    def _send(self, message: tuple) -> Future:
        kind, target = message[0], message[1]
        future = Future(self, target if kind == "call" else kind)
        # Pickled here, so that an argument that cannot be pickled fails the caller.
        data = _request_bytes(message)
        with self._lock:
            if self._dead is not None:
                future._set(error=self._dead)
                return future
            self._pending.append(future)
            # The writer thread sends: a worker that stopped reading (SIGSTOP)
            # fills the pipe, and only that thread blocks, not the driver.
            self._outbox.put(data)
        return future

    def _write_requests(self) -> None:
        while True:
            data = self._outbox.get()
            if data is None:
                return
            try:
                self._conn.send_bytes(data)
            except (OSError, EOFError, ValueError, TypeError):
                # A dead pipe (or one closed by kill() under a large send, where
                # the handle becomes None): the reader thread fails the futures.
                return

    def _read_replies(self) -> None:
        while True:
            try:
                status, payload = self._conn.recv()
            except (EOFError, OSError, TypeError):  # TypeError: closed by kill()
                self._mark_dead()
                return
            with self._lock:
                future = self._pending.popleft()
            if status == "ok":
                future._set(payload)
            else:
                future._set(
                    error=RemoteWorkerError(_format_remote(self, payload), self.worker_index, self)
                )

    def _mark_dead(self) -> None:
        self._process.join(timeout=1.0)
        code = self._process.exitcode
        how = f"killed by signal {-code}" if code and code < 0 else f"exit code {code}"
        error = WorkerCrashedError(
            f"Rollout worker {self.worker_index} (pid {self.pid}) died ({how}).",
            self.worker_index,
            self,
        )
        with self._lock:
            self._dead = error
            pending, self._pending = list(self._pending), collections.deque()
        for future in pending:
            future._set(error=error)

    # -- lifecycle ----------------------------------------------------------

    def is_alive(self) -> bool:
        """False once the process is known to be dead."""
        return self._dead is None and self._process.is_alive()

    def stop(self, timeout: float = 2.0) -> None:
        """Asks the worker to close its envs and exit; kills it if it does not."""
        if self._process.is_alive():
            self._send(("stop", None, (), {}))
            self._process.join(timeout)
        self.kill()

    def kill(self) -> None:
        """SIGKILLs the process (a stopped or hung one too) and closes the pipe."""
        if self._process.is_alive():
            with contextlib.suppress(ProcessLookupError):
                self._process.kill()  # SIGKILL
            self._process.join(timeout=5.0)
        self._outbox.put(None)
        # The process is gone, so a send in progress fails at once: let the
        # writer finish before the pipe is closed under it.
        if self._writer is not threading.current_thread():
            self._writer.join(timeout=2.0)
        ProcessWorker._parent_ends.discard(self._conn)
        self._conn.close()

    def __repr__(self) -> str:
        return f"ProcessWorker(index={self.worker_index}, pid={self.pid})"


def _format_remote(handle: WorkerHandle, payload: DescribedError) -> str:
    kind, message, tb = payload
    return (
        f"Rollout worker {handle.worker_index} (pid {handle.pid}) raised {kind}: {message}\n"
        f"--- traceback in the worker ---\n{tb}"
    )


class _ParentWatch:
    """Makes a worker process end when its driver does (runs in the child).

    Args:
        parent_pid: the driver's pid.
        death_signal: also ask Linux to SIGKILL the child when the forking
            thread dies (`prctl(PR_SET_PDEATHSIG)`; works even while the child
            is stuck in native code or stopped).
    """

    def __init__(self, parent_pid: int, death_signal: bool) -> None:
        self.parent_pid = parent_pid
        self.death_signal = death_signal

    def start(self) -> None:
        if self.death_signal:
            _set_parent_death_signal(signal.SIGKILL)
        # The driver may have died before the prctl above took effect.
        if os.getppid() != self.parent_pid:
            os._exit(1)
        # The portable part: a thread that polls the parent's pid (a dead
        # parent's children are re-parented, so getppid() changes).
        threading.Thread(target=self._poll, name="corral-parent-watch", daemon=True).start()

    def _poll(self) -> None:
        while os.getppid() == self.parent_pid:
            time.sleep(PARENT_WATCH_INTERVAL_S)
        os._exit(1)


def _set_parent_death_signal(sig: int) -> None:
    """`prctl(PR_SET_PDEATHSIG, sig)` via libc; silently nothing where unavailable."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, int(sig), 0, 0, 0)
    except (OSError, AttributeError):  # not Linux, or no prctl: the thread still watches
        pass


def _worker_main(
    conn: Connection,
    spec: WorkerSpec,
    inherited: list[Connection],
    watch: _ParentWatch | None = None,
) -> None:
    """The child process: builds the worker, then runs the driver's requests."""

    def build() -> tuple[ServedWorker, None]:
        if watch is not None:
            watch.start()
        prepare_worker_process(spec.env_vars, spec.num_threads)
        return spec.factory(), None

    serve(conn, build, _answer, inherited)


def _answer(worker: ServedWorker, request: tuple[str, Any, tuple, dict]) -> tuple[Any, bool]:
    """One request of the driver: (reply value, whether it was the last)."""
    kind, target, args, kwargs = request
    if kind == "call":
        return getattr(worker, target)(*args, **kwargs), False
    if kind == "apply":
        return cloudpickle.loads(target)(worker, *args, **kwargs), False
    # "stop": close the envs and exit (the process exits anyway if this fails).
    with contextlib.suppress(Exception):
        worker.stop()
    return None, True
