"""``Trial``: one run of a trainable with one resolved config, as Ray Tune's.

Ray Tune 1.13's ``Trial`` API (``ray.tune.trial.Trial``), what custom schedulers,
callbacks, stoppers and searchers read and call, with its meaning in corral's embedded
trial runner (``corral.tune.trial_runner``): the trials train in this process, one
iteration per turn, so what Ray keeps per trial for its actors (node, remote checkpoint
folder, cloud sync) has its local meaning here. The run's settings (stop rule,
checkpointing, recoveries) are ``tune.run``'s: a trial reads them from the loop that runs
it, and ``Trial(...)`` refuses its own values of them rather than ignore them.
"""

from __future__ import annotations

import json
import os
import platform
import re
import time
import traceback
import uuid
from collections.abc import Mapping
from typing import Any

from corral.tune.logger import flatten_dict, to_jsonable
from corral.tune.result import (
    CONFIG,
    DONE,
    NODE_IP,
    PID,
    TRAINING_ITERATION,
    default_results_dir,
    new_logdir,
)
from corral.tune.stopping import met_criterion

# Ray Tune 1.13's `ray.tune.trial.ExportFormat` (the formats `Trainer.export_model` takes).
from corral.tune.trainable import ExportFormat

__all__ = ["ExportFormat", "Location", "Trial"]

# The file in a trial's logdir that holds its trainable's tracebacks (Ray Tune's name).
ERROR_FILE = "error.txt"


class Location:
    """Where a trial runs: its host and process (Ray Tune 1.13's ``Location``). In corral's
    embedded runner: this host, and the process the trainable reported from."""

    def __init__(self, hostname: str | None = None, pid: int | None = None) -> None:
        self.hostname = hostname
        self.pid = pid

    def __str__(self) -> str:
        if not self.pid:
            return ""
        if self.hostname == platform.node():
            return f"pid={self.pid}"
        return f"{self.hostname}:{self.pid}"


# Ray Tune 1.13's `Trial(...)` settings that corral's runner takes from `tune.run` (the
# loop that runs the trial), with their defaults and where to give them instead.
_RUN_SETTINGS: dict[str, tuple[Any, str]] = {
    "stopping_criterion": (None, "tune.run(stop=...)"),
    "checkpoint_freq": (0, "tune.run(checkpoint_freq=...)"),
    "checkpoint_at_end": (False, "tune.run(checkpoint_at_end=...)"),
    "keep_checkpoints_num": (None, "tune.run(keep_checkpoints_num=...)"),
    "checkpoint_score_attr": (TRAINING_ITERATION, "tune.run(checkpoint_score_attr=...)"),
    "max_failures": (0, "tune.run(max_failures=...)"),
    "restore_path": (None, "tune.run(restore=...)"),
    "resources": (None, "tune.run(resources_per_trial=...)"),
    "placement_group_factory": (None, "tune.run(resources_per_trial=...)"),
}
# Those corral's runner does not build at all (tune.run refuses them too).
_NOT_BUILT: dict[str, tuple[Any, str]] = {
    "export_formats": (None, "no export at the end of a trial"),
    "trial_name_creator": (None, "trials are named <trainable>_<trial_id>"),
    "trial_dirname_creator": (None, "trial folders are named after the trial and its tag"),
    "log_to_file": (None, "the trainable's output is not redirected"),
    "remote_checkpoint_dir": (None, "no cloud checkpointing: checkpoints stay local"),
    "sync_function_tpl": (None, "no cloud syncing"),
    "sync_on_checkpoint": (True, "no cloud syncing"),
}


