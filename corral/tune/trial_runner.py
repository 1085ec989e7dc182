"""The loop of one trial: restore, train until the stop rule, checkpoint, stop; and the
``TrialRunner`` that runs the trials of one ``tune.run``.

``tune.run`` builds each trial's trainable and hands it to ``TrialLoop.run``; ``corral
train`` builds its trainer (turning config mistakes into one-line errors) and hands it
to the same method, with a ``Callback`` for its live display. Stop criteria are
``corral.tune.stopping``'s, checkpoint pruning is ``CheckpointKeeper``'s: one loop. The
``TrialRunner`` asks its search algorithm (``corral.tune.suggest``) for each new trial.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from corral.tune import experiment_state
from corral.tune.callback import Callback
from corral.tune.logger import flatten_dict
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
from corral.tune.suggest.basic_variant import BasicVariantGenerator
from corral.tune.suggest.search import SearchAlgorithm
from corral.tune.trainable import Trainable, checkpoint_folder, checkpoint_to_object
from corral.tune.trial import Trial

logger = logging.getLogger(__name__)


@dataclass
class TrialLoop:
    """How trials train: the stop rule, checkpointing, hooks and scheduler, shared by
    every trial.

    Attributes:
        should_stop: ``stop(trial_id, result)``; see ``stopping.stop_condition``. A
            result with ``done=True`` ends the trial too.
        restore: a checkpoint every trial restores before its first iteration.
        checkpoint_freq: save every this many iterations (0: never). A result with
            ``should_checkpoint=True`` is saved after too (a function trainable's
            ``tune.checkpoint_dir``).
        checkpoint_at_end: save once more at the end (also when the scheduler stops the
            trial early, or an exception such as Ctrl-C's ``KeyboardInterrupt`` ends the
            loop, but not after the trainable itself raised) unless that iteration was
            just saved.
        keeper: saves and prunes checkpoints (default: keeps all).
        callbacks: hooks called at each event (``tune.Callback``).
        verbose: 1 a line when a trial ends, 2 also a line per iteration.
        max_failures: how often a failed trial is built again (-1: always).
        scheduler: decides after each result whether the trial goes on, pauses or stops
            (``corral.tune.schedulers``); None: every trial goes on until its stop rule.
        runner: what the scheduler's hooks get as ``trial_runner`` (its ``get_trials()``).
        search_alg: hears each result of a trial that goes on (``on_trial_result``, the
            result flattened); None: no one does.
        steps: the loop's step counter (Ray Tune's ``TrialRunner`` iteration): the steps
            taken so far, what the callbacks' ``on_step_begin`` / ``on_step_end`` get.
        stopping_criterion: ``tune.run(stop={...})``'s criteria, for the trials'
            ``stopping_criterion`` / ``should_stop`` (``should_stop`` above is the rule
            the loop asks).
    """

    should_stop: StopFn
    restore: str | None = None
    checkpoint_freq: int = 0
    checkpoint_at_end: bool = False
    keeper: CheckpointKeeper = field(default_factory=lambda: CheckpointKeeper())
    callbacks: Sequence[Callback] = ()
    verbose: int = 0
    max_failures: int = 0
    scheduler: Any = None
    runner: Any = None
    search_alg: Any = None
    steps: int = 0
    stopping_criterion: dict = field(default_factory=dict)

    def run(
        self,
        trial: Trial,
        trainable: Trainable | Callable[[], Trainable],
        trials: list[Trial] | None = None,
    ) -> None:
        """Runs ``trial`` to the end (``TrialRun``, one iteration after another), each
        iteration a step of the loop (``begin_step`` / ``end_step``)."""
        run = TrialRun(self, trial, trainable, trials)
        while True:
            self.begin_step(run.trials)
            ended = run.step()
            self.end_step(run.trials)
            if ended:
                return

    def begin_step(self, trials: list[Trial]) -> None:
        """A step of the loop begins: the callbacks' ``on_step_begin``."""
        for callback in self.callbacks:
            callback.on_step_begin(iteration=self.steps, trials=trials)

    def end_step(self, trials: list[Trial]) -> None:
        """A step of the loop ended: the counter grows by one, then the callbacks'
        ``on_step_end`` (Ray Tune 1.13's order)."""
        self.steps += 1
        for callback in self.callbacks:
            callback.on_step_end(iteration=self.steps, trials=trials)

    def _call(self, hook: str, trainable: Trainable, *args: Any) -> None:
        # Ray Tune's argument order: (iteration, trials, trial, [result | checkpoint]).
        for callback in self.callbacks:
            getattr(callback, hook)(trainable.iteration, *args, trainable=trainable)


