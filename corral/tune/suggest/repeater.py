"""``Repeater`` (Ray Tune 1.13's): each suggested config runs several times, and the
searcher hears the average of those trials' results, for noisy objectives such as RL
returns."""

from __future__ import annotations

import copy
import logging
import math
from collections.abc import Mapping
from typing import Any

from corral.tune.logger import to_jsonable
from corral.tune.stopping import metric_value
from corral.tune.suggest.suggestion import Searcher

logger = logging.getLogger(__name__)

# The config key that tells a repeated trial its index in its group (0, 1, ...).
TRIAL_INDEX = "__trial_index__"


class _TrialGroup:
    """The trials that run one suggested config: the first one's id is the group's."""

    def __init__(self, primary_trial_id: str, config: Any, max_trials: int) -> None:
        self.primary_trial_id = primary_trial_id
        self.config = config
        self.max_trials = max_trials
        self.scores: dict[str, float | None] = {primary_trial_id: None}

    def add(self, trial_id: str) -> None:
        assert len(self.scores) < self.max_trials
        self.scores.setdefault(trial_id, None)

    def full(self) -> bool:
        return len(self.scores) == self.max_trials

    def finished_reporting(self) -> bool:
        return self.full() and all(score is not None for score in self.scores.values())

    def to_json(self) -> dict:
        return {
            "primary_trial_id": self.primary_trial_id,
            "config": self.config,
            "max_trials": self.max_trials,
            "scores": self.scores,
        }

    @classmethod
    def from_json(cls, data: Mapping) -> _TrialGroup:
        group = cls(str(data["primary_trial_id"]), data["config"], int(data["max_trials"]))
        group.scores = {str(k): v for k, v in dict(data["scores"]).items()}
        return group


class Repeater(Searcher):
    """Runs each config ``searcher`` suggests ``repeat`` times; once all of them have
    ended, ``searcher.on_trial_complete`` gets the first trial's id with the mean of
    their final ``searcher.metric`` values (NaN values and trials without it left out).

    ``tune.run``'s ``num_samples`` counts every trial, repeats included: set it to a
    multiple of ``repeat``.

    Args:
        searcher: the searcher whose suggestions are repeated (it needs a metric).
        repeat: how many trials per suggestion.
        set_index: put each trial's index in its group into its config as
            ``"__trial_index__"`` (e.g. to seed it).
    """

    def __init__(self, searcher: Searcher, repeat: int = 1, set_index: bool = True) -> None:
        if not isinstance(searcher, Searcher):
            raise TypeError(f"Repeater takes a Searcher, got {type(searcher).__name__}")
        if isinstance(repeat, bool) or not isinstance(repeat, int) or repeat < 1:
            raise ValueError(f"repeat must be an int >= 1, got {repeat!r}")
        self.searcher = searcher
        self.repeat = repeat
        self._set_index = set_index
        self._groups: list[_TrialGroup] = []
        self._trial_id_to_group: dict[str, _TrialGroup] = {}
        self._current_group: _TrialGroup | None = None
        super().__init__(metric=searcher.metric, mode=searcher.mode)

    @property
    def metric(self) -> str | None:
        return self.searcher.metric

    @property
    def mode(self) -> str | None:
        return self.searcher.mode

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: Mapping, **spec: Any
    ) -> bool:
        return self.searcher.set_search_properties(metric, mode, config, **spec)

    def suggest(self, trial_id: str) -> dict | str | None:
        group = self._current_group
        if group is None or group.full():
            config = self.searcher.suggest(trial_id)
            if config is None or config == Searcher.FINISHED:
                return config
            group = self._current_group = _TrialGroup(trial_id, copy.deepcopy(config), self.repeat)
            self._groups.append(group)
            index = 0
        else:
            index = len(group.scores)
            group.add(trial_id)
        self._trial_id_to_group[trial_id] = group
        config = copy.deepcopy(group.config)
        if self._set_index:
            config[TRIAL_INDEX] = index
        return config

    def on_trial_complete(
        self, trial_id: str, result: dict | None = None, error: bool = False
    ) -> None:
        group = self._trial_id_to_group.get(trial_id)
        if group is None:
            logger.error("Repeater: trial %s is in no group; its score is dropped", trial_id)
            return
        metric = self.searcher.metric
        if metric is None:
            raise ValueError(
                f"Repeater averages the searcher's metric, but {type(self.searcher).__name__} "
                "has none: give it one (its metric=..., or tune.run(metric=...))"
            )
        value = metric_value(result or {}, metric)
        group.scores[trial_id] = math.nan if value is None else value
        if group.finished_reporting():
            scores = [s for s in group.scores.values() if s is not None and not math.isnan(s)]
            mean = sum(scores) / len(scores) if scores else math.nan
            self.searcher.on_trial_complete(
                group.primary_trial_id, result={metric: mean}, error=error
            )

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        # Intermediate results of a repeated config are not the searcher's to see: it
        # hears of each group once, with the mean.
        pass

    def get_state(self) -> dict:
        """Its own state (the searcher it wraps saves its own)."""
        groups = self._groups
        return to_jsonable(
            {
                "repeat": self.repeat,
                "set_index": self._set_index,
                "groups": [g.to_json() for g in groups],
                "current_group": (
                    groups.index(self._current_group) if self._current_group is not None else None
                ),
                "trial_id_to_group": {
                    t: groups.index(g) for t, g in self._trial_id_to_group.items()
                },
            }
        )

    def set_state(self, state: dict) -> None:
        self.repeat = int(state["repeat"])
        self._set_index = bool(state["set_index"])
        self._groups = [_TrialGroup.from_json(g) for g in state["groups"]]
        current = state.get("current_group")
        self._current_group = self._groups[int(current)] if current is not None else None
        self._trial_id_to_group = {
            str(t): self._groups[int(i)] for t, i in dict(state["trial_id_to_group"]).items()
        }

    def save(self, checkpoint_path: str) -> None:
        """Saves the searcher it wraps (its own state goes with ``get_state``)."""
        self.searcher.save(checkpoint_path)

    def restore(self, checkpoint_path: str) -> None:
        self.searcher.restore(checkpoint_path)


def warn_num_samples(searcher: Any, num_samples: int) -> None:
    """Warns when ``num_samples`` is no multiple of a ``Repeater``'s ``repeat``."""
    if isinstance(searcher, Repeater) and num_samples % searcher.repeat:
        logger.warning(
            "num_samples=%d counts every trial, repeats included, and is no multiple of "
            "Repeater(repeat=%d): the last suggestion runs fewer times and the searcher never "
            "hears of it (e.g. num_samples=15 runs 3 suggestions 5 times each)",
            num_samples,
            searcher.repeat,
        )
