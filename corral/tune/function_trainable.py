"""Function trainables: ``tune.run(train_fn, config=...)``, Ray Tune 1.x's function API.

``wrap_function(train_fn)`` makes a ``Trainable`` class of a function. The function runs
in its own thread with a ``session.Session`` open; each result it reports is one
training iteration of the trial:

- ``tune.report(**metrics)`` (``train_fn(config)``), or ``reporter(**metrics)`` for the
  older ``train_fn(config, reporter)``;
- a value it yields (a generator function) or returns: a dict, or a number (logged as
  ``_metric``).

``report`` waits until the trial's loop asks for the next iteration, so the function
runs no further than the loop has asked. When the function returns, its last result is
the trial's final one (``done``). When the loop stops the trial first (a stop
criterion), the waiting ``report`` raises ``session.TrialStopped`` in the function,
which unwinds it. An exception in the function is raised by the trial's ``train()``.

Checkpoints are the function's own: ``with tune.checkpoint_dir(step) as d:`` gives it a
directory to write into, which becomes the trial's checkpoint; ``tune.run(train_fn,
restore=path)`` hands ``path`` to the function's ``checkpoint_dir`` argument. When the
trial saves it (a pause, ``tune.run(resume=...)``'s latest), the trainable's progress
(``training_iteration`` and the totals) is written beside it, and a restore goes on
counting from there, as Ray Tune's ``.tune_metadata``. (The
function's state lives in its own variables, so ``checkpoint_freq`` /
``checkpoint_at_end`` cannot save it: ``tune.run`` refuses them for a function.)
"""

from __future__ import annotations

import inspect
import json
import logging
import numbers
import os
import queue
import threading
from collections.abc import Callable
from typing import Any

from corral.tune.logger import _write_json_atomically
from corral.tune.result import DONE, RESULT_DUPLICATE, SHOULD_CHECKPOINT
from corral.tune.session import (
    DEFAULT_METRIC,
    Session,
    TrialStopped,
    close_session,
    open_session,
)
from corral.tune.trainable import Trainable
from corral.utils.error import CheckpointError

logger = logging.getLogger(__name__)

# How long stopping a trial waits for its function to unwind before leaving its thread.
_STOP_TIMEOUT_S = 10.0
# The file a saved checkpoint of the function gets beside its own files: the trainable's
# progress then (iteration and totals), which a restore takes back.
PROGRESS_FILE = ".tune_progress.json"
_PROGRESS_KEYS = ("iteration", "timesteps_total", "time_total", "episodes_total")


class _FunctionReturned(Exception):
    """The function returned after its last report: no new result."""