class TrialRun:
    """One trial's life, an iteration per ``step()``, so that several trials can take
    turns (``tune.run`` with a scheduler) or one can run to its end (``TrialLoop.run``).

    The first step builds the trainable (when given a function that builds it),
    restores ``loop.restore`` (if set) and calls the hooks' ``on_trial_start``. Each step
    trains one iteration, records the result, asks the stop rule, then the scheduler,
    and checkpoints; the last ends with ``on_trial_complete``. ``trial.status`` follows:
    RUNNING, then TERMINATED, PAUSED or ERROR; ``trial.logdir`` is the trainable's unless
    already set. ``trials`` (default ``[trial]``) is every trial of the run, for the hooks.

    ``restore`` (default ``loop.restore``): the checkpoint the first build restores (a
    resumed trial's latest). When the trainable raises (building, restoring, training or
    saving), the error is recorded on the trial (``error``, ``error_msg``,
    ``num_failures``, and ``error.txt`` in its logdir). With ``max_failures`` left and
    a function to build it, the next step builds a new trainable that restores the
    trial's latest checkpoint (else ``restore``, else starts afresh), after
    ``on_trial_recover``. Otherwise, or when anything else raises (a hook, the scheduler,
    Ctrl-C), ``on_trial_error`` is called and the exception re-raised. The trainable is
    always stopped when the trial ends.
    """

    def __init__(
        self,
        loop: TrialLoop,
        trial: Trial,
        trainable: Trainable | Callable[[], Trainable],
        trials: list[Trial] | None = None,
        restore: str | None = None,
    ) -> None:
        self.loop = loop
        self.trial = trial
        trial._loop = loop  # (the trial's settings: tune.run's, this loop's)
        self.trials = trials if trials is not None else [trial]
        self._build = trainable
        self.trainable: Trainable | None = None
        # What the next build restores: a checkpoint folder, or `save_to_object` bytes.
        self._restore: str | bytes | None = restore or loop.restore
        # A state to rebuild from after the current step (`restart_from`).
        self._restart: bytes | None = None

    # -- the steps -----------------------------------------------------------

    def step(self) -> bool:
        """Trains one iteration (building the trainable first if needed); True once the
        trial has ended (TERMINATED or PAUSED: then its trainable is stopped)."""
        trial = self.trial
        try:
            if self.trainable is None:
                self._start()
            assert self.trainable is not None
            decision = self._iterate(self.trainable)
            if decision == "STOP":
                self._finish()
                return True
            if decision == "PAUSE":
                self.pause()
                return True
            if self._restart is not None:
                self._stop_trainable()
                self._restore, self._restart = self._restart, None
            return False
        except BaseException as error:
            failed = error is trial.error
            if not failed and self.trainable is not None:
                self._checkpoint_at_end()  # (Ctrl-C, a hook: the state is sound)
            recovers = failed and self._recovers()
            trial.status = "ERROR"
            trial.interrupted = not failed
            if self.trainable is not None:
                self.loop._call(
                    "on_trial_recover" if recovers else "on_trial_error",
                    self.trainable,
                    self.trials,
                    trial,
                )
            self._stop_trainable()
            if not recovers:
                raise
            self._restore = trial.checkpoint or self.loop.restore
            logger.warning(
                "Trial %s failed (%d of at most %s recoveries), recovering from %s: %s",
                trial,
                trial.num_failures,
                "unlimited" if self.loop.max_failures < 0 else self.loop.max_failures,
                self._restore or "the start",
                error,
            )
            return False

    def stop(self) -> None:
        """Ends the trial now as if its stop rule had been met (checkpoint at end,
        TERMINATED, ``on_trial_complete``); a trial not built yet just terminates."""
        if self.trainable is None:
            self.trial.status = "TERMINATED"
            return
        self._finish()

    def pause(self) -> None:
        """Saves a checkpoint, stops the trainable and marks the trial PAUSED; a later
        ``step()`` builds it again from that checkpoint (or from the one
        ``restart_from`` gave)."""
        if self._restart is not None:
            self._restore, self._restart = self._restart, None
        elif self.trainable is not None:
            self._save(self.trainable)
            self._restore = self.trial.checkpoint
        self._stop_trainable()
        self.trial.status = "PAUSED"

    def restart_from(self, checkpoint: bytes) -> None:
        """Rebuilds the trainable (with the trial's config as it is then) from
        ``checkpoint`` (``save_to_object`` bytes) once the current step is over, or, when
        it is paused, when it resumes: population-based training's exploit, which gives
        the trial another trial's state."""
        if self.trainable is None:
            self._restore = checkpoint
        else:
            self._restart = checkpoint

    def save_to_object(self) -> bytes:
        """The trial's state now, in memory (``Trainable.save_to_object``); of a paused
        trial, the state it resumes from.

        Raises:
            RuntimeError: the trial has no state (never started, or paused without one).
        """
        if self.trainable is not None:
            return self._trainable_call(self.trainable.save_to_object)
        if isinstance(self._restore, bytes):
            return self._restore
        if self._restore and self.trial.status == Trial.PAUSED:
            return checkpoint_to_object(checkpoint_folder(self._restore))
        raise RuntimeError(f"Trial {self.trial} is not running: nothing to save")

    # -- inside a step -------------------------------------------------------

    def _start(self) -> None:
        trial = self.trial
        trial.set_status(Trial.RUNNING)
        trial.interrupted = False
        build = self._build
        self.trainable = built = self._trainable_call(build) if callable(build) else build
        trial.set_runner(built)
        trial.logdir = trial.logdir or built.logdir
        restored_folder = False
        if isinstance(self._restore, bytes):
            self._trainable_call(built.restore_from_object, self._restore)
        elif self._restore:
            self._trainable_call(built.restore, self._restore)
            restored_folder = True
        self.loop._call("on_trial_start", built, self.trials, trial)
        if restored_folder:
            self.loop._call("on_trial_restore", built, self.trials, trial)

    def _iterate(self, trainable: Trainable) -> str:
        """One ``train()``: records the result; returns "CONTINUE", "PAUSE" or "STOP"."""
        trial, loop = self.trial, self.loop
        result = self._trainable_call(trainable.train)
        if result.get(RESULT_DUPLICATE):
            # A function trainable's function returned: its last result was final.
            trial.last_result = {**trial.last_result, DONE: True}
            if result.get(SHOULD_CHECKPOINT):
                self._save(trainable)
            return "STOP"
        trial.update_last_result(result)
        loop._call("on_trial_result", trainable, self.trials, trial, result)
        if loop.verbose >= 2:
            print(f"Trial {trial} iteration {trainable.iteration}: {_summary(result)}")
        if result.get(DONE) or loop.should_stop(trial.trial_id, result):
            decision = "STOP"
        elif loop.scheduler is not None:
            decision = loop.scheduler.on_trial_result(loop.runner, trial, result)
        else:
            decision = "CONTINUE"
        if decision != "STOP" and loop.search_alg is not None:
            # (Ray Tune's rule: a stopped trial's last result goes to on_trial_complete.)
            loop.search_alg.on_trial_result(trial.trial_id, flatten_dict(result))
        if result.get(SHOULD_CHECKPOINT) or (
            loop.checkpoint_freq and trainable.iteration % loop.checkpoint_freq == 0
        ):
            self._save(trainable)
        return decision

    def _finish(self) -> None:
        assert self.trainable is not None
        self._checkpoint_at_end()
        self.trial.status = "TERMINATED"
        self.loop._call("on_trial_complete", self.trainable, self.trials, self.trial)
        self._stop_trainable()

    def _checkpoint_at_end(self) -> None:
        trainable = self.trainable
        if (
            self.loop.checkpoint_at_end
            and trainable is not None
            and trainable.iteration
            and not _checkpointed_now(self.trial, trainable)
        ):
            self._save(trainable)

    def _save(self, trainable: Trainable) -> None:
        path = self._trainable_call(self.loop.keeper.save, self.trial, trainable)
        self.loop._call("on_checkpoint", trainable, self.trials, self.trial, path)
        self.loop._call("on_trial_save", trainable, self.trials, self.trial)

    def _stop_trainable(self) -> None:
        built, self.trainable = self.trainable, None
        if built is not None:
            self.trial.set_runner(None)
            built.stop()
            if self.loop.verbose >= 1 and self.trial.status != "RUNNING":
                print(f"Trial {self.trial} {self.trial.status} after {built.iteration} iterations")

    def _recovers(self) -> bool:
        if not callable(self._build):
            return False  # a built trainable cannot be built again
        max_failures = self.loop.max_failures
        return max_failures < 0 or self.trial.num_failures <= max_failures

    def _trainable_call(self, fn: Callable[..., Any], *args: Any) -> Any:
        """``fn(*args)``, a call into the trainable: an exception is recorded on the trial
        as its failure (what ``max_failures`` and Tune's ``fail_fast`` act on)."""
        try:
            return fn(*args)
        except Exception as error:
            record_failure(self.trial, error)
            raise


