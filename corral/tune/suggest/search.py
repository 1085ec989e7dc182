"""``SearchAlgorithm``: where ``tune.run``'s trials come from (Ray Tune 1.13's interface).

``tune.run`` hands the search algorithm its experiment (``add_configurations``); its
``TrialRunner`` then asks it for the next trial (``next_trial``) whenever it needs one,
reports every result and every trial's end back to it, and the run is over once the
search algorithm ``is_finished()`` and no trial is left to run. ``BasicVariantGenerator``
(grid search and search spaces, the default) and ``SearchGenerator`` (trials from a
``Searcher``'s suggestions) are the two kinds.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Any

from corral.tune.experiment import Experiment
from corral.tune.trial import Trial


class SearchAlgorithm:
    """Makes the trials of one experiment, one ``next_trial()`` at a time.

    Subclasses implement ``add_configurations`` and ``next_trial``; ``set_finished()``
    says that no further trial will come.
    """

    _finished = False
    _metric: str | None = None

    @property
    def metric(self) -> str | None:
        """The result key the search algorithm optimises (None: none)."""
        return self._metric

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: Mapping, **spec: Any
    ) -> bool:
        """Takes ``tune.run``'s ``metric`` (and ``mode``, ``config``) where it has none of
        its own; False when it already has another metric (set it in one place)."""
        if self._metric and metric and self._metric != metric:
            return False
        if metric:
            self._metric = metric
        return True

    @property
    def total_samples(self) -> int:
        """How many trials it will make in all, where it knows (else 0)."""
        return 0

    def add_configurations(self, experiments: Experiment | Sequence[Experiment]) -> None:
        """Takes the experiment whose trials it makes (``tune.run`` makes it from its
        arguments: ``run`` is the trainable's name; ``spec`` holds ``config`` and
        ``num_samples``)."""
        raise NotImplementedError

    def next_trial(self) -> Trial | None:
        """A new trial, or None when there is none now (see ``is_finished``)."""
        raise NotImplementedError

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        """A result of a trial that goes on (flattened: nested keys joined by "/")."""

    def on_trial_complete(
        self, trial_id: str, result: dict | None = None, error: bool = False
    ) -> None:
        """A trial ended: with its last result (flattened), or ``error`` when it failed."""

    def is_finished(self) -> bool:
        """Whether it will make no further trial."""
        return self._finished

    def set_finished(self) -> None:
        """Marks it finished."""
        self._finished = True

    def has_checkpoint(self, dirpath: str) -> bool:
        """Whether ``dirpath`` holds a state ``save_to_dir`` wrote."""
        return False

    def save_to_dir(self, dirpath: str, session_str: str = "default") -> None:
        """Saves its state into the experiment folder ``dirpath`` (JSON only), for
        ``tune.run(resume=...)``."""

    def restore_from_dir(self, dirpath: str) -> None:
        """Restores the state ``save_to_dir`` saved into ``dirpath``."""

    def resume_trials(self, rows: Sequence[Mapping[str, Any]]) -> list[Trial]:
        """The trials an earlier run of this experiment made, made again (corral's hook for
        ``tune.run(resume=...)``): one per row of its ``experiment_state.json``, in order,
        each from what the row says it drew or was suggested; ``next_trial`` then goes on
        after them. The rest of the rows' state is put on them by the caller.

        Raises:
            ValueError: the rows cannot be this experiment's trials.
        """
        raise NotImplementedError(
            f"{type(self).__name__} cannot resume an experiment (corral resumes trials made by "
            "BasicVariantGenerator and by SearchGenerator / a Searcher)"
        )


class TrialIds:
    """Trial ids of one run: ``<5 hex digits of the run>_<index, 5 digits>``."""

    def __init__(self) -> None:
        self.prefix = uuid.uuid4().hex[:5]

    def __call__(self, index: int) -> str:
        return f"{self.prefix}_{index:05d}"


def single_experiment(experiments: Experiment | Sequence[Experiment]) -> Experiment:
    """The one experiment of ``add_configurations``'s argument.

    Raises:
        ValueError: it is not one ``Experiment``.
    """
    if isinstance(experiments, Experiment):
        return experiments
    found = list(experiments)
    if len(found) != 1 or not isinstance(found[0], Experiment):
        raise ValueError(
            f"A search algorithm makes the trials of one Experiment at a time, got {experiments!r}"
        )
    return found[0]