class Trial:
    """One run of a trainable with one resolved config (compared and hashed by identity,
    as Ray Tune's trials are: schedulers key their state by trial).

    Args:
        trainable_name: the trainable's name (an algorithm's, a registered one's).
        config: its resolved config (default ``{}``).
        trial_id: its id (default ``Trial.generate_id()``).
        local_dir: where ``init_logdir`` makes its folder (default
            ``default_results_dir()``); ``tune.run``'s trials get theirs in the
            experiment folder from the runner.
        evaluated_params: the values it drew from the search spaces, by path joined by "/".
        experiment_tag: its tag (shown in its name and folder).
        stub: do not look its trainable up (``get_trainable_cls`` gives None).
        **settings: the rest of Ray Tune 1.13's ``Trial`` arguments, taken at their
            defaults only: the stop rule, checkpointing, recoveries, restore and resources
            are ``tune.run``'s in corral's runner, which reads them from its loop (the
            error names the ``tune.run`` argument); export formats, name / folder
            creators, log files and cloud syncing are not built.

    Raises:
        TypeError: an argument Ray Tune 1.13's ``Trial`` does not take.
        ValueError: a setting above at another value than its default.
    """

    # Its statuses (Ray Tune's): it waits to start, trains, waits to resume, or ended.
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    TERMINATED = "TERMINATED"
    ERROR = "ERROR"

    def __init__(
        self,
        trainable_name: str,
        config: dict | None = None,
        trial_id: str | None = None,
        local_dir: str | None = None,
        evaluated_params: dict | None = None,
        experiment_tag: str = "",
        stub: bool = False,
        **settings: Any,
    ) -> None:
        _check_settings(settings)
        self.trainable_name = trainable_name
        self.config: dict = config if config is not None else {}
        self.trial_id: str = trial_id if trial_id is not None else Trial.generate_id()
        self.local_dir = local_dir
        # The values it drew from the config's grid_search and search spaces, by path
        # joined by "/" (Ray Tune's `evaluated_params`).
        self.evaluated_params: dict = evaluated_params if evaluated_params is not None else {}
        self.experiment_tag = experiment_tag
        self.stub = stub
        self.logdir: str | None = None
        self.last_result: dict = {}
        self.last_update_time = -float("inf")
        self.start_time: float | None = None
        # Its latest checkpoint (a path), and each checkpoint saved with the (flattened)
        # result it was saved after.
        self.checkpoint: str | None = None
        self.checkpoints: list = []
        self.status = Trial.PENDING  # then RUNNING (PAUSED between turns), TERMINATED or ERROR
        # Tune 1.13's per-metric summary over all results: metric (nested keys joined by
        # "/") -> {"max", "min", "avg", "last", "last-5-avg", "last-10-avg"}.
        self.metric_analysis: dict = {}
        # How often its trainable raised; the last such error, its traceback and the file
        # in the trial's logdir that holds the tracebacks (Ray Tune's `error.txt`).
        self.num_failures = 0
        self.error: BaseException | None = None
        self.error_msg: str | None = None
        self.error_file: str | None = None
        # Ended by an error of the run rather than its own (a hook, Ctrl-C): resumable.
        self.interrupted = False
        # Where it runs (`node_ip`), and what runs it: its trainable while it is built
        # (Ray's runner is the trainable's actor).
        self.location = Location()
        self.runner: Any = None
        # Ray Tune's asynchronous save / restore in flight; corral's are synchronous.
        self.saving_to: Any = None
        self.restoring_from: Any = None
        # Ray's resource request of the trial: corral's runner takes tune.run's.
        self.placement_group_factory: Any = None
        self._loop: Any = None  # the `TrialLoop` running it (its settings)
        self._history: dict = {}
        # Every result's numbers, flattened (for `ExperimentAnalysis.dataframe`).
        self._results: list = []

    def __str__(self) -> str:
        return f"{self.trainable_name}_{self.trial_id}"

    def __repr__(self) -> str:
        return str(self)

    @staticmethod
    def generate_id() -> str:
        """A new trial id: 8 hex digits (Ray Tune's)."""
        return uuid.uuid1().hex[:8]

    # -- the run's settings (tune.run's, read from the loop running the trial) ----------

    @property
    def stopping_criterion(self) -> dict:
        """``tune.run(stop={...})``'s criteria (``{}`` for a function or a stopper, or
        before the trial runs)."""
        return dict(getattr(self._loop, "stopping_criterion", None) or {})

    @property
    def checkpoint_freq(self) -> int:
        """``tune.run(checkpoint_freq=...)`` (0 before the trial runs)."""
        return self._loop.checkpoint_freq if self._loop is not None else 0

    @property
    def checkpoint_at_end(self) -> bool:
        """``tune.run(checkpoint_at_end=...)`` (False before the trial runs)."""
        return self._loop.checkpoint_at_end if self._loop is not None else False

    @property
    def keep_checkpoints_num(self) -> int | None:
        """``tune.run(keep_checkpoints_num=...)`` (None: all)."""
        return self._loop.keeper.num if self._loop is not None else None

    @property
    def checkpoint_score_attr(self) -> str:
        """``tune.run(checkpoint_score_attr=...)`` (default ``training_iteration``)."""
        if self._loop is None:
            return TRAINING_ITERATION
        keeper = self._loop.keeper
        return ("min-" if keeper.minimise else "") + keeper.score_attr

    @property
    def max_failures(self) -> int:
        """``tune.run(max_failures=...)`` (0 before the trial runs; -1: always recover)."""
        return self._loop.max_failures if self._loop is not None else 0

    @property
    def restore_path(self) -> str | None:
        """``tune.run(restore=...)``, the checkpoint every trial restores first."""
        return self._loop.restore if self._loop is not None else None

    @property
    def export_formats(self) -> list:
        """Always ``[]``: corral's runner exports nothing at the end of a trial."""
        return []

    @property
    def log_to_file(self) -> tuple[None, None]:
        """Always ``(None, None)``: corral's runner does not redirect output to files."""
        return (None, None)

    # -- results ------------------------------------------------------------------------

    @property
    def has_reported_at_least_once(self) -> bool:
        """Whether the trial has a result yet."""
        return bool(self.last_result)

    @property
    def node_ip(self) -> str | None:
        """The IP of the host it ran on (this host's, from its results; None before its
        first result)."""
        return self.location.hostname

    def update_last_result(self, result: dict) -> None:
        """Records a new result: `last_result`, `location` and `metric_analysis`."""
        self.set_location(Location(result.get(NODE_IP), result.get(PID)))
        self.last_result = result
        self.last_update_time = time.time()
        scalars = {}
        for key, value in flatten_dict({k: v for k, v in result.items() if k != CONFIG}).items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            scalars[key] = value
            values = self._history.setdefault(key, [])
            values.append(float(value))
            self.metric_analysis[key] = {
                "max": max(values),
                "min": min(values),
                "avg": sum(values) / len(values),
                "last": values[-1],
                "last-5-avg": sum(values[-5:]) / len(values[-5:]),
                "last-10-avg": sum(values[-10:]) / len(values[-10:]),
            }
        self._results.append(scalars)

    def should_stop(self, result: Mapping) -> bool:
        """Whether ``result`` ends the trial: ``done``, or one of ``stopping_criterion``'s
        thresholds met (a stop function or ``Stopper`` of ``tune.run`` is asked by the
        runner itself, not here).

        Raises:
            ValueError: a criterion the result has no key for (see
                ``corral.tune.stopping.met_criterion``).
        """
        if result.get(DONE):
            return True
        return met_criterion(self.stopping_criterion, result) is not None

    # -- checkpoints ----------------------------------------------------------------------

    @property
    def remote_checkpoint_dir(self) -> str | None:
        """Always None: corral keeps checkpoints in the trial's local folder (Ray Tune's
        per-trial cloud folder)."""
        return None

    @property
    def uses_cloud_checkpointing(self) -> bool:
        """Always False: no cloud checkpointing in corral."""
        return False

    @property
    def is_saving(self) -> bool:
        """Whether a save is in flight: never between turns (corral saves synchronously)."""
        return self.saving_to is not None

    @property
    def is_restoring(self) -> bool:
        """Whether a restore is in flight: never between turns (corral restores
        synchronously)."""
        return self.restoring_from is not None

    def should_checkpoint(self) -> bool:
        """Whether the trial's last result is due a checkpoint: ``done`` with
        ``checkpoint_at_end``, or an iteration that is a multiple of ``checkpoint_freq``."""
        result = self.last_result or {}
        if result.get(DONE) and self.checkpoint_at_end:
            return True
        freq = self.checkpoint_freq
        return bool(freq) and result.get(TRAINING_ITERATION, 0) % freq == 0

    def has_checkpoint(self) -> bool:
        """Whether the trial has a checkpoint to resume from."""
        return self.checkpoint is not None

    def clear_checkpoint(self) -> None:
        """Forgets the latest checkpoint (the trial then resumes from the start, or from
        ``tune.run(restore=...)``); the files stay."""
        self.checkpoint = None
        self.restoring_from = None

    def on_checkpoint(self, checkpoint: Any) -> None:
        """Records a checkpoint the trainable saved (a path, or an object whose ``value``
        is one) as the trial's latest, with the result it was saved after."""
        path = getattr(checkpoint, "value", checkpoint)
        if not isinstance(path, str):
            raise TypeError(f"on_checkpoint takes a checkpoint path, got {checkpoint!r}")
        self.checkpoint = path
        self.checkpoints = [(p, r) for p, r in self.checkpoints if p != path]
        self.checkpoints.append((path, self.last_result))

    def on_restore(self) -> None:
        """Ends a restore in flight (Ray Tune's asynchronous restore): its result becomes
        the last. Corral restores synchronously, so there is none between turns.

        Raises:
            RuntimeError: no restore is in flight (``is_restoring`` is False).
        """
        if self.restoring_from is None:
            raise RuntimeError(f"Trial {self} is not restoring (is_restoring is False)")
        self.last_result = getattr(self.restoring_from, "result", None) or {}
        self.restoring_from = None

    # -- failures -------------------------------------------------------------------------

    def should_recover(self) -> bool:
        """Whether a failure now would be retried: fewer failures so far than
        ``max_failures``, or ``max_failures`` < 0 (also without a checkpoint: then the
        trial starts again)."""
        return self.num_failures < self.max_failures or self.max_failures < 0

    def write_error_log(self, exc: BaseException | str | None = None) -> None:
        """Records a failure of the trial's trainable: ``num_failures`` grows by one,
        ``error`` / ``error_msg`` (the traceback) are set and, when its logdir exists,
        the message is appended to its ``error.txt`` (``error_file``). Without ``exc``:
        nothing (Ray Tune's).

        Unlike Ray Tune 1.13 the failure is counted also before the trial has a logdir
        (its trainable failed to build): ``max_failures`` counts it.
        """
        if exc is None:
            return
        self.num_failures += 1
        if isinstance(exc, BaseException):
            self.error = exc
            self.error_msg = "".join(traceback.format_exception(exc))
        else:
            self.error_msg = str(exc)
        if self.logdir and os.path.isdir(self.logdir):
            self.error_file = os.path.join(self.logdir, ERROR_FILE)
            when = time.strftime("%Y-%m-%d_%H-%M-%S")
            with open(self.error_file, "a", encoding="utf-8") as f:
                f.write(f"Failure # {self.num_failures} (occurred at {when})\n")
                f.write(self.error_msg + "\n")

    # -- state --------------------------------------------------------------------------

    def is_finished(self) -> bool:
        """Whether the trial has ended (TERMINATED or ERROR)."""
        return self.status in (Trial.TERMINATED, Trial.ERROR)

    def set_status(self, status: str) -> None:
        """Sets its status; the first RUNNING sets ``start_time``."""
        self.status = status
        if status == Trial.RUNNING and self.start_time is None:
            self.start_time = time.time()

    def set_config(self, config: dict) -> None:
        """Sets its config (a trainable built later gets it)."""
        self.config = config

    def set_experiment_tag(self, experiment_tag: str) -> None:
        """Sets its experiment tag."""
        self.experiment_tag = experiment_tag

    def set_location(self, location: Location) -> None:
        """Sets where it runs (``node_ip``)."""
        self.location = location

    def set_runner(self, runner: Any) -> None:
        """Sets what runs it: in corral, its trainable while built in this process (the
        runner does this; Ray Tune's runner is the trainable's actor), else None."""
        self.runner = runner

    def update_resources(self, resources: Any) -> None:
        """Not built: corral's runner gives every trial ``tune.run(resources_per_trial=...)``.

        Raises:
            ValueError: the trial is running (Ray Tune's rule).
            NotImplementedError: otherwise.
        """
        if self.status == Trial.RUNNING:
            raise ValueError("Cannot update resources while Trial is running.")
        raise NotImplementedError(
            f"Trial.update_resources({resources!r}): corral's trial runner gives every trial "
            "tune.run(resources_per_trial=...); per-trial resources are not built"
        )

    def get_trainable_cls(self) -> Any:
        """The trainable class its name resolves to (an algorithm's, a registered one's);
        None for a ``stub`` trial.

        Raises:
            ValueError: the name is neither registered nor an algorithm's.
        """
        if self.stub:
            return None
        from corral.tune.tune import _resolve_trainable

        return _resolve_trainable(self.trainable_name)

    def reset(self) -> Trial:
        """A new trial (a new id, PENDING, no results) with this one's name, config,
        folder root, drawn values and tag."""
        return Trial(
            self.trainable_name,
            config=self.config,
            local_dir=self.local_dir,
            evaluated_params=self.evaluated_params,
            experiment_tag=self.experiment_tag,
            stub=self.stub,
        )

    def init_logdir(self) -> None:
        """Makes its folder: a new one in ``local_dir`` (default ``default_results_dir()``)
        named after the trial and its tag, or its ``logdir`` if set (made if missing)."""
        if self.logdir:
            os.makedirs(self.logdir, exist_ok=True)
            return
        tag = _safe_tag(self.experiment_tag)
        self.logdir = new_logdir(f"{self}_{tag}", self.local_dir or default_results_dir())

    def invalidate_json_state(self) -> None:
        """Nothing to do: ``get_json_state`` is made afresh at each call (Ray Tune caches it
        until this is called)."""

    def get_json_state(self) -> str:
        """Its state as JSON: the row ``tune.run`` writes in ``experiment_state.json``
        (paths relative to ``local_dir``, else its folder's parent)."""
        from corral.tune.experiment_state import _trial_row

        root = self.local_dir or (os.path.dirname(self.logdir) if self.logdir else os.getcwd())
        return json.dumps(to_jsonable(_trial_row(self, root)), indent=2)


