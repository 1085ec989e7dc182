"""Ray Tune 1.x's function API, as ``ray.tune.session`` had it: ``tune.report``,
``tune.checkpoint_dir``, ``tune.get_trial_dir`` / ``get_trial_name`` / ``get_trial_id``.

A function trainable (``tune.run(train_fn, ...)``, see ``function_trainable``) runs its
function with a session open; these calls talk to it. Outside a session (the function
called by hand, e.g. to debug it) ``report`` does nothing but warn once, the getters
return None and ``checkpoint_dir`` yields the working directory, as in Ray Tune.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

logger = logging.getLogger(__name__)

# The key a number reported alone (``tune.report(0.9)``) is logged under (Ray's name).
DEFAULT_METRIC = "_metric"


class TrialStopped(BaseException):
    """Raised by ``tune.report`` inside a function trainable whose trial has stopped (a
    stop criterion was met, or the run ends): it unwinds the function, whose ``finally``
    blocks and ``with`` statements run. A ``BaseException``, like ``KeyboardInterrupt``,
    so that an ``except Exception`` in the function does not swallow it."""


class Session:
    """The link between a running function and its trial's loop: each ``report`` hands a
    result to the loop, then waits until the loop asks for the next one (or stops).

    Args:
        logdir: the trial's directory.
        trial_name: the trial's name.
        trial_id: the trial's id.
    """

    def __init__(self, logdir: str, trial_name: str | None, trial_id: str | None) -> None:
        self.logdir = logdir
        self.trial_name = trial_name
        self.trial_id = trial_id
        # Function -> loop: ("result", dict), ("returned", None) or ("error", exception).
        self.events: queue.Queue[tuple[str, Any]] = queue.Queue()
        # Loop -> function: True to go on to the next report, False to stop.
        self.resume: queue.Queue[bool] = queue.Queue()
        # The newest directory `checkpoint_dir` handed out and the function has left.
        self.checkpoint: str | None = None
        self.new_checkpoint = False
        # The trial's resources (`get_trial_resources`), set by the function trainable.
        self.trial_resources: Any = None

    def report(self, _metric: Any = None, **metrics: Any) -> None:
        """Hands one result to the trial's loop and waits for the loop's next step."""
        if _metric is not None:
            metrics[DEFAULT_METRIC] = _metric
        self.events.put(("result", metrics))
        if not self.resume.get():
            raise TrialStopped()

    # Ray Tune 1.x's `train_fn(config, reporter)`: `reporter(**metrics)`.
    __call__ = report

    def make_checkpoint_dir(self, step: int) -> str:
        path = os.path.join(self.logdir, f"checkpoint_{int(step):06d}")
        os.makedirs(path, exist_ok=True)
        return path

    def set_checkpoint(self, path: str) -> None:
        self.checkpoint = path
        self.new_checkpoint = True


# The open sessions: each function trainable's thread has its own (several trials run at
# once with `max_concurrent_trials`), and a thread a function starts itself falls back to
# the process's only open session, if there is one.
_local = threading.local()
_open: list[Session] = []
_open_lock = threading.Lock()
_warned_outside = False


def open_session(session: Session) -> None:
    """Makes ``session`` the one these calls talk to in the calling thread."""
    _local.session = session
    with _open_lock:
        _open.append(session)


def close_session(session: Session) -> None:
    """Closes ``session`` (a function left running past its trial's end must not close
    the next trial's)."""
    if getattr(_local, "session", None) is session:
        _local.session = None
    with _open_lock:
        if session in _open:
            _open.remove(session)


def _current() -> Session | None:
    session = getattr(_local, "session", None)
    if session is not None:
        return session
    with _open_lock:
        return _open[0] if len(_open) == 1 else None


def get_session() -> Session | None:
    """The calling thread's session, or None (warns once: outside ``tune.run`` these calls
    do nothing)."""
    global _warned_outside
    session = _current()
    if session is None and not _warned_outside:
        _warned_outside = True
        logger.warning(
            "No Tune session: tune.report, checkpoint_dir and get_trial_* only act inside a "
            "function run by tune.run(train_fn, ...)."
        )
    return session


def is_session_enabled() -> bool:
    """Whether a function trainable's session is open (the code runs under ``tune.run``)."""
    return _current() is not None


def report(_metric: Any = None, **kwargs: Any) -> None:
    """Reports one result of a function trainable: one training iteration.

    Args:
        _metric: a single value, logged as ``_metric``.
        **kwargs: the result's metrics (``tune.report(mean_loss=0.1, timesteps_total=100)``).

    Raises:
        TrialStopped: the trial has stopped (a stop criterion was met); let it propagate.
    """
    session = get_session()
    if session is not None:
        session.report(_metric, **kwargs)


@contextmanager
def checkpoint_dir(step: int) -> Iterator[str]:
    """A directory to write a checkpoint of a function trainable into: on leaving the
    ``with`` block it becomes the trial's newest checkpoint (recorded at the next
    ``report``), and ``tune.run(train_fn, restore=...)`` later hands it to the
    function's ``checkpoint_dir`` argument.

    Args:
        step: the checkpoint's number; the directory is ``<trial dir>/checkpoint_<step>``.
    """
    if step is None:
        raise ValueError("checkpoint_dir(step) needs a step, got None.")
    session = get_session()
    path = session.make_checkpoint_dir(step) if session is not None else os.path.abspath(".")
    yield path
    if session is not None:
        session.set_checkpoint(path)


def get_trial_dir() -> str | None:
    """The current trial's directory (None outside a session)."""
    session = get_session()
    return session.logdir if session is not None else None


def get_trial_name() -> str | None:
    """The current trial's name (None outside a session)."""
    session = get_session()
    return session.trial_name if session is not None else None


def get_trial_resources() -> Any:
    """The current trial's resources (Ray Tune 1.13's, for function trainables): its
    ``tune.run(resources_per_trial=...)`` as a ``PlacementGroupFactory``, else one CPU;
    None outside a session."""
    session = get_session()
    return session.trial_resources if session is not None else None


def get_trial_id() -> str | None:
    """The current trial's id (None outside a session)."""
    session = get_session()
    return session.trial_id if session is not None else None
