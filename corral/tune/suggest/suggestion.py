"""``Searcher`` (Ray Tune 1.13's base class of search algorithms that suggest configs) and
``ConcurrencyLimiter``.

A ``Searcher`` is asked for a config for each new trial (``suggest(trial_id)``), hears the
trial's results (``on_trial_result``) and its end (``on_trial_complete``); ``tune.run``
wraps it in a ``SearchGenerator``, which makes the trials. Its state is saved for
``tune.run(resume=...)`` as JSON only (``get_state`` / ``set_state``, or a ``save`` /
``restore`` of your own that writes JSON): corral never unpickles anything.
"""

from __future__ import annotations

import glob
import json
import logging
import math
import os
import tempfile
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from corral.tune.logger import to_jsonable
from corral.tune.result import DONE
from corral.tune.stopping import metric_value
from corral.tune.trial import Trial

if TYPE_CHECKING:
    from corral.tune.tune import ExperimentAnalysis

logger = logging.getLogger(__name__)

_warned: set[str] = set()


def _warn_once(key: str, message: str, *args: Any) -> None:
    if key not in _warned:
        _warned.add(key)
        logger.warning(message, *args)


class Searcher:
    """Suggests a config for each trial and learns from the trials' results.

    Subclass it and implement ``suggest`` and ``on_trial_complete`` (and
    ``on_trial_result`` to see intermediate results). A subclass that implements
    ``__init__`` must call this one's.

    Args:
        metric: the result key to optimise (or ``set_search_properties`` from
            ``tune.run(metric=...)``, where the subclass takes it).
        mode: "min" or "max".
        max_concurrent: Ray Tune's old argument, refused: wrap the searcher in a
            ``ConcurrencyLimiter`` instead.
        use_early_stopped_trials: Ray Tune's old argument: early-stopped trials are
            always reported; False is refused.
    """

    # What `suggest` returns when it will suggest nothing more: the search ends.
    FINISHED = "FINISHED"
    # The file `save_to_dir` writes (JSON).
    CKPT_FILE_TMPL = "searcher-state-{}.json"

    def __init__(
        self,
        metric: str | None = None,
        mode: str | None = None,
        max_concurrent: int | None = None,
        use_early_stopped_trials: bool | None = None,
    ) -> None:
        if max_concurrent is not None:
            raise ValueError(
                f"Searcher(max_concurrent={max_concurrent!r}) is no longer used (Ray Tune 1.13): "
                "wrap the searcher in a ConcurrencyLimiter(searcher, max_concurrent=...) instead"
            )
        if use_early_stopped_trials is False:
            raise ValueError(
                "Searcher(use_early_stopped_trials=False) is no longer used (Ray Tune 1.13): "
                "early-stopped trials are always reported to on_trial_complete"
            )
        if mode not in (None, "min", "max"):
            raise ValueError(f"mode must be 'min', 'max' or None, got {mode!r}")
        self._metric = metric
        self._mode = mode

    @property
    def metric(self) -> str | None:
        """The result key it optimises."""
        return self._metric

    @property
    def mode(self) -> str | None:
        """ "min" or "max"."""
        return self._mode

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: Mapping, **spec: Any
    ) -> bool:
        """Takes ``tune.run``'s ``metric``, ``mode`` and ``config`` (its search space).

        Returns:
            Whether it took them. This base class takes nothing (False): then
            ``tune.run``'s config may hold no search spaces or grids (define the search
            space in the searcher), only constants, which every suggestion is put over.
        """
        return False

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        """Lets a searcher limit its own concurrency (True: it does; then a
        ``ConcurrencyLimiter`` around it passes everything through). Default: False."""
        return False

    def suggest(self, trial_id: str) -> dict | str | None:
        """The config (a dict, put over ``tune.run``'s config) for the new trial
        ``trial_id``; None when it has none now (asked again later); ``Searcher.FINISHED``
        when it will suggest nothing more."""
        raise NotImplementedError

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        """An intermediate result of a trial (flattened: nested keys joined by "/")."""

    def on_trial_complete(
        self, trial_id: str, result: dict | None = None, error: bool = False
    ) -> None:
        """A trial ended: ``result`` is its last result (flattened), None when it ended
        without one; ``error`` when it failed."""
        raise NotImplementedError

    def add_evaluated_point(
        self,
        parameters: dict,
        value: float,
        error: bool = False,
        pruned: bool = False,
        intermediate_values: list[float] | None = None,
    ) -> None:
        """Tells the searcher of a config evaluated outside it (not supported by this
        base class)."""
        raise NotImplementedError(
            f"{type(self).__name__} does not take evaluated points (add_evaluated_point)"
        )

    def add_evaluated_trials(
        self, trials_or_analysis: ExperimentAnalysis | Trial | Sequence[Trial], metric: str
    ) -> None:
        """``add_evaluated_point`` for each trial (of an ``ExperimentAnalysis``, a list or
        one): its config, its last ``metric``, whether it failed or was stopped early,
        and every value of ``metric`` it reported."""
        if isinstance(trials_or_analysis, Trial):
            trials: Sequence[Trial] = [trials_or_analysis]
        elif isinstance(trials_or_analysis, Sequence):
            trials = trials_or_analysis
        else:
            trials = trials_or_analysis.trials
        for trial in trials:
            value = metric_value(trial.last_result, metric)
            self.add_evaluated_point(
                trial.config,
                math.nan if value is None else value,
                error=trial.status == Trial.ERROR,
                pruned=trial.status == Trial.TERMINATED and not trial.last_result.get(DONE),
                intermediate_values=[r[metric] for r in trial._results if metric in r],
            )

    # -- state (JSON only) ---------------------------------------------------

    def get_state(self) -> dict:
        """Its state as JSON data (dicts, lists, strings, numbers, bools, None), for
        ``tune.run(resume=...)``; not implemented here: such a searcher is not saved
        and starts afresh when a run is resumed."""
        raise NotImplementedError

    def set_state(self, state: dict) -> None:
        """Puts back a state ``get_state`` returned."""
        raise NotImplementedError

    def save(self, checkpoint_path: str) -> None:
        """Writes ``get_state()`` to ``checkpoint_path`` as JSON.

        Raises:
            NotImplementedError: it has no ``get_state``.
            TypeError: ``get_state()`` returned something JSON cannot hold.
        """
        write_json_state(checkpoint_path, self.get_state(), f"{type(self).__name__}.get_state()")

    def restore(self, checkpoint_path: str) -> None:
        """Reads what ``save`` wrote and puts it back with ``set_state``."""
        self.set_state(read_json_state(checkpoint_path))

    def save_to_dir(self, checkpoint_dir: str, session_str: str = "default") -> bool:
        """``save`` into ``checkpoint_dir`` (atomically); False when it saved nothing: it
        cannot save (``NotImplementedError``) or wrote something that is not JSON (then
        nothing is kept: corral restores JSON only)."""
        os.makedirs(checkpoint_dir, exist_ok=True)
        path = os.path.join(checkpoint_dir, self.CKPT_FILE_TMPL.format(session_str))
        fd, tmp_path = tempfile.mkstemp(prefix=".tmp-searcher-", dir=checkpoint_dir)
        os.close(fd)
        saved = False
        try:
            try:
                self.save(tmp_path)
            except NotImplementedError:
                logger.debug("%s has no get_state/save: its state is not saved", self)
                return False
            except TypeError as e:
                _warn_once(f"notjson:{type(self).__name__}", "%s; its state is not saved", e)
                return False
            if not is_json_file(tmp_path):
                _warn_once(
                    f"notjson:{type(self).__name__}",
                    "%s.save wrote something that is not JSON: corral keeps searcher states "
                    "as JSON only (it never unpickles), so this one is not kept",
                    type(self).__name__,
                )
                return False
            os.replace(tmp_path, path)
            saved = True
            return True
        finally:
            if os.path.exists(tmp_path):
                os.unlink(tmp_path)
            if not saved and os.path.exists(path):
                os.unlink(path)  # (an earlier run's state is not this one's)

    def has_checkpoint(self, checkpoint_dir: str) -> bool:
        """Whether ``checkpoint_dir`` holds a state ``save_to_dir`` wrote."""
        return bool(self._checkpoints(checkpoint_dir))

    def restore_from_dir(self, checkpoint_dir: str) -> None:
        """``restore`` from the newest state ``save_to_dir`` wrote into ``checkpoint_dir``,
        once it is checked to be JSON.

        Raises:
            FileNotFoundError: there is none.
            ValueError: it is not JSON.
        """
        found = self._checkpoints(checkpoint_dir)
        if not found:
            raise FileNotFoundError(f"{checkpoint_dir} holds no {self.CKPT_FILE_TMPL.format('*')}")
        path = max(found, key=os.path.getmtime)
        if not is_json_file(path):
            raise ValueError(f"{path} is not JSON: corral restores searcher states from JSON only")
        self.restore(path)

    def _checkpoints(self, checkpoint_dir: str) -> list[str]:
        pattern = os.path.join(glob.escape(checkpoint_dir), self.CKPT_FILE_TMPL.format("*"))
        return glob.glob(pattern)


