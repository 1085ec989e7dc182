"""The loop of one trial: restore, train until the stop rule, checkpoint, stop.

``tune.run`` builds each trial's trainable and hands it to ``TrialLoop.run``; ``corral
train`` builds its trainer (turning config mistakes into one-line errors) and hands it
to the same method, with a ``Callback`` for its live display. Stop criteria are
``corral.tune.stopping``'s, checkpoint pruning is ``CheckpointKeeper``'s: one loop.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from corral.tune.callback import Callback
from corral.tune.result import (
    DONE,
    EPISODE_REWARD_MEAN,
    RESULT_DUPLICATE,
    SHOULD_CHECKPOINT,
    TIME_TOTAL_S,
    TIMESTEPS_TOTAL,
    TRAINING_ITERATION,
)
from corral.tune.stopping import StopFn, metric_value
from corral.tune.trainable import Trainable
from corral.tune.trial import Trial

logger = logging.getLogger(__name__)

# The file in a trial's logdir that holds its trainable's tracebacks (Ray Tune's name).
ERROR_FILE = "error.txt"


@dataclass
class TrialLoop:
    """How trials train: the stop rule, checkpointing and hooks, shared by every trial.

    Attributes:
        should_stop: ``stop(trial_id, result)``; see ``stopping.stop_condition``. A
            result with ``done=True`` ends the trial too.
        restore: a checkpoint every trial restores before its first iteration.
        checkpoint_freq: save every this many iterations (0: never). A result with
            ``should_checkpoint=True`` is saved after too (a function trainable's
            ``tune.checkpoint_dir``).
        checkpoint_at_end: save once more at the end (also when an exception such as
            Ctrl-C's ``KeyboardInterrupt`` ends the loop, but not after the trainable itself
            raised) unless that iteration was just saved.
        keeper: saves and prunes checkpoints (default: keeps all).
        callbacks: hooks called at each event (``tune.Callback``).
        verbose: 1 a line when a trial ends, 2 also a line per iteration.
    """

    should_stop: StopFn
    restore: str | None = None
    checkpoint_freq: int = 0
    checkpoint_at_end: bool = False
    keeper: CheckpointKeeper = field(default_factory=lambda: CheckpointKeeper())
    callbacks: Sequence[Callback] = ()
    verbose: int = 0
    max_failures: int = 0

    def run(
        self,
        trial: Trial,
        trainable: Trainable | Callable[[], Trainable],
        trials: list[Trial] | None = None,
    ) -> None:
        """Runs ``trial`` to the end; always stops its trainable.

        Builds the trainable (when given a function that builds it), restores ``restore``
        (if set), calls the hooks' ``on_trial_start``, trains and ends with
        ``on_trial_complete``. ``trial.status`` follows: RUNNING, then TERMINATED or
        ERROR; ``trial.logdir`` is the trainable's unless already set. ``trials``
        (default ``[trial]``) is every trial of the run, for the hooks.

        When the trainable raises (building, restoring, training or saving), the error is
        recorded on the trial (``error``, ``error_msg``, ``num_failures``, and
        ``error.txt`` in its logdir). With ``max_failures`` left and a function to build
        it, a new trainable restores the trial's latest checkpoint (else ``restore``, else
        starts afresh) and trains on, after ``on_trial_recover``. Otherwise, or when
        anything else raises (a hook, Ctrl-C), ``on_trial_error`` is called and the
        exception re-raised.
        """
        trials = trials if trials is not None else [trial]
        restore = self.restore
        while True:
            try:
                self._run_once(trial, trainable, trials, restore)
                return
            except Exception as error:
                if error is not trial.error or not self._recovers(trial, trainable):
                    raise
                restore = trial.checkpoint or self.restore
                logger.warning(
                    "Trial %s failed (%d of at most %s recoveries), recovering from %s: %s",
                    trial,
                    trial.num_failures,
                    "unlimited" if self.max_failures < 0 else self.max_failures,
                    restore or "the start",
                    error,
                )

    def _recovers(self, trial: Trial, trainable: Any) -> bool:
        if isinstance(trainable, Trainable):
            return False  # a built trainable cannot be built again
        return self.max_failures < 0 or trial.num_failures <= self.max_failures

    def _run_once(
        self,
        trial: Trial,
        trainable: Trainable | Callable[[], Trainable],
        trials: list[Trial],
        restore: str | None,
    ) -> None:
        trial.status = "RUNNING"
        built: Trainable | None = None
        try:
            built = self._trainable_call(trial, trainable) if callable(trainable) else trainable
            trial.logdir = trial.logdir or built.logdir
            if restore:
                self._trainable_call(trial, built.restore, restore)
            self._call("on_trial_start", built, trials, trial)
            self._train(trial, built, trials)
            trial.status = "TERMINATED"
            self._call("on_trial_complete", built, trials, trial)
        except BaseException as error:
            trial.status = "ERROR"
            recovers = error is trial.error and self._recovers(trial, trainable)
            hook = "on_trial_recover" if recovers else "on_trial_error"
            if built is not None:
                self._call(hook, built, trials, trial)
            raise
        finally:
            if built is not None:
                built.stop()
                if self.verbose >= 1:
                    print(f"Trial {trial} {trial.status} after {built.iteration} iterations")

    def _trainable_call(self, trial: Trial, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)``, a call into the trainable: an exception is recorded on ``trial``
        as the trial's failure (what ``max_failures`` and Tune's ``fail_fast`` act on)."""
        try:
            return fn(*args)
        except Exception as error:
            record_failure(trial, error)
            raise

    def _train(self, trial: Trial, trainable: Trainable, trials: list[Trial]) -> None:
        """Trains until a result is ``done`` or meets the stop rule, checkpointing."""

        def save() -> None:
            path = self._trainable_call(trial, self.keeper.save, trial, trainable)
            self._call("on_checkpoint", trainable, trials, trial, path)

        failed = False  # the trainable raised: its state is not saved at the end
        try:
            while True:
                result = self._trainable_call(trial, trainable.train)
                if result.get(RESULT_DUPLICATE):
                    # A function trainable's function returned: its last result was final.
                    trial.last_result = {**trial.last_result, DONE: True}
                    if result.get(SHOULD_CHECKPOINT):
                        save()
                    return
                trial.update_last_result(result)
                self._call("on_trial_result", trainable, trials, trial, result)
                if self.verbose >= 2:
                    print(f"Trial {trial} iteration {trainable.iteration}: {_summary(result)}")
                if result.get(SHOULD_CHECKPOINT) or (
                    self.checkpoint_freq and trainable.iteration % self.checkpoint_freq == 0
                ):
                    save()
                if result.get(DONE) or self.should_stop(trial.trial_id, result):
                    return
        except Exception as error:
            failed = error is trial.error
            raise
        finally:
            if (
                self.checkpoint_at_end
                and not failed
                and trainable.iteration
                and not _checkpointed_now(trial, trainable)
            ):
                save()

    def _call(self, hook: str, trainable: Trainable, *args: Any) -> None:
        # Ray Tune's argument order: (iteration, trials, trial, [result | checkpoint]).
        for callback in self.callbacks:
            getattr(callback, hook)(trainable.iteration, *args, trainable=trainable)