class TrialRunner:
    """The trials of one ``tune.run``, made by its search algorithm and started, paused
    and stopped as its scheduler says.

    Whenever a slot is free, the runner first asks the search algorithm for new trials
    while fewer of its trials wait to start than it may have waiting (Ray Tune 1.13's
    rule): any number for ``BasicVariantGenerator``, which so makes all its trials at
    once; one for any other, so that a searcher suggests a trial only when it can start,
    having heard of the trials before it. The slot then goes to the trial the scheduler's
    ``choose_trial_to_run`` picks. Up to ``max_concurrent`` trials are live
    at once and take turns, an iteration each; one slot with ``FIFOScheduler`` runs the
    trials one after another. The search algorithm hears every result of a trial that
    goes on and every trial's end; the run is over when no trial is live and none can
    start. The scheduler's hooks get this object as ``trial_runner``.

    Args:
        search_alg: makes the trials (``corral.tune.suggest``; ``add_configurations``
            already called).
        loop: how each trial trains (its ``scheduler``, ``runner`` and ``search_alg`` are
            set here).
        build: ``build(trial)`` -> a function that builds the trial's trainable from
            ``trial.config`` as it is when called.
        scheduler: a ``corral.tune.schedulers.TrialScheduler``.
        trials: trials made before (a resumed run's), in order; new ones follow them.
        max_concurrent: how many trials are live at once (None: no limit).
        deadline: the ``time.monotonic()`` after which no trial starts (None: never).
        fail_fast: Tune's: False (a failed trial ends, the others go on), True (the
            others are stopped, no further trial starts) or "raise" (its error is raised).
        experiment_dir: the experiment's folder (schedulers' logs, and the run's state
            for ``tune.run(resume=...)``: the trials' ``experiment_state.json``, written
            whenever a trial starts, saves, pauses or ends, and the search algorithm's
            ``save_to_dir``); None: no state is written.
        stop_all: Ray Tune's ``Stopper.stop_all``, asked after every step: once True, the
            live trials stop (checkpoint at end, TERMINATED), the waiting ones end
            TERMINATED without starting, and the search algorithm makes no more.

    Each trial's turn is a step of the loop: the callbacks' ``on_step_begin`` and
    ``on_step_end`` around it (``TrialLoop.begin_step``), and their
    ``on_experiment_end`` once the run is over.
    """

    def __init__(
        self,
        search_alg: SearchAlgorithm,
        loop: TrialLoop,
        build: Callable[[Trial], Callable[[], Trainable]],
        scheduler: Any,
        trials: Sequence[Trial] = (),
        max_concurrent: int | None = 1,
        deadline: float | None = None,
        fail_fast: bool | str = False,
        experiment_dir: str | None = None,
        stop_all: Callable[[], bool] | None = None,
    ) -> None:
        self.search_alg = search_alg
        self.trials = list(trials)
        self.loop = loop
        loop.scheduler, loop.runner, loop.search_alg = scheduler, self, search_alg
        self.scheduler = scheduler
        self.max_concurrent = math.inf if max_concurrent is None else max_concurrent
        self.experiment_dir = experiment_dir
        self._build = build
        self._deadline = deadline
        self._fail_fast = fail_fast
        self._stop_all = stop_all
        self._start_time = time.time()
        # (Ray Tune's name of a run: when it started.)
        self._session_str = time.strftime("%Y-%m-%d_%H-%M-%S")
        # Ray Tune 1.13's rule: only BasicVariantGenerator makes trials ahead of need (a
        # searcher's suggestions should see the results of the trials before them).
        self._max_pending = math.inf if isinstance(search_alg, BasicVariantGenerator) else 1
        self._runs: dict[str, TrialRun] = {}  # every trial started, by id
        self._live: dict[str, TrialRun] = {}  # those running now, in turn order
        self._halted = False
        self._saved_signature: list | None = None

    # -- what schedulers call -------------------------------------------------

    def get_trials(self) -> list[Trial]:
        """Every trial of the run made so far."""
        return self.trials

    def get_live_trials(self) -> list[Trial]:
        """The trials running now."""
        return [run.trial for run in self._live.values()]

    def save_to_object(self, trial: Trial) -> bytes:
        """A running trial's state, in memory (``Trainable.save_to_object``); a paused
        trial's, the state it resumes from."""
        return self._runs[trial.trial_id].save_to_object()

    def restart_trial(self, trial: Trial, config: dict, checkpoint: bytes, tag: str) -> None:
        """Gives a started trial a new config and another state: its trainable is rebuilt
        with ``config`` and restored from ``checkpoint`` (``save_to_object`` bytes) after
        its current iteration (a paused trial: when it resumes); ``tag`` becomes its
        experiment tag."""
        trial.config = config
        trial.experiment_tag = tag
        self._runs[trial.trial_id].restart_from(checkpoint)

    def stop_trial(self, trial: Trial) -> None:
        """Ends a waiting (pending or paused) trial without running it again, as Ray Tune
        1.13's ``TrialRunner.stop_trial``: it becomes TERMINATED, the scheduler hears
        ``on_trial_remove``, the search algorithm ``on_trial_complete`` without a result
        (it did not end by a result of its own), the callbacks ``on_trial_complete``
        (without ``trainable=``: it has none). A finished trial is left as it is.

        Raises:
            ValueError: the trial is live (it takes turns now): a scheduler stops it by
                returning STOP from ``on_trial_result``.
        """
        if trial.is_finished():
            return
        if trial.trial_id in self._live:
            raise ValueError(
                f"stop_trial({trial}): the trial is running; a scheduler stops a running "
                "trial by returning TrialScheduler.STOP from on_trial_result"
            )
        trial.status = Trial.TERMINATED
        self.scheduler.on_trial_remove(self, trial)
        self.search_alg.on_trial_complete(trial.trial_id)
        iteration = trial.last_result.get(TRAINING_ITERATION, 0)
        for callback in self.loop.callbacks:
            callback.on_trial_complete(iteration, self.trials, trial)

    def runner_data(self) -> dict[str, Any]:
        """What the run's state records of the runner (Ray Tune 1.13's ``runner_data``,
        the part that applies here): its session name, step counter, start time, and
        its settings."""
        return {
            "_session_str": self._session_str,
            "_iteration": self.loop.steps,
            "_start_time": self._start_time,
            "_fail_fast": self._fail_fast,
            "_max_concurrent": None if math.isinf(self.max_concurrent) else self.max_concurrent,
            "_max_pending_trials": None if math.isinf(self._max_pending) else self._max_pending,
            "_search_alg": type(self.search_alg).__name__,
            "_scheduler_alg": type(self.scheduler).__name__,
        }

    # -- the run ----------------------------------------------------------------

    def run(self) -> None:
        """Runs the trials until none is left to make, start or resume.

        Raises:
            Exception: an error of the run itself (a stop rule, a hook, the scheduler,
                the search algorithm, Ctrl-C), or a trial's with ``fail_fast="raise"``;
                the live trials' trainables are stopped first.
        """
        for trial in self.trials:
            self.scheduler.on_trial_add(self, trial)
        try:
            while self._fill():
                for trial_id in list(self._live):
                    if self._halted:
                        break
                    self._step(self._live[trial_id])
                    self._save_state()
                if self._halted:
                    for run in list(self._live.values()):
                        self._end(run, stopped=True)
            if not (self._halted or self._out_of_time() or self.search_alg.is_finished()):
                logger.warning(
                    "%s made no further trial although it is not finished, and no trial is "
                    "left to run: the run ends (a Searcher ends its search with "
                    "Searcher.FINISHED)",
                    type(self.search_alg).__name__,
                )
        finally:
            for run in self._live.values():  # (only after an exception)
                try:
                    run._checkpoint_at_end()
                except Exception:
                    logger.exception("Trial %s: the checkpoint at end failed", run.trial)
                run._stop_trainable()
            self._live.clear()
            self._save_state(force=True)
        for callback in self.loop.callbacks:
            callback.on_experiment_end(trials=self.trials)

    def _fill(self) -> bool:
        """Starts (or resumes) trials while slots are free, making new ones as needed;
        False when none is live."""
        while (
            len(self._live) < self.max_concurrent and not self._halted and not self._out_of_time()
        ):
            self._add_trials()
            trial = self.scheduler.choose_trial_to_run(self)
            if trial is None:
                break
            if trial.status not in (Trial.PENDING, Trial.PAUSED):
                raise RuntimeError(
                    f"{type(self.scheduler).__name__}.choose_trial_to_run returned trial "
                    f"{trial}, which is {trial.status}, not PENDING or PAUSED"
                )
            run = self._runs.get(trial.trial_id)
            if run is None:
                # (A resumed trial goes on from its latest checkpoint.)
                run = self._runs[trial.trial_id] = TrialRun(
                    self.loop, trial, self._build(trial), self.trials, restore=trial.checkpoint
                )
            trial.set_status(Trial.RUNNING)
            self._live[trial.trial_id] = run
            self._save_state()
        return bool(self._live)

    def _add_trials(self) -> None:
        """Asks the search algorithm for new trials while fewer than it may have wait to
        start (and it makes any)."""
        pending = sum(t.status == Trial.PENDING for t in self.trials)
        while pending < self._max_pending and not self.search_alg.is_finished():
            trial = self.search_alg.next_trial()
            if trial is None:
                return
            self.trials.append(trial)
            self.scheduler.on_trial_add(self, trial)
            pending += 1

    def _out_of_time(self) -> bool:
        return self._deadline is not None and time.monotonic() >= self._deadline

    def _save_state(self, force: bool = False) -> None:
        """Writes the run's state for ``tune.run(resume=...)`` if the trials' changed (or
        ``force``): the trials', then the search algorithm's."""
        if self.experiment_dir is None:
            return
        signature = [
            (t.status, t.checkpoint, t.num_failures, t.experiment_tag) for t in self.trials
        ]
        if force or signature != self._saved_signature:
            experiment_state.save(
                self.experiment_dir,
                self.trials,
                runner_data=self.runner_data(),
                stats={"start_time": self._start_time, "timestamp": time.time()},
            )
            self.search_alg.save_to_dir(self.experiment_dir)
            self._saved_signature = signature

    def _step(self, run: TrialRun) -> None:
        """One step of the loop: ``run``'s turn, between the step hooks; then asks the
        stopper whether the whole experiment stops."""
        self.loop.begin_step(self.trials)
        self._take_turn(run)
        self.loop.end_step(self.trials)
        if self._stop_all is not None and not self._halted and self._stop_all():
            logger.info("The stopper's stop_all() is True: every trial stops")
            self._halted = True
            self.search_alg.set_finished()
            for trial in self.trials:
                if trial.status in (Trial.PENDING, Trial.PAUSED) and trial.trial_id not in (
                    self._live
                ):
                    trial.status = Trial.TERMINATED

    def _take_turn(self, run: TrialRun) -> None:
        trial = run.trial
        try:
            ended = run.step()
        except Exception as error:
            del self._live[trial.trial_id]
            if error is not trial.error or self._fail_fast == "raise":
                raise  # an error of the run itself, or Tune's "raise"
            logger.error("Trial %s errored:\n%s", trial, trial.error_msg)
            self.scheduler.on_trial_error(self, trial)
            self.search_alg.on_trial_complete(trial.trial_id, error=True)
            if self._fail_fast:
                self._halted = True  # the others stop, the pending ones stay PENDING
            return
        if ended:
            self._end(run, stopped=False)

    def _end(self, run: TrialRun, stopped: bool) -> None:
        """Takes an ended (or, ``stopped``, a live) trial out of the turns."""
        trial = run.trial
        del self._live[trial.trial_id]
        if stopped:
            run.stop()
        if trial.status == Trial.TERMINATED:
            self.scheduler.on_trial_complete(self, trial, trial.last_result)
            self.search_alg.on_trial_complete(
                trial.trial_id, result=flatten_dict(trial.last_result)
            )


def record_failure(trial: Trial, error: BaseException) -> None:
    """Records the trainable's ``error`` on ``trial``: ``error``, ``num_failures``,
    ``error_msg`` (the traceback) and, in the trial's logdir, ``error.txt`` (appended to,
    one traceback per failure, as Ray Tune writes it): ``Trial.write_error_log``."""
    trial.write_error_log(error)


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
        trial.on_checkpoint(path)
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
                shutil.rmtree(checkpoint_folder(path), ignore_errors=True)
        trial.checkpoints = [(p, r) for p, r in trial.checkpoints if p in keep]


def _checkpointed_now(trial: Trial, trainable: Trainable) -> bool:
    expected = f"checkpoint_{trainable.iteration:06d}"
    return (
        trial.checkpoint is not None
        and os.path.basename(checkpoint_folder(trial.checkpoint)) == expected
    )


def _summary(result: dict) -> str:
    keys = (EPISODE_REWARD_MEAN, TIMESTEPS_TOTAL, TIME_TOTAL_S)
    return ", ".join(f"{k}={result[k]}" for k in keys if result.get(k) is not None)
