"""The child side of corral's forked helper processes: one bootstrap, one serve loop.

Rollout workers and learners (`corral.evaluation.backend`, and as Ray actors
`corral.evaluation.ray_backend`) and remote sub-envs (`corral.env.remote_vector_env`)
run in child processes that answer requests over a pipe. The parts they share live
here: the process set-up of a worker (`prepare_worker_process`), and the loop that
builds the served object, then answers one request at a time (`serve`).

Forking itself goes through `start_forked`, so that no child finalizes the parent's
garbage.

The pipe protocol: the child first sends `("ok", ready_payload)` once the object is
built (or `("err", described_error)` and exits); then, for every request, one reply,
`("ok", value)` or `("err", (type name, message, traceback))`.
"""

from __future__ import annotations

import contextlib
import gc
import os
import signal
import sys
import traceback
from collections.abc import Callable, Iterable
from multiprocessing.connection import Connection
from typing import Any, TypeVar

T = TypeVar("T")

# (exception type name, message, formatted traceback): an error as sent to the parent.
DescribedError = tuple[str, str, str]


def describe(error: BaseException) -> DescribedError:
    """`error` as plain strings (the exception itself may not unpickle in the parent).

    Call it inside the `except` block: the traceback is the one being handled.
    """
    return type(error).__name__, str(error), traceback.format_exc()


def start_forked(start: Callable[[], T]) -> T:
    """Runs `start`, which forks (`os.fork`, or `Process.start` with the "fork" method),
    so that the child never garbage-collects what it inherited; returns what it returns.

    Objects the parent no longer reaches but has not collected yet (reference cycles) are
    copied into a forked child, and its first collection would run their finalizers
    there: e.g. an EnvPool pool's destructor stopping C++ threads that exist only in the
    parent (the child crashed or hung). The collector is off while `start` forks, and the
    child's first act (a fork hook, before any of its Python code runs) is `gc.freeze()`:
    everything it inherited goes to the permanent generation, which it never collects.
    The parent's own generations, frozen objects included (`corral.core._heap`), are left
    as they were. The same hook then gives the child random streams of its own
    (`_fresh_random_streams`).
    """
    global _forking
    parent, enabled = os.getpid(), gc.isenabled()
    gc.disable()
    _forking = enabled
    try:
        return start()
    finally:
        if os.getpid() == parent:  # (an `os.fork` child also leaves through here)
            _forking = None
            if enabled:
                gc.enable()


# While `start_forked` forks: whether the collector was on (the child turns it back on
# after freezing); None otherwise.
_forking: bool | None = None


def _after_start_forked() -> None:
    """`os.register_at_fork` hook, in every forked child: after `start_forked`'s forks,
    freezes the inherited heap, turns the collector back on and gives the child random
    streams of its own."""
    global _forking
    if _forking is not None:
        gc.freeze()
        if _forking:
            gc.enable()
        _forking = None  # the child's own forks start afresh
        _fresh_random_streams()


def _fresh_random_streams() -> None:
    """Reseeds numpy's and torch's global generators (CPU) from the OS.

    A forked child inherits the parent's generator states: without this every worker
    forked from one driver would draw the same exploration noise, action samples and
    minibatch orders (Python's `random` reseeds itself at a fork). A worker given a
    `seed` seeds them again when it is built (seed + 1000 x its index).
    """
    np = sys.modules.get("numpy")
    if np is not None:
        np.random.seed()
    torch = sys.modules.get("torch")
    if torch is not None:
        torch.default_generator.seed()


os.register_at_fork(after_in_child=_after_start_forked)


def prepare_worker_process(env_vars: dict[str, str], num_threads: int) -> None:
    """What a rollout worker's or learner's process sets before building its worker.

    Used by both backends (a forked child and a Ray actor), so a worker sees the same
    environment wherever it runs.

    Args:
        env_vars: extra environment variables (`extra_python_environs_for_worker`).
        num_threads: torch's intra-op threads (`num_cpus_per_worker`): workers sample
            with small batches, where one thread each is fastest, and n workers on n
            cores must not fight over threads.
    """
    os.environ.update({k: str(v) for k, v in env_vars.items()})
    import torch

    torch.set_num_threads(max(1, int(num_threads)))


def serve(
    conn: Connection,
    build: Callable[[], tuple[T, Any]],
    handle: Callable[[T, Any], tuple[Any, bool]],
    inherited: Iterable[Connection] = (),
) -> None:
    """Builds the served object, then answers requests on `conn` until told to stop.

    Returns when the parent closes its end (EOF: the parent is gone) or when
    `handle` says the request was the last one.

    Args:
        conn: the child's end of the pipe.
        build: builds the object; returns (object, payload of the first "ok").
            What it raises is sent to the parent, and the child ends.
        handle: `handle(obj, request) -> (value, last)`: the reply's value and
            whether to stop after sending it. What it raises becomes an "err"
            reply, and the loop goes on.
        inherited: this process's copies of the parent's pipe ends (a forked child
            inherits them): closed first, so that EOF on `conn` means the parent is
            gone, not that a sibling still holds the pipe open.
    """
    for other in inherited:
        with contextlib.suppress(OSError):
            other.close()
    # Ctrl-C is the parent's to handle; it stops its children.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        obj, ready = build()
    except BaseException as e:  # noqa: BLE001 - reported to the parent
        conn.send(("err", describe(e)))
        return
    conn.send(("ok", ready))
    while True:
        try:
            request = conn.recv()
        except (EOFError, OSError):
            return
        last = False
        try:
            value, last = handle(obj, request)
            reply: tuple[str, Any] = ("ok", value)
        except BaseException as e:  # noqa: BLE001 - reported to the parent
            reply = ("err", describe(e))
        try:
            conn.send(reply)
        except Exception as e:  # noqa: BLE001 - the value could not be pickled
            conn.send(("err", describe(e)))
        if last:
            return