def record_failure(trial: Trial, error: BaseException) -> None:
    """Records the trainable's ``error`` on ``trial``: ``error``, ``num_failures``,
    ``error_msg`` (the traceback) and, in the trial's logdir, ``error.txt`` (appended to,
    one traceback per failure, as Ray Tune writes it)."""
    trial.error = error
    trial.num_failures += 1
    trial.error_msg = "".join(traceback.format_exception(error))
    if trial.logdir and os.path.isdir(trial.logdir):
        trial.error_file = os.path.join(trial.logdir, ERROR_FILE)
        when = time.strftime("%Y-%m-%d_%H-%M-%S")
        with open(trial.error_file, "a", encoding="utf-8") as f:
            f.write(f"Failure # {trial.num_failures} (occurred at {when})\n")
            f.write(trial.error_msg + "\n")


class CheckpointKeeper:
    """Saves a trial's checkpoints and keeps at most ``num`` of them (None: all).

    Checkpoints are ranked by the result they were saved after, by ``score_attr``
    (default ``training_iteration``; ``"min-<key>"`` ranks the lowest best). The
    newest checkpoint is never deleted, nor are the ``num`` best; a checkpoint
    whose result lacks the key ranks last.
    """

    def __init__(self, num: int | None = None, score_attr: str | None = None) -> None:
        if num is not None and (isinstance(num, bool) or not isinstance(num, int) or num < 1):
            raise ValueError(f"keep_checkpoints_num must be an int >= 1 or None, got {num!r}")
        self.num = num
        score_attr = score_attr or TRAINING_ITERATION
        self.minimise = score_attr.startswith("min-")
        self.score_attr = score_attr[4:] if self.minimise else score_attr

    def save(self, trial: Trial, trainable: Trainable) -> str:
        """Saves a checkpoint of ``trainable``, records it on ``trial``, prunes; returns it."""
        path = trainable.save()
        trial.checkpoint = path
        trial.checkpoints = [(p, r) for p, r in trial.checkpoints if p != path]
        trial.checkpoints.append((path, trial.last_result))
        if self.num is not None and len(trial.checkpoints) > self.num:
            self._prune(trial)
        return path

    def _score(self, result: dict) -> float:
        value = metric_value(result, self.score_attr)
        if value is None:
            return -math.inf
        return -value if self.minimise else value

    def _prune(self, trial: Trial) -> None:
        ranked = sorted(trial.checkpoints, key=lambda entry: self._score(entry[1]), reverse=True)
        keep = {path for path, _ in ranked[: self.num]} | {trial.checkpoint}
        for path, _ in trial.checkpoints:
            if path not in keep:
                shutil.rmtree(path, ignore_errors=True)
        trial.checkpoints = [(p, r) for p, r in trial.checkpoints if p in keep]


def _checkpointed_now(trial: Trial, trainable: Trainable) -> bool:
    expected = f"checkpoint_{trainable.iteration:06d}"
    return trial.checkpoint is not None and os.path.basename(trial.checkpoint) == expected


def _summary(result: dict) -> str:
    keys = (EPISODE_REWARD_MEAN, TIMESTEPS_TOTAL, TIME_TOTAL_S)
    return ", ".join(f"{k}={result[k]}" for k in keys if result.get(k) is not None)