class ConcurrencyLimiter(Searcher):
    """Lets ``searcher`` have at most ``max_concurrent`` trials unfinished at once: past
    that, ``suggest`` answers None until one of them ends.

    Args:
        searcher: the searcher to limit.
        max_concurrent: the most trials unfinished at once (an int >= 1).
        batch: hold back the trials' completions and report them to ``searcher`` all
            together once the whole batch of ``max_concurrent`` has ended (then a new
            batch starts).
    """

    def __init__(self, searcher: Searcher, max_concurrent: int, batch: bool = False) -> None:
        if not isinstance(searcher, Searcher):
            raise TypeError(
                f"ConcurrencyLimiter takes a Searcher, got {type(searcher).__name__}; a "
                "BasicVariantGenerator takes max_concurrent itself"
            )
        if isinstance(max_concurrent, bool) or not isinstance(max_concurrent, int):
            raise ValueError(f"max_concurrent must be an int >= 1, got {max_concurrent!r}")
        if max_concurrent < 1:
            raise ValueError(f"max_concurrent must be an int >= 1, got {max_concurrent!r}")
        self.searcher = searcher
        self.max_concurrent = max_concurrent
        self.batch = batch
        self.live_trials: set[str] = set()
        self.num_unfinished_live_trials = 0
        self.cached_results: dict[str, tuple[dict | None, bool]] = {}
        self._limit_concurrency = True
        self._set_searcher_max_concurrency()
        super().__init__(metric=searcher.metric, mode=searcher.mode)

    def _set_searcher_max_concurrency(self) -> None:
        # A searcher that limits itself is left to it.
        self._limit_concurrency = not self.searcher.set_max_concurrency(self.max_concurrent)

    @property
    def metric(self) -> str | None:
        return self.searcher.metric

    @property
    def mode(self) -> str | None:
        return self.searcher.mode

    def set_max_concurrency(self, max_concurrent: int) -> bool:
        self.max_concurrent = max_concurrent
        return True

    def set_search_properties(
        self, metric: str | None, mode: str | None, config: Mapping, **spec: Any
    ) -> bool:
        self._set_searcher_max_concurrency()
        return self.searcher.set_search_properties(metric, mode, config, **spec)

    def suggest(self, trial_id: str) -> dict | str | None:
        if not self._limit_concurrency:
            return self.searcher.suggest(trial_id)
        if trial_id in self.live_trials:
            raise ValueError(f"Trial id {trial_id} was suggested for already")
        if len(self.live_trials) >= self.max_concurrent:
            logger.debug(
                "No suggestion for %s: %d of %d trials unfinished",
                trial_id,
                len(self.live_trials),
                self.max_concurrent,
            )
            return None
        suggestion = self.searcher.suggest(trial_id)
        if suggestion is not None and suggestion != Searcher.FINISHED:
            self.live_trials.add(trial_id)
            self.num_unfinished_live_trials += 1
        return suggestion

    def on_trial_result(self, trial_id: str, result: dict) -> None:
        self.searcher.on_trial_result(trial_id, result)

    def on_trial_complete(
        self, trial_id: str, result: dict | None = None, error: bool = False
    ) -> None:
        if not self._limit_concurrency:
            self.searcher.on_trial_complete(trial_id, result=result, error=error)
            return
        if trial_id not in self.live_trials:
            return
        if not self.batch:
            self.searcher.on_trial_complete(trial_id, result=result, error=error)
            self.live_trials.remove(trial_id)
            self.num_unfinished_live_trials -= 1
            return
        self.cached_results[trial_id] = (result, error)
        self.num_unfinished_live_trials -= 1
        if self.num_unfinished_live_trials > 0:
            return
        # The whole batch has ended: the searcher hears of it at once.
        for done_id, (done_result, done_error) in self.cached_results.items():
            self.searcher.on_trial_complete(done_id, result=done_result, error=done_error)
            self.live_trials.remove(done_id)
        self.cached_results = {}
        self.num_unfinished_live_trials = 0

    def add_evaluated_point(
        self,
        parameters: dict,
        value: float,
        error: bool = False,
        pruned: bool = False,
        intermediate_values: list[float] | None = None,
    ) -> None:
        self.searcher.add_evaluated_point(parameters, value, error, pruned, intermediate_values)

    def get_state(self) -> dict:
        """Its own state (the searcher it wraps saves its own)."""
        return to_jsonable(
            {
                "max_concurrent": self.max_concurrent,
                "batch": self.batch,
                "live_trials": sorted(self.live_trials),
                "num_unfinished_live_trials": self.num_unfinished_live_trials,
                "cached_results": {k: [r, e] for k, (r, e) in self.cached_results.items()},
            }
        )

    def set_state(self, state: dict) -> None:
        self.max_concurrent = int(state["max_concurrent"])
        self.batch = bool(state["batch"])
        self.live_trials = {str(t) for t in state["live_trials"]}
        self.num_unfinished_live_trials = int(state["num_unfinished_live_trials"])
        self.cached_results = {
            str(k): (r, bool(e)) for k, (r, e) in dict(state["cached_results"]).items()
        }

    def save(self, checkpoint_path: str) -> None:
        """Saves the searcher it wraps (its own state goes with ``get_state``)."""
        self.searcher.save(checkpoint_path)

    def restore(self, checkpoint_path: str) -> None:
        self.searcher.restore(checkpoint_path)


def write_json_state(path: str, state: Any, what: str) -> None:
    """Writes ``state`` to ``path`` as JSON, refusing what JSON cannot hold.

    Raises:
        TypeError: ``state`` holds something that is not JSON data (``what`` says whose).
    """
    try:
        text = json.dumps(state)
    except (TypeError, ValueError) as e:
        raise TypeError(
            f"{what} must return JSON data (dicts, lists, strings, numbers, bools, None): "
            f"{e}. corral keeps searcher states as JSON only"
        ) from None
    with open(path, "w", encoding="utf-8") as f:
        f.write(text)


def read_json_state(path: str) -> Any:
    """What ``write_json_state`` wrote."""
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def is_json_file(path: str) -> bool:
    """Whether the file at ``path`` is JSON (it is read as text; nothing else is done)."""
    try:
        read_json_state(path)
    except (OSError, UnicodeDecodeError, ValueError):
        return False
    return True
