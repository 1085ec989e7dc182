"""``Callback``: hooks into the trial loop, as Ray Tune's ``tune.Callback``.

``tune.run(..., callbacks=[...])`` calls them; ``corral train`` shows its live display
through one. The methods and their positional arguments are Ray Tune 1.x's, so a
callback written for Ray (``on_trial_result(self, iteration, trials, trial, result,
**info)``) runs here unchanged.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from corral.tune.trial import Trial


class Callback:
    """Base class of trial-loop hooks; every method does nothing unless overridden.

    In the hooks about one trial (``on_trial_*``, ``on_checkpoint``) ``iteration`` is
    that trial's training iteration at the time of the call (Ray Tune 1.13 passes its
    loop's step counter there too: corral's ``corral train`` display relies on the
    trial's), ``trials`` every trial of the run, ``trial`` the one the event is about.
    Trials run in this process, so ``info`` of those hooks also holds ``trainable=``, the
    live trainable (a corral addition: under Ray it lives in another process), except
    ``on_trial_complete`` of a waiting trial its scheduler ends (``TrialRunner.stop_trial``:
    it has none).

    The hooks about the loop (Ray Tune 1.13's): ``setup`` once before the first trial,
    ``on_step_begin`` / ``on_step_end`` around each step of the loop (one trial's turn:
    starting it, one iteration, its checkpoints, its end), with ``iteration`` the loop's
    step counter (0 at the first step; it grows by one before ``on_step_end``), and
    ``on_experiment_end`` once after the last trial ended (not when an exception ends
    the run). ``corral train`` calls only the trial and step hooks (one trial, no
    experiment). With ``"backend": "ray"`` ``tune.run`` refuses ``callbacks``: Ray Tune
    runs the trials and calls its own callbacks (pass them to ``ray.tune.run``).

    An exception raised by a hook ends the trial as an error, the trainable stopped, and
    ends the run (as a hook's error ends a Ray Tune run).
    """

    def setup(
        self,
        stop: Any = None,
        num_samples: int | None = None,
        total_num_samples: int | None = None,
        **info: Any,
    ) -> None:
        """Called once before the first trial starts.

        Args:
            stop: ``tune.run``'s ``stop`` as given (a dict, a function, a ``Stopper``).
            num_samples: ``tune.run``'s ``num_samples``.
            total_num_samples: how many trials the search algorithm will make in all
                (grid combinations times ``num_samples``).
            **info: also ``time_budget_s``, as ``tune.run`` got it.
        """

    def on_step_begin(self, iteration: int, trials: list[Trial], **info: Any) -> None:
        """A step of the loop begins (``iteration``: the loop's step counter)."""

    def on_step_end(self, iteration: int, trials: list[Trial], **info: Any) -> None:
        """A step of the loop ended (the counter already counts it)."""

    def on_trial_start(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        """The trial's trainable is built (and restored, if asked); no iteration has run."""

    def on_trial_restore(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        """The trial's trainable restored a checkpoint folder: ``tune.run(restore=...)``,
        a paused trial resuming, a failed one recovering (called after
        ``on_trial_start`` of that build). Not for a state handed over in memory
        (population-based training's exploit)."""

    def on_trial_save(self, iteration: int, trials: list[Trial], trial: Trial, **info: Any) -> None:
        """A checkpoint has been saved (right after ``on_checkpoint``): ``trial.checkpoint``."""

    def on_trial_result(
        self, iteration: int, trials: list[Trial], trial: Trial, result: dict, **info: Any
    ) -> None:
        """One training iteration has ended with ``result``."""

    def on_checkpoint(
        self, iteration: int, trials: list[Trial], trial: Trial, checkpoint: str, **info: Any
    ) -> None:
        """A checkpoint has been saved to the folder ``checkpoint``."""

    def on_trial_complete(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        """The trial met its stop criteria (or reported ``done``)."""

    def on_trial_error(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        """The trial ended by an exception (Ctrl-C's ``KeyboardInterrupt`` included)."""

    def on_trial_recover(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        """The trial's trainable raised and the trial starts again from its latest
        checkpoint (``tune.run(max_failures=...)``)."""

    def on_experiment_end(self, trials: list[Trial], **info: Any) -> None:
        """Every trial has ended and the run is over (not called when an exception,
        Ctrl-C included, ends the run)."""
