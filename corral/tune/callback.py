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

    ``iteration`` is the trainable's training iteration at the time of the call,
    ``trials`` every trial of the run, ``trial`` the one the event is about. Trials run
    one after another in this process, so ``info`` also holds ``trainable=``, the live
    trainable (a corral addition: under Ray it lives in another process).

    An exception raised by a hook ends the trial as an error, the trainable stopped, and
    ends the run (as a hook's error ends a Ray Tune run).
    """

    def on_trial_start(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        """The trial's trainable is built (and restored, if asked); no iteration has run."""

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