class FunctionTrainable(Trainable):
    """A function run as a trainable (made by ``wrap_function``)."""

    # Set on the classes ``wrap_function`` makes.
    _function: Callable[..., Any]
    _passes_reporter = False
    _passes_checkpoint_dir = False

    def setup(self, config: dict) -> None:
        self._function_config = config
        self._session: Session | None = None
        self._thread: threading.Thread | None = None
        self._restore_from: str | None = None

    def step(self) -> dict:
        session = self._session
        if session is None:
            session = self._session = self._start()
        else:
            session.resume.put(True)
        kind, payload = self._next_event(session)
        if kind == "error":
            raise payload
        result = dict(payload or {})
        if kind == "returned":
            if self.iteration:
                raise _FunctionReturned()
            result[DONE] = True  # returned without reporting: one empty, final result
        return self._with_new_checkpoint(result)

    def train(self) -> dict:
        """One result of the function; once it has returned, Ray Tune's marker that its
        last result was final: ``{"__duplicate__": True, "done": True}`` (plus
        ``should_checkpoint`` when it made a checkpoint after that result)."""
        try:
            return super().train()
        except _FunctionReturned:
            return self._with_new_checkpoint({RESULT_DUPLICATE: True, DONE: True})

    def _with_new_checkpoint(self, result: dict) -> dict:
        """`result`, asking the loop to record a checkpoint the function has written since
        its last result (`should_checkpoint`)."""
        session = self._session
        if session is not None and session.new_checkpoint:
            session.new_checkpoint = False
            result[SHOULD_CHECKPOINT] = True
        return result

    def save(self, checkpoint_dir: str | None = None) -> str:
        """The newest checkpoint the function wrote (``tune.checkpoint_dir``), with the
        trainable's progress now written beside its files (``PROGRESS_FILE``).

        Raises:
            CheckpointError: the function has written none.
        """
        checkpoint = self._session.checkpoint if self._session is not None else None
        if checkpoint is None:
            raise CheckpointError(
                f"{self._function_name()} has written no checkpoint: a function trainable "
                "saves its own state inside `with tune.checkpoint_dir(step) as path:`."
            )
        progress = self._progress_metadata()
        _write_json_atomically(
            os.path.join(checkpoint, PROGRESS_FILE), {k: progress[k] for k in _PROGRESS_KEYS}
        )
        return checkpoint

    def restore(self, checkpoint_path: str, checkpoint_node_ip: str | None = None) -> None:
        """Hands ``checkpoint_path`` to the function's ``checkpoint_dir`` argument when it
        starts (``checkpoint_node_ip``: Ray Tune's, not used: checkpoints are local).

        Raises:
            ValueError: the function takes no ``checkpoint_dir``, or already runs.
        """
        self.check_restorable(checkpoint_path)
        if self._session is not None:
            raise ValueError("A function trainable restores only before its first train().")
        self._restore_from = checkpoint_path
        self._restore_progress(checkpoint_path)

    def _restore_progress(self, checkpoint_path: str) -> None:
        """Counts on from the progress ``save`` wrote beside the checkpoint (none there:
        from 0).

        Raises:
            CheckpointError: the progress file is there but not one ``save`` wrote.
        """
        path = os.path.join(checkpoint_path, PROGRESS_FILE)
        if not os.path.isfile(path):
            return
        try:
            with open(path, encoding="utf-8") as f:
                progress = json.load(f)
            iteration = progress["iteration"]
            if isinstance(iteration, bool) or not isinstance(iteration, int) or iteration < 0:
                raise ValueError(f"iteration {iteration!r}")
            time_total = float(progress["time_total"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise CheckpointError(
                f"{path} is not the progress a function trainable's save wrote ({e})"
            ) from None
        self._iteration = iteration
        self._time_total = time_total
        self._timesteps_total = progress["timesteps_total"]
        self._episodes_total = progress["episodes_total"]

    @classmethod
    def check_restorable(cls, checkpoint_path: str) -> None:
        """Raises ValueError unless the function takes a ``checkpoint_dir`` argument."""
        if not cls._passes_checkpoint_dir:
            raise ValueError(
                f"Cannot restore {cls._function_name()} from {checkpoint_path!r}: it takes no "
                "`checkpoint_dir` argument (def train_fn(config, checkpoint_dir=None)), which "
                "is how a function trainable gets its checkpoint back."
            )

    def restore_from_object(self, obj: bytes) -> None:
        """Not for a function trainable: its checkpoint must stay on disk until the
        function reads it. Restore from the checkpoint's folder instead."""
        raise NotImplementedError(
            f"{self._function_name()} restores from a checkpoint folder "
            "(tune.run(train_fn, restore=path)), not from an object."
        )

    def cleanup(self) -> None:
        """Stops the function at its pending ``report`` and waits for it to unwind."""
        thread, session = self._thread, self._session
        if thread is None or session is None:
            return
        session.resume.put(False)
        thread.join(_STOP_TIMEOUT_S)
        if thread.is_alive():
            logger.warning(
                "%s did not return within %.0f s of its trial stopping; its thread is left "
                "running (it ends at its next tune.report).",
                self._function_name(),
                _STOP_TIMEOUT_S,
            )

    # -- the function's thread --------------------------------------------------------

    @classmethod
    def _function_name(cls) -> str:
        return getattr(cls._function, "__name__", repr(cls._function))

    def _start(self) -> Session:
        info = self._trial_info
        session = Session(
            self.logdir,
            info.name if info else type(self).__name__,
            info.trial_id if info else None,
        )
        session.trial_resources = self.trial_resources
        self._thread = threading.Thread(
            target=self._run,
            args=(session,),
            name=f"corral-tune-{self._function_name()}",
            daemon=True,
        )
        self._thread.start()
        return session

    def _run(self, session: Session) -> None:
        open_session(session)
        try:
            args: list[Any] = [self._function_config]
            if self._passes_reporter:
                args.append(session)
            kwargs = {"checkpoint_dir": self._restore_from} if self._passes_checkpoint_dir else {}
            output = type(self)._function(*args, **kwargs)
            if inspect.isgenerator(output):
                for value in output:
                    _report_output(session, value)
            else:
                _report_output(session, output)
            session.events.put(("returned", None))
        except TrialStopped:
            pass
        except BaseException as error:  # handed to the trial's train(), which raises it
            session.events.put(("error", error))
        finally:
            close_session(session)

    def _next_event(self, session: Session) -> tuple[str, Any]:
        assert self._thread is not None
        while True:
            try:
                return session.events.get(timeout=1.0)
            except queue.Empty:  # check that the thread still runs
                if not self._thread.is_alive() and session.events.empty():
                    raise RuntimeError(
                        f"{self._function_name()}'s thread ended without a result"
                    ) from None


def _report_output(session: Session, value: Any) -> None:
    """What the function returned or yielded, as Ray Tune takes it: a dict is a result,
    a number the result's ``_metric``; None is nothing."""
    if value is None:
        return
    if isinstance(value, dict):
        session.report(**value)
    elif isinstance(value, numbers.Number):
        session.report(**{DEFAULT_METRIC: value})
    else:
        raise ValueError(
            "A function trainable returns or yields a dict of metrics or a single number, "
            f"got {type(value).__name__}: {value!r:.200}"
        )


def wrap_function(train_fn: Callable[..., Any]) -> type[FunctionTrainable]:
    """A ``Trainable`` class that runs ``train_fn`` (see the module docstring).

    ``train_fn`` takes the trial's config first, then optionally ``reporter`` (Ray Tune
    1.x's ``train_fn(config, reporter)``) or ``checkpoint_dir`` (the checkpoint to
    restore, None when starting fresh).

    Raises:
        ValueError: ``train_fn`` takes other arguments.
    """
    try:
        params = list(inspect.signature(train_fn).parameters.values())
    except (TypeError, ValueError) as e:
        raise ValueError(f"Cannot read the arguments of {train_fn!r}: {e}") from None
    names = [p.name for p in params]
    passes_reporter = "reporter" in names
    passes_checkpoint_dir = "checkpoint_dir" in names
    required = [
        p.name
        for p in params[1:]
        if p.default is inspect.Parameter.empty
        and p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
        and p.name not in ("reporter", "checkpoint_dir")
    ]
    positional = (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)
    if not params or params[0].kind not in positional or required:
        raise ValueError(
            f"A function trainable takes the trial's config as its first argument, then "
            f"optionally `reporter` or `checkpoint_dir`; {getattr(train_fn, '__name__', train_fn)} "
            f"takes {names}."
        )
    name = getattr(train_fn, "__name__", "func")
    return type(
        name,
        (FunctionTrainable,),
        {
            "_function": staticmethod(train_fn),
            "_passes_reporter": passes_reporter,
            "_passes_checkpoint_dir": passes_checkpoint_dir,
            "__module__": getattr(train_fn, "__module__", __name__),
            "__doc__": getattr(train_fn, "__doc__", None),
        },
    )
