"""Synchronous HyperBand (Li et al. 2018, arXiv:1603.06560), as Ray Tune 1.13's
``HyperBandScheduler``.

New trials fill brackets in turn. A band has ``s_max + 1`` brackets, ``s_max =
round(log(max_t) / log(reduction_factor))``; bracket ``s`` (0 to ``s_max``, filled in that
order, then a new band starts) takes ``ceil((s_max + 1) / (s + 1) * reduction_factor**s)``
trials and halves them ``s`` times. Its trials run to the first milestone,
``int(max_t * reduction_factor**-s)`` units of ``time_attr``, and each waits there, paused
(checkpointed), until every live trial of the bracket has reached it; then the top
``1 / reduction_factor`` of them (by ``metric``, rounded up) go on to the next milestone,
``reduction_factor`` times further, and the others stop. The last milestone is ``max_t``,
where the trials stop (``stop_last_trials``). A bracket whose first milestone would be 0
is skipped. A free slot goes to a waiting trial of the least advanced bracket (its share
of the bracket's work done), the first band first.

Differences from Ray Tune 1.13: the milestones after the first are ``int(max_t *
reduction_factor**(k - s))`` (HyperBand's ``r_i``), so the last one is ``max_t``, where
Ray Tune's stop short of it (54 for ``max_t=81``, ``reduction_factor=3``: its last step
is ``max_t`` minus the milestone before); a trial that reaches ``max_t`` stops at once
(Ray Tune pauses it until the others of its bracket reach it too); a finished trial of a
resumed run (``tune.run(resume=...)``) joins no bracket, the unfinished ones join
brackets afresh (Ray Tune keeps no scheduler state across a resume either).
"""

from __future__ import annotations

import collections
import logging
import math
from typing import Any

from corral.tune.schedulers.trial_scheduler import FIFOScheduler, TrialScheduler
from corral.tune.session import DEFAULT_METRIC
from corral.tune.trial import Trial

logger = logging.getLogger(__name__)