def _safe_tag(tag: str, max_length: int = 80) -> str:
    """A tag fit for a folder name: grid values can hold "/" or spaces; keep folder names
    portable and short."""
    return re.sub(r"[^A-Za-z0-9._=,+-]", "_", tag)[:max_length]


def _check_settings(settings: dict[str, Any]) -> None:
    for name, value in settings.items():
        if name == "_setup_default_resource":
            continue  # (Ray Tune's resume detail: nothing to set up here)
        if name in _RUN_SETTINGS:
            default, where = _RUN_SETTINGS[name]
            if not _is_default(value, default):
                raise ValueError(
                    f"Trial({name}={value!r}): corral's trial runner takes this from {where} "
                    "for every trial, not from the trial; give it there"
                )
        elif name in _NOT_BUILT:
            default, why = _NOT_BUILT[name]
            if not _is_default(value, default):
                raise ValueError(f"Trial({name}={value!r}) is not built in corral ({why})")
        else:
            raise TypeError(f"Trial() got an unexpected keyword argument {name!r}")


def _is_default(value: Any, default: Any) -> bool:
    if default is None:  # (also "off" as tune.run spells it: False, an empty list)
        empty = isinstance(value, dict | list | tuple) and not value
        return value is None or value is False or empty
    return value == default and type(value) is type(default)
