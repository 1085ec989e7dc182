"""The loop of one trial: restore, train until the stop rule, checkpoint, stop.

``tune.run`` builds each trial's trainable and hands it to ``TrialLoop.run``; ``corral
train`` builds its trainer (turning config mistakes into one-line errors) and hands it
to the same method, with a ``Callback`` for its live display. Stop criteria are
``corral.tune.stopping``'s, checkpoint pruning is ``CheckpointKeeper``'s: one loop.
"""

from __future__ import annotations

import math
import os
import shutil
from collections.abc import Sequence
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
            Ctrl-C's ``KeyboardInterrupt`` ends the loop) unless that iteration was
            just saved.
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

    def run(self, trial: Trial, trainable: Trainable, trials: list[Trial] | None = None) -> None:
        """Runs ``trial`` on its built ``trainable`` to the end; always stops the trainable.

        Restores ``restore`` first (if set), then calls the hooks' ``on_trial_start``,
        trains and ends with ``on_trial_complete`` or, when anything raises (a hook, the
        trainable, Ctrl-C), ``on_trial_error`` with the exception re-raised.
        ``trial.status`` follows: RUNNING, then TERMINATED or ERROR; ``trial.logdir``
        is the trainable's unless already set. ``trials`` (default ``[trial]``) is every
        trial of the run, for the hooks.
        """
        trials = trials if trials is not None else [trial]
        trial.status = "RUNNING"
        trial.logdir = trial.logdir or trainable.logdir
        try:
            if self.restore:
                trainable.restore(self.restore)
            self._call("on_trial_start", trainable, trials, trial)
            self._train(trial, trainable, trials)
            trial.status = "TERMINATED"
            self._call("on_trial_complete", trainable, trials, trial)
        except BaseException:
            trial.status = "ERROR"
            self._call("on_trial_error", trainable, trials, trial)
            raise
        finally:
            trainable.stop()
            if self.verbose >= 1:
                print(f"Trial {trial} {trial.status} after {trainable.iteration} iterations")

    def _train(self, trial: Trial, trainable: Trainable, trials: list[Trial]) -> None:
        """Trains until a result is ``done`` or meets the stop rule, checkpointing."""

        def save() -> None:
            path = self.keeper.save(trial, trainable)
            self._call("on_checkpoint", trainable, trials, trial, path)

        try:
            while True:
                result = trainable.train()
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
        finally:
            if (
                self.checkpoint_at_end
                and trainable.iteration
                and not _checkpointed_now(trial, trainable)
            ):
                save()

    def _call(self, hook: str, trainable: Trainable, *args: Any) -> None:
        # Ray Tune's argument order: (iteration, trials, trial, [result | checkpoint]).
        for callback in self.callbacks:
            getattr(callback, hook)(trainable.iteration, *args, trainable=trainable)


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