class HyperBandScheduler(FIFOScheduler):
    """Runs brackets of trials to milestones and keeps the best of each bracket at each
    one; see the module's docstring for the schedule.

    A trial that waits at a milestone is paused: it saves a checkpoint and resumes from
    it, so a ``Trainable`` class needs ``save_checkpoint`` / ``load_checkpoint`` and a
    function trainable must write a checkpoint (``tune.checkpoint_dir``) at least at
    each milestone and take a ``checkpoint_dir`` argument. A paused trial stopped by a
    halving ends TERMINATED, and the search algorithm hears its end without a result
    (Ray Tune's rule: ``TrialRunner.stop_trial``; Optuna counts it as pruned). A trial
    that ends by itself (its stop rule) or fails leaves its bracket, which then halves
    without it.

    Args:
        time_attr: the result key that measures training progress (it should grow).
        metric: the result key to compare trials by (or ``tune.run(metric=...)``; with a
            mode and no metric anywhere, ``"_metric"``, a function trainable's unnamed
            value).
        mode: "max" or "min" (or ``tune.run(mode=...)``).
        max_t: the last milestone: a trial stops there (see ``stop_last_trials``).
        reduction_factor: HyperBand's eta: milestones are this factor apart, and the top
            ``1 / reduction_factor`` of a bracket go on at each.
        stop_last_trials: stop the trials at ``max_t`` (False: those left after the last
            halving run on, until their stop rule).
    """

    def __init__(
        self,
        time_attr: str = "training_iteration",
        metric: str | None = None,
        mode: str | None = None,
        max_t: float = 81,
        reduction_factor: float = 3,
        stop_last_trials: bool = True,
    ) -> None:
        if isinstance(max_t, bool) or not isinstance(max_t, int | float) or not max_t > 0:
            raise ValueError(f"max_t must be a number > 0, got {max_t!r}")
        if (
            isinstance(reduction_factor, bool)
            or not isinstance(reduction_factor, int | float)
            or not reduction_factor > 1
        ):
            raise ValueError(f"reduction_factor must be a number > 1, got {reduction_factor!r}")
        if mode not in (None, "max", "min"):
            raise ValueError(f"mode must be 'max' or 'min', got {mode!r}")
        self._time_attr = time_attr
        self._metric, self._mode = metric, mode
        self._max_t = max_t
        self._eta = reduction_factor
        self._stop_last_trials = stop_last_trials
        # How many brackets a band has: s_max + 1.
        self._band_size = int(round(math.log(max_t) / math.log(reduction_factor))) + 1
        # The bands, each a list of brackets in the order they were made (None: a
        # bracket skipped, its first milestone 0).
        self._bands: list[list[_Bracket | None]] = [[]]
        self._filling: _Bracket | None = None  # the bracket new trials join
        self._bracket_of: dict[str, _Bracket] = {}  # by trial_id
        self._num_stopped = 0

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        if not super().set_search_properties(metric, mode, **spec):
            return False
        if self._metric is None and self._mode:
            self._metric = DEFAULT_METRIC  # (Ray Tune's anonymous metric)
        return True

    # -- the schedule ----------------------------------------------------------

    def _new_bracket(self) -> _Bracket:
        """The next bracket of the schedule (a new band when the last one is full)."""
        while True:
            band = self._bands[-1]
            if len(band) == self._band_size:
                band = []
                self._bands.append(band)
            s = len(band)
            bracket = _Bracket(self, s)
            if bracket.milestone > 0:
                band.append(bracket)
                return bracket
            logger.info("HyperBand: bracket %d of a band has no time to run (skipped)", s)
            band.append(None)

    def on_trial_add(self, trial_runner: Any, trial: Trial) -> None:
        """Puts the trial into the bracket being filled (a new one when it is full); a
        finished trial (of a resumed run) joins none."""
        self._metric_op()  # a clear error now rather than at the first result
        if trial.is_finished():
            return
        if self._filling is None or self._filling.filled():
            self._filling = self._new_bracket()
        self._filling.add(trial)
        self._bracket_of[trial.trial_id] = self._filling

    def on_trial_result(self, trial_runner: Any, trial: Trial, result: dict) -> str:
        """CONTINUE below the bracket's milestone; at it, PAUSE until the bracket's other
        live trials reach it too, and the last to reach it halves the bracket: the
        losers stop (STOP for this trial, ``trial_runner.stop_trial`` for paused ones),
        the winners go on (CONTINUE, or PENDING for paused ones). STOP at ``max_t``
        (with ``stop_last_trials``).

        Raises:
            ValueError: the result lacks ``time_attr`` or the metric.
        """
        for key in (self._time_attr, self._metric):
            if key not in result:
                raise ValueError(
                    f"HyperBandScheduler: the result of trial {trial} has no {key!r} (its "
                    f"keys: {', '.join(sorted(map(str, result)))}): report it, or pass the "
                    "time_attr / metric the trainable reports"
                )
        bracket = self._bracket_of.get(trial.trial_id)
        if bracket is None:
            return TrialScheduler.CONTINUE  # (not scheduled: a trial added while finished)
        bracket.record(trial, result)
        if bracket.runs_on(trial):
            return TrialScheduler.CONTINUE
        return self._settle(trial_runner, bracket, trial)

    def _settle(self, trial_runner: Any, bracket: _Bracket, current: Trial | None) -> str:
        """Halves ``bracket`` while every live trial of it has reached its milestone (the
        last milestone excepted); then stops the trials at ``max_t`` (with
        ``stop_last_trials``) and wakes those below the milestone. Returns what the
        ``current`` trial (which just reached the milestone; None: none) does next."""
        action = TrialScheduler.PAUSE
        while bracket.live_trials() and bracket.round_done() and not bracket.at_last_milestone():
            for loser in bracket.halve(self._metric_op(), self._metric or DEFAULT_METRIC):
                self._num_stopped += 1
                action = self._end(trial_runner, bracket, loser, current) or action
        last = bracket.at_last_milestone()
        for trial in bracket.live_trials():
            if last and self._stop_last_trials and not bracket.runs_on(trial):
                action = self._end(trial_runner, bracket, trial, current) or action
            elif bracket.runs_on(trial) or last:
                if trial is current:
                    action = TrialScheduler.CONTINUE
                elif trial.status == Trial.PAUSED:
                    trial.status = Trial.PENDING  # (it resumes from its checkpoint)
        return action

    def _end(
        self, trial_runner: Any, bracket: _Bracket, trial: Trial, current: Trial | None
    ) -> str | None:
        """Takes ``trial`` out of ``bracket`` and ends it: STOP when it is ``current``,
        else ``trial_runner.stop_trial`` (it waits, paused or pending)."""
        bracket.remove(trial)
        self._bracket_of.pop(trial.trial_id, None)
        if trial is current:
            return TrialScheduler.STOP
        if trial.status not in (Trial.PAUSED, Trial.PENDING):
            raise RuntimeError(
                f"HyperBandScheduler: trial {trial} is to stop at a milestone while "
                f"{trial.status} (expected paused there)"
            )
        trial_runner.stop_trial(trial)
        return None

    def on_trial_remove(self, trial_runner: Any, trial: Trial) -> None:
        """The trial leaves its bracket, which halves without it if the others all wait
        at its milestone."""
        bracket = self._bracket_of.pop(trial.trial_id, None)
        if bracket is not None:
            bracket.remove(trial)
            self._settle(trial_runner, bracket, None)

    def on_trial_complete(self, trial_runner: Any, trial: Trial, result: dict) -> None:
        self.on_trial_remove(trial_runner, trial)

    def on_trial_error(self, trial_runner: Any, trial: Trial) -> None:
        self.on_trial_remove(trial_runner, trial)

    def choose_trial_to_run(self, trial_runner: Any) -> Trial | None:
        """A pending trial of the least advanced bracket (the first band first); trials
        paused at a milestone wait for their bracket's halving."""
        for band in self._bands:
            brackets = [b for b in band if b is not None]
            for bracket in sorted(brackets, key=lambda b: b.completion()):
                for trial in bracket.live_trials():
                    if trial.status == Trial.PENDING:
                        return trial
        return None

    # -- reporting ---------------------------------------------------------------

    def state(self) -> dict[str, int]:
        """How many brackets were made and how many trials were stopped."""
        return {"num_brackets": self._num_brackets(), "num_stopped": self._num_stopped}

    def _num_brackets(self) -> int:
        return sum(len(band) for band in self._bands)

    def debug_string(self) -> str:
        """The counts, then each band's brackets: size, milestone, share of its work done
        and its trials' statuses."""
        lines = [
            f"Using HyperBand: num_stopped={self._num_stopped} "
            f"total_brackets={self._num_brackets()}"
        ]
        for i, band in enumerate(self._bands):
            lines.append(f"Round #{i}:")
            lines += [f"  {bracket.debug_string()}" for bracket in band if bracket is not None]
        return "\n".join(lines)


