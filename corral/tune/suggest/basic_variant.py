"""``BasicVariantGenerator``: ``tune.run``'s default search algorithm (Ray Tune 1.13's),
the trials of a config's ``grid_search`` values and search-space draws."""

from __future__ import annotations

import copy
import random
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from corral.tune import experiment_state
from corral.tune.experiment import Experiment
from corral.tune.suggest.search import SearchAlgorithm, TrialIds, single_experiment
from corral.tune.suggest.variant_generator import (
    check_num_samples,
    count_grid_variants,
    deep_update,
    sample_variants,
)
from corral.tune.trial import Trial


class BasicVariantGenerator(SearchAlgorithm):
    """One trial per combination of the config's ``grid_search`` values, times
    ``num_samples``, each with fresh draws of the config's search spaces (``choice``,
    ``uniform``, ...), in that order: the trials ``tune.run`` makes when given no
    search algorithm.

    Args:
        points_to_evaluate: configs (partial ones) to run first: each is put over the
            config (replacing the grid values or search spaces at its keys) and makes one
            sample of it (the grids it leaves in place still expand); they count towards
            ``num_samples``, and all of them run even when there are more of them.
        max_concurrent: at most this many of its trials unfinished at once (pending ones
            included); 0: no limit.
        constant_grid_search: draw the search spaces once per sample and keep those values
            across the sample's grid combinations (default: fresh draws for each).
        random_state: seed of the draws (an int; None: random). ``tune.run(seed=...)``
            seeds the default one.
    """

    def __init__(
        self,
        points_to_evaluate: Sequence[Mapping[str, Any]] | None = None,
        max_concurrent: int = 0,
        constant_grid_search: bool = False,
        random_state: int | None = None,
    ) -> None:
        if isinstance(max_concurrent, bool) or not isinstance(max_concurrent, int):
            raise ValueError(f"max_concurrent must be an int >= 0, got {max_concurrent!r}")
        if max_concurrent < 0:
            raise ValueError(f"max_concurrent must be an int >= 0, got {max_concurrent!r}")
        points = list(points_to_evaluate or [])
        for point in points:
            if not isinstance(point, Mapping):
                raise ValueError(f"points_to_evaluate must be a list of dicts, got {point!r}")
        if random_state is not None and (
            isinstance(random_state, bool) or not isinstance(random_state, int)
        ):
            raise ValueError(f"random_state must be an int seed or None, got {random_state!r}")
        self._points_to_evaluate = [copy.deepcopy(dict(p)) for p in points]
        self.max_concurrent = max_concurrent
        self._constant_grid_search = constant_grid_search
        self._rng = random.Random(random_state)
        self._experiment: Experiment | None = None
        self._variants: Iterator[tuple[dict, str, Mapping]] | None = None
        self._total = 0
        self._ids = TrialIds()
        self._made = 0
        self._open: list[Trial] = []  # its trials not seen finished yet

    @property
    def total_samples(self) -> int:
        return self._total

    def add_configurations(self, experiments: Experiment | Sequence[Experiment]) -> None:
        """Takes the experiment (its ``config`` and ``num_samples``)."""
        if self._experiment is not None:
            raise ValueError("BasicVariantGenerator makes the trials of one experiment only")
        experiment = single_experiment(experiments)
        config = experiment.spec.get("config") or {}
        num_samples = experiment.spec.get("num_samples", 1)
        check_num_samples(num_samples)
        self._experiment = experiment
        sizes = [count_grid_variants(self._preset(config, p)) for p in self._points_to_evaluate]
        extra = max(num_samples - len(self._points_to_evaluate), 0)
        self._total = sum(sizes) + extra * count_grid_variants(config)
        self._variants = self._generate(config, num_samples)

    def next_trial(self) -> Trial | None:
        """The next variant's trial; None while ``max_concurrent`` of its trials are
        unfinished, or once all are made (then it is finished)."""
        if self._variants is None:
            raise RuntimeError("BasicVariantGenerator.next_trial before add_configurations")
        if self.max_concurrent and self._unfinished() >= self.max_concurrent:
            return None
        return self._make_next()

    def resume_trials(self, rows: Sequence[Mapping[str, Any]]) -> list[Trial]:
        """Makes its first ``len(rows)`` trials again (grid values in the same order;
        the saved draws are put back by ``experiment_state.apply``).

        Raises:
            ValueError: the config makes another number of trials than the rows (fewer;
                or more, when all trials are made at once: no ``max_concurrent``).
        """
        if len(rows) > self._total or (not self.max_concurrent and len(rows) != self._total):
            raise ValueError(
                f"it holds {len(rows)} trials, this call's config and num_samples make "
                f"{self._total}"
            )
        trials = []
        for _ in rows:
            trial = self._make_next()
            assert trial is not None
            trials.append(trial)
        return trials

    def _make_next(self) -> Trial | None:
        assert self._variants is not None and self._experiment is not None
        try:
            variant, tag, spec = next(self._variants)
        except StopIteration:
            self.set_finished()
            return None
        index = self._made
        trial = Trial(
            trainable_name=str(self._experiment.run),
            config=variant,
            trial_id=self._ids(index),
            experiment_tag=f"{index}_{tag}" if tag else str(index),
            evaluated_params=experiment_state.varied_params(spec, variant),
        )
        self._made += 1
        self._open.append(trial)
        return trial

    def _unfinished(self) -> int:
        # (A trial's status is the truth: also for trials resumed already finished.)
        self._open = [trial for trial in self._open if not trial.is_finished()]
        return len(self._open)

    def _generate(self, config: Mapping, num_samples: int) -> Iterator[tuple[dict, str, Mapping]]:
        """(variant, tag, the config it came from) of every trial, made as needed."""
        for point in self._points_to_evaluate:
            preset = self._preset(config, point)
            for variant, tag in self._sample(preset):
                yield variant, tag, config
        for _ in range(max(num_samples - len(self._points_to_evaluate), 0)):
            for variant, tag in self._sample(config):
                yield variant, tag, config

    def _sample(self, config: Mapping) -> list[tuple[dict, str]]:
        return sample_variants(config, self._rng, self._constant_grid_search)

    @staticmethod
    def _preset(config: Mapping, point: Mapping) -> dict:
        return deep_update(copy.deepcopy(dict(config)), point)
