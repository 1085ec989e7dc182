"""``SearchGenerator`` (Ray Tune 1.13's): the search algorithm that makes a trial from
each of a ``Searcher``'s suggestions. ``tune.run(search_alg=searcher)`` wraps a
``Searcher`` in one."""

from __future__ import annotations

import copy
import glob
import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

from corral.tune import experiment_state
from corral.tune.experiment import Experiment
from corral.tune.logger import _write_json_atomically, flatten_dict
from corral.tune.suggest.repeater import warn_num_samples
from corral.tune.suggest.search import SearchAlgorithm, TrialIds, single_experiment
from corral.tune.suggest.suggestion import Searcher, read_json_state
from corral.tune.suggest.variant_generator import (
    check_num_samples,
    deep_update,
    format_vars,
    has_unresolved_values,
    unflatten_dict,
)
from corral.tune.trial import Trial

logger = logging.getLogger(__name__)


class SearchGenerator(SearchAlgorithm):
    """Makes ``num_samples`` trials, each from ``searcher.suggest(trial_id)`` put over the
    experiment's config, and tells the searcher of their results and ends. It is
    finished once it made ``num_samples`` trials or the searcher answered
    ``Searcher.FINISHED``; while the searcher answers None, no trial comes.

    Args:
        searcher: the ``Searcher`` (possibly wrapped: ``ConcurrencyLimiter``, ``Repeater``).
    """

    # Its own state in the experiment folder (the searcher's is `Searcher.CKPT_FILE_TMPL`).
    CKPT_FILE_TMPL = "search_gen_state-{}.json"

    def __init__(self, searcher: Searcher) -> None:
        if not isinstance(searcher, Searcher):
            raise TypeError(f"SearchGenerator takes a Searcher, got {type(searcher).__name__}")
        self.searcher = searcher
        self._experiment: Experiment | None = None
        self._config: dict = {}
        self._counter = 0  # trials made
        self._total_samples = 0
        self._ids = TrialIds()

    @property
    def metric(self) -> str | None:
        return self.searcher.metric

    @property
    def total_samples(self) -> int:
        return self._total_samples

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: Mapping, **spec: Any
    ) -> bool:
        return self.searcher.set_search_properties(metric, mode, config, **spec)

    def add_configurations(self, experiments: Experiment | Sequence[Experiment]) -> None:
        """Takes the experiment: its ``config`` (the base of every suggestion) and
        ``num_samples`` (how many trials)."""
        if self._experiment is not None:
            raise ValueError("SearchGenerator makes the trials of one experiment only")
        experiment = single_experiment(experiments)
        num_samples = experiment.spec.get("num_samples", 1)
        check_num_samples(num_samples)
        self._experiment = experiment
        self._config = dict(experiment.spec.get("config") or {})
        self._total_samples = num_samples
        warn_num_samples(self.searcher, num_samples)

    def next_trial(self) -> Trial | None:
        """A trial of the searcher's next suggestion; None when it has none now or the
        search is over."""
        if self._experiment is None:
            raise RuntimeError("SearchGenerator.next_trial before add_configurations")
        if self.is_finished():
            return None
        trial_id = self._ids(self._counter)
        suggestion = self.searcher.suggest(trial_id)
        if isinstance(suggestion, str) and suggestion == Searcher.FINISHED:
            self.set_finished()
            return None
        if suggestion is None:
            return None
        if not isinstance(suggestion, Mapping):
            raise TypeError(
                f"{type(self.searcher).__name__}.suggest({trial_id!r}) returned {suggestion!r}: "
                "expected a dict (a config), None (none now) or Searcher.FINISHED"
            )
        return self._make_trial(trial_id, suggestion)

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        self.searcher.on_trial_result(trial_id, result)

    def on_trial_complete(
        self, trial_id: str, result: dict | None = None, error: bool = False
    ) -> None:
        self.searcher.on_trial_complete(trial_id, result=result, error=error)

    def is_finished(self) -> bool:
        return self._counter >= self._total_samples or self._finished

    def resume_trials(self, rows: Sequence[Mapping[str, Any]]) -> list[Trial]:
        """The saved trials, each made again from its saved suggestion (checked by
        ``experiment_state.resumed_suggestion``: plain JSON values this config allows)."""
        if len(rows) > self._total_samples:
            raise ValueError(
                f"it holds {len(rows)} trials, this call's num_samples is {self._total_samples}"
            )
        trials = []
        for row in rows:
            params = experiment_state.resumed_suggestion(row, self._config)
            trials.append(self._make_trial(str(row["trial_id"]), unflatten_dict(params)))
        return trials

    def _make_trial(self, trial_id: str, suggestion: Mapping) -> Trial:
        assert self._experiment is not None
        config = deep_update(copy.deepcopy(self._config), suggestion)
        if has_unresolved_values(config):
            raise ValueError(
                f"{type(self.searcher).__name__}.suggest({trial_id!r}) left search spaces or "
                f"grid_search values of the config unresolved ({suggestion!r}); a Searcher "
                "that takes tune.run's config must suggest a value for each"
            )
        self._counter += 1
        params = flatten_dict(dict(suggestion))
        return Trial(
            trainable_name=str(self._experiment.run),
            config=config,
            trial_id=trial_id,
            experiment_tag=f"{self._counter}_{format_vars(params)}",
            evaluated_params=params,
        )

    # -- state (JSON only) ---------------------------------------------------

    def _chain(self) -> tuple[list[Searcher], Searcher]:
        """The wrappers around the base searcher (outermost first), and the base."""
        wrappers = []
        searcher = self.searcher
        while isinstance(getattr(searcher, "searcher", None), Searcher):
            wrappers.append(searcher)
            searcher = searcher.searcher  # type: ignore[attr-defined]
        return wrappers, searcher

    def save_to_dir(self, dirpath: str, session_str: str = "default") -> None:
        """Writes its state and the wrappers' (``ConcurrencyLimiter``, ``Repeater``) to
        ``search_gen_state-<session>.json``, and has the base searcher save its own
        (``Searcher.save_to_dir``: JSON, or nothing)."""
        wrappers, base = self._chain()
        state = {
            "counter": self._counter,
            "finished": self._finished,
            "wrappers": [{"name": type(w).__name__, "state": _state_of(w)} for w in wrappers],
        }
        base.save_to_dir(dirpath, session_str)
        os.makedirs(dirpath, exist_ok=True)
        _write_json_atomically(
            os.path.join(dirpath, self.CKPT_FILE_TMPL.format(session_str)), state
        )

    def has_checkpoint(self, dirpath: str) -> bool:
        return bool(self._checkpoints(dirpath))

    def restore_from_dir(self, dirpath: str) -> None:
        """Puts back what ``save_to_dir`` wrote (the number of trials made comes from
        ``resume_trials``); a base searcher that saved no state starts afresh (with a
        warning: it hears of resumed trials it did not suggest)."""
        wrappers, base = self._chain()
        if not base.has_checkpoint(dirpath):
            logger.warning(
                "Resuming %s: %s saved no state (no get_state, or not JSON), so it starts "
                "afresh and hears of the resumed trials it did not suggest",
                dirpath,
                type(base).__name__,
            )
        found = self._checkpoints(dirpath)
        if not found:
            return
        state = read_json_state(max(found, key=os.path.getmtime))
        if not isinstance(state, dict):
            raise ValueError(f"{found[0]} holds no search generator state")
        self._finished = bool(state.get("finished", False))
        saved = state.get("wrappers") or []
        names = [type(w).__name__ for w in wrappers]
        if [entry.get("name") for entry in saved] != names:
            raise ValueError(
                f"Cannot resume {dirpath}: its searcher was wrapped in "
                f"{[entry.get('name') for entry in saved]}, this call's in {names}"
            )
        for wrapper, entry in zip(wrappers, saved):
            if entry.get("state") is not None:
                wrapper.set_state(entry["state"])
        if base.has_checkpoint(dirpath):
            base.restore_from_dir(dirpath)

    def _checkpoints(self, dirpath: str) -> list[str]:
        return glob.glob(os.path.join(glob.escape(dirpath), self.CKPT_FILE_TMPL.format("*")))


def _state_of(wrapper: Searcher) -> dict | None:
    """A wrapper's ``get_state()``; None for one that has none (it starts afresh)."""
    try:
        return wrapper.get_state()
    except NotImplementedError:
        return None