class _Bracket:
    """One bracket: its trials, the milestone they run to and how many stay after each
    halving."""

    def __init__(self, scheduler: HyperBandScheduler, s: int) -> None:
        self._time_attr = scheduler._time_attr
        self._max_t = scheduler._max_t
        self._eta = scheduler._eta
        self._s = s
        self.halvings = 0  # done so far
        self.size = math.ceil(scheduler._band_size / (s + 1) * self._eta**s)
        self.milestone = self._milestone(0)
        self._live: dict[str, tuple[Trial, dict | None]] = {}  # by trial_id: latest result
        self._trials: list[Trial] = []  # every trial it took
        self._progress = 0.0  # time_attr units its trials ran
        self._work = self._total_work()

    def _milestone(self, halvings: int) -> float:
        """The milestone after ``halvings`` halvings (HyperBand's ``r_i``): ``max_t`` after
        the last."""
        if halvings >= self._s:
            return self._max_t
        # (A hair added: 27 * 3**-1 must not floor to 8.)
        return int(self._max_t * self._eta ** (halvings - self._s) + 1e-9)

    def _total_work(self) -> float:
        """The ``time_attr`` units the bracket's trials run when it is full."""
        work, size, before = 0.0, self.size, 0.0
        for k in range(self._s + 1):
            milestone = self._milestone(k)
            work += size * (milestone - before)
            size, before = math.ceil(size / self._eta), milestone
        return work

    def filled(self) -> bool:
        return len(self._live) >= self.size

    def add(self, trial: Trial) -> None:
        self._live[trial.trial_id] = (trial, None)
        self._trials.append(trial)

    def remove(self, trial: Trial) -> None:
        self._live.pop(trial.trial_id, None)

    def live_trials(self) -> list[Trial]:
        return [trial for trial, _ in self._live.values()]

    def _time(self, result: dict | None) -> float:
        return 0.0 if result is None else float(result[self._time_attr])

    def record(self, trial: Trial, result: dict) -> None:
        """Takes the trial's latest result."""
        before = self._time(self._live[trial.trial_id][1])
        now = self._time(result)
        if now < before:
            logger.info(
                "HyperBand: trial %s went back from %s=%s to %s (restored)",
                trial,
                self._time_attr,
                before,
                now,
            )
        self._progress += max(now - before, 0.0)
        self._live[trial.trial_id] = (trial, result)

    def runs_on(self, trial: Trial) -> bool:
        """Whether the trial has not reached the milestone yet."""
        return self._time(self._live[trial.trial_id][1]) < self.milestone

    def at_last_milestone(self) -> bool:
        return self.halvings >= self._s

    def round_done(self) -> bool:
        """Whether every live trial has reached the milestone."""
        return all(self._time(result) >= self.milestone for _, result in self._live.values())

    def halve(self, sign: float, metric: str) -> list[Trial]:
        """Moves on to the next milestone with the top ``1 / eta`` of the live trials
        (rounded up; of equals, the later added); returns the others, the losers (still
        in the bracket)."""
        self.halvings += 1
        self.size = math.ceil(self.size / self._eta)
        self.milestone = self._milestone(self.halvings)
        ranked = sorted(self._live.values(), key=lambda entry: _score(entry[1], sign, metric))
        return [trial for trial, _ in ranked[: max(len(ranked) - self.size, 0)]]

    def completion(self) -> float:
        """The share of the bracket's work done (1 once its trials all left)."""
        if not self._live and self._trials:
            return 1.0
        return min(self._progress / self._work, 1.0) if self._work > 0 else 1.0

    def debug_string(self) -> str:
        counts = collections.Counter(t.status for t in self._trials)
        statuses = ", ".join(f"{k}: {v}" for k, v in sorted(counts.items()))
        return (
            f"Bracket(Max Size (n)={self.size}, Milestone (r)={self.milestone}, "
            f"completed={self.completion():.1%}): {{{statuses}}}"
        )


def _score(result: dict | None, sign: float, metric: str) -> float:
    """Higher is better; a missing or NaN metric is the worst."""
    if result is None:
        return -math.inf
    value = float(result[metric])
    return -math.inf if math.isnan(value) else sign * value
