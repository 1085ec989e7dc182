"""``tune.run``: train one or more trials of a trainable in this process.

For scripts ported from RLlib 1.x (``tune.run("PPO", config=..., stop=...)``, or a
function trainable ``tune.run(train_fn, ...)`` that calls ``tune.report``) and for the
``corral train`` command, not a port of Ray Tune: the trials come from a search
algorithm (``corral.tune.suggest``): by default ``BasicVariantGenerator``, which expands
``grid_search`` values into one trial per combination (times ``num_samples``, with fresh
draws of search spaces), or a ``Searcher`` of yours that suggests each trial's config.
Trials run one after another, or take turns an iteration each (``max_concurrent_trials``,
population-based training); Ray Tune 1.13's schedulers (``corral.tune.schedulers``)
stop, pause and perturb them.
"""

from __future__ import annotations

import datetime
import functools
import json
import logging
import math
import os
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from corral.tune import experiment_state
from corral.tune.callback import Callback
from corral.tune.error import TuneError
from corral.tune.experiment import Experiment, run_experiments
from corral.tune.function_trainable import FunctionTrainable, wrap_function
from corral.tune.logger import Logger, UnifiedLogger, flatten_dict
from corral.tune.progress_reporter import ProgressReporter, ReporterCallback, check_reporter
from corral.tune.registry import TRAINABLE_CLASS, global_registry
from corral.tune.resources import resources_from_tune_argument
from corral.tune.result import (
    CONFIG,
    EXPR_PROGRESS_FILE,
    EXPR_RESULT_FILE,
    TRAINING_ITERATION,
    default_results_dir,
    new_logdir,
)
from corral.tune.schedulers.trial_scheduler import FIFOScheduler, TrialScheduler
from corral.tune.stopper import Stopper
from corral.tune.stopping import StopFn, lookup_result, metric_value, stop_condition
from corral.tune.suggest import (
    BasicVariantGenerator,
    SearchAlgorithm,
    Searcher,
    SearchGenerator,
    create_searcher,
)

# (`grid_search` and `config_variants` importable from here as before they moved.)
from corral.tune.suggest.variant_generator import (
    GRID_SEARCH,
    config_variants,
    grid_search,
    has_unresolved_values,
)
from corral.tune.syncer import check_sync_config
from corral.tune.trainable import Trainable, TrialInfo
from corral.tune.trial import Trial, _safe_tag

# `TrialLoop` and `CheckpointKeeper` are the loop `tune.run` and `corral train` share
# (`CheckpointKeeper` importable from here as before it got its own module).
from corral.tune.trial_runner import CheckpointKeeper, TrialLoop, TrialRunner
from corral.tune.utils.log import set_verbosity

logger = logging.getLogger(__name__)

__all__ = [
    "GRID_SEARCH",
    "Analysis",
    "CheckpointKeeper",
    "ExperimentAnalysis",
    "StopFn",
    "Trial",
    "TrialLoop",
    "config_variants",
    "grid_search",
    "run",
    "run_experiments",
]


class ExperimentAnalysis:
    """The trials of a ``tune.run`` call and helpers to pick the best one.

    ``tune.run`` returns one; ``ExperimentAnalysis(path)`` reads one back from an
    experiment folder (Ray Tune 1.13's form).

    Args:
        experiment_checkpoint_path: the experiment's folder (``<local_dir>/<name>``), its
            ``experiment_state.json``, or a folder of experiments (``local_dir``: every
            sub-folder with a state). The trials come from the state (statuses, results,
            checkpoints; configs from each trial's ``params.json``) unless ``trials`` is
            given. (corral's earlier form, a list of trials first, still works.)
        trials: the trials, as ``tune.run`` has them.
        default_metric: metric the ``best_*`` properties rank by (``run``'s ``metric``).
        default_mode: ``"max"`` or ``"min"`` (``run``'s ``mode``).
        sync_config: Ray Tune's cloud syncing settings: results are local here, so only
            None or one without an ``upload_dir`` (which has no effect) is taken.

    Raises:
        ValueError: the path holds no experiment state (and no ``trials`` were given), a
            bad ``default_mode``, or a ``sync_config`` with an ``upload_dir``.
    """

    def __init__(
        self,
        experiment_checkpoint_path: str | os.PathLike | Sequence[Trial] | None = None,
        trials: Sequence[Trial] | None = None,
        default_metric: str | None = None,
        default_mode: str | None = None,
        sync_config: Any = None,
    ) -> None:
        path = experiment_checkpoint_path
        if path is not None and not isinstance(path, str | os.PathLike):
            if trials is not None:
                raise TypeError(
                    "ExperimentAnalysis: pass the trials once (as trials=...), got them twice"
                )
            path, trials = None, path  # corral's earlier form, ExperimentAnalysis(trials)
        check_sync_config(sync_config, "ExperimentAnalysis")
        if default_mode not in (None, "max", "min"):
            raise ValueError(f"default_mode must be None, 'max' or 'min', got {default_mode!r}")
        # (folder, state) of each experiment read from `path`.
        self._experiment_states: list[tuple[str, dict]] = []
        if path is not None:
            self._experiment_states = _experiment_states(
                os.path.expanduser(os.fspath(path)), required=trials is None
            )
        if trials is None:
            trials = [
                trial
                for folder, state in self._experiment_states
                for trial in experiment_state.load_trials(state, folder)
            ]
        self.trials = list(trials)
        self.default_metric = default_metric
        self.default_mode = default_mode
        self._file_type = "csv"
        self._trial_dataframes: dict[str, Any] | None = None

    def get_best_trial(
        self,
        metric: str | None = None,
        mode: str | None = None,
        scope: str = "last",
        filter_nan_and_inf: bool = True,
    ) -> Trial | None:
        """The trial that is best in ``metric`` (a key, nested keys joined by "/").

        ``scope`` (Tune 1.13): "last" compares each trial's last result, "all" the best
        value of all its results (per ``mode``), "avg" the average of all results,
        "last-5-avg" / "last-10-avg" the average of the last 5 / 10 results.
        Trials without a value for the metric are ignored, and with
        ``filter_nan_and_inf`` (the default) those whose value is NaN or infinite;
        ``None`` (with a warning) if no trial is left.
        """
        metric, mode = self._metric_and_mode("get_best_trial", metric, mode)
        scopes = ("all", "last", "avg", "last-5-avg", "last-10-avg")
        if scope not in scopes:
            raise ValueError(f"get_best_trial: scope={scope!r}, expected one of {scopes}.")
        scored = [
            (value, trial)
            for trial in self.trials
            if (value := _scoped_value(trial, metric, mode, scope, filter_nan_and_inf)) is not None
        ]
        if not scored:
            logger.warning(
                "Could not find best trial: no trial has a value of %r (did you pass the "
                "correct `metric` parameter?)",
                metric,
            )
            return None
        # (With NaN allowed, as Ray Tune: the first trial stays best unless another is
        # strictly better, and NaN is never better.)
        pick = max if mode == "max" else min
        return pick(scored, key=lambda pair: pair[0])[1]

    def _metric_and_mode(self, what: str, metric: str | None, mode: str | None) -> tuple[str, str]:
        """``metric`` and ``mode``, else ``tune.run``'s; a clear error if either is missing."""
        metric = metric or self.default_metric
        mode = mode or self.default_mode
        if metric is None or mode not in ("max", "min"):
            raise ValueError(
                f"{what} needs a metric and a mode of 'max' or 'min' (here or in "
                f"tune.run(metric=..., mode=...)), got metric={metric!r}, mode={mode!r}"
            )
        return metric, str(mode)

    def get_best_config(
        self, metric: str | None = None, mode: str | None = None, scope: str = "last"
    ) -> dict | None:
        """Config of ``get_best_trial(metric, mode, scope)``."""
        trial = self.get_best_trial(metric, mode, scope)
        return trial.config if trial else None

    @property
    def best_trial(self) -> Trial | None:
        """Best trial by ``run``'s ``metric`` and ``mode``."""
        return self.get_best_trial()

    @property
    def best_config(self) -> dict | None:
        """Config of ``best_trial``."""
        return self.get_best_config()

    @property
    def best_result(self) -> dict | None:
        """Last result of ``best_trial``."""
        trial = self.best_trial
        return trial.last_result if trial else None

    @property
    def best_checkpoint(self) -> str | None:
        """Latest checkpoint of ``best_trial``."""
        trial = self.best_trial
        return trial.checkpoint if trial else None

    def get_best_logdir(
        self, metric: str | None = None, mode: str | None = None, scope: str = "last"
    ) -> str | None:
        """Directory of ``get_best_trial(metric, mode, scope)``."""
        trial = self.get_best_trial(metric, mode, scope)
        return trial.logdir if trial else None

    @property
    def best_logdir(self) -> str | None:
        """Directory of ``best_trial``."""
        return self.get_best_logdir()

    def get_all_configs(self, prefix: bool = False) -> dict[str, dict]:
        """Every trial's config by its directory (``prefix``: keys flattened, "config/"
        in front, as in ``progress.csv``)."""
        if not prefix:
            return {str(t.logdir): t.config for t in self.trials}
        return {
            str(t.logdir): {f"config/{k}": v for k, v in flatten_dict(t.config).items()}
            for t in self.trials
        }

    def get_last_checkpoint(
        self, trial: Trial | None = None, metric: str = TRAINING_ITERATION, mode: str = "max"
    ) -> str | None:
        """The checkpoint of ``trial`` (default: the best trial by ``metric`` and
        ``mode``) saved at its highest ``training_iteration``."""
        trial = trial or self.get_best_trial(metric, mode)
        if trial is None:
            return None
        return self.get_best_checkpoint(trial, TRAINING_ITERATION, "max")

    @property
    def trial_dataframes(self) -> dict[str, Any]:
        """Every trial's results (one row per iteration, flattened), by its directory:
        the numbers this process recorded, or for trials read from a folder (and after
        ``fetch_trial_dataframes``) what their result files hold."""
        if self._trial_dataframes is None:
            pandas = _pandas("trial_dataframes")
            recorded = {str(t.logdir): pandas.DataFrame(t._results) for t in self.trials}
            unread = [t for t in self.trials if not t._results and t.logdir]
            self._trial_dataframes = {**recorded, **self._read_dataframes(unread)}
        return self._trial_dataframes

    def fetch_trial_dataframes(self) -> dict[str, Any]:
        """Reads every trial's results from its folder (``progress.csv``, or
        ``result.json`` after ``set_filetype("json")``), by trial folder; a trial whose
        file cannot be read is left out. These become ``trial_dataframes``.

        Raises:
            TuneError: the analysis has no trials.
        """
        if not self.trials:
            raise TuneError("No trials found.")
        self._trial_dataframes = self._read_dataframes(self.trials)
        return self._trial_dataframes

    def set_filetype(self, file_type: str | None = None) -> bool:
        """Reads results from ``"csv"`` (``progress.csv``, the default, also for None)
        or ``"json"`` (``result.json``, nested keys joined by "/") from now on, and
        reads them again (``fetch_trial_dataframes``); returns True.

        Raises:
            ValueError: another ``file_type``.
        """
        if file_type not in (None, "json", "csv"):
            raise ValueError(f"file_type must be None, 'json' or 'csv', got {file_type!r}")
        self._file_type = file_type or "csv"
        self.fetch_trial_dataframes()
        return True

    def _read_dataframes(self, trials: Sequence[Trial]) -> dict[str, Any]:
        pandas = _pandas("fetch_trial_dataframes()")
        frames = {}
        for trial in trials:
            folder = str(trial.logdir)
            try:
                if self._file_type == "json":
                    with open(os.path.join(folder, EXPR_RESULT_FILE), encoding="utf-8") as f:
                        rows = [json.loads(line) for line in f if line.strip()]
                    frames[folder] = pandas.json_normalize(rows, sep="/")
                else:
                    frames[folder] = pandas.read_csv(
                        os.path.join(folder, EXPR_PROGRESS_FILE), dtype={"trial_id": str}
                    )
            except (OSError, ValueError) as e:
                logger.debug("Could not read the results of trial %s: %s", trial, e)
        return frames

    def stats(self) -> dict:
        """The run's statistics from its state (``start_time``, ``timestamp`` of the
        last save); for a folder of experiments ``{session name: stats}``.

        Raises:
            ValueError: the analysis was made without an experiment state.
        """
        return self._from_states("stats")

    def runner_data(self) -> dict:
        """What the state recorded of the trial runner (``_session_str``, ``_iteration``:
        its step counter, ``_start_time``, ``_fail_fast``, ...); for a folder of
        experiments ``{session name: runner data}``.

        Raises:
            ValueError: the analysis was made without an experiment state.
        """
        return self._from_states("runner_data")

    def _from_states(self, key: str) -> dict:
        states = [state for _, state in self._experiment_states]
        if not states:
            raise ValueError(
                f"ExperimentAnalysis.{key}() reads the experiment's state, and this "
                "analysis has none (made from trials only, or a run on Ray)"
            )
        if len(states) == 1:
            return dict(states[0].get(key) or {})
        return {
            str((state.get("runner_data") or {}).get("_session_str", folder)): dict(
                state.get(key) or {}
            )
            for folder, state in self._experiment_states
        }

    @property
    def best_dataframe(self) -> Any:
        """``trial_dataframes`` of ``best_trial``."""
        trial = self.best_trial
        return self.trial_dataframes[str(trial.logdir)] if trial else None

    @property
    def results_df(self) -> Any:
        """Every trial's last result (flattened), one row per trial id."""
        pandas = _pandas("results_df")
        rows = [{**_recorded_results(t)[-1], "trial_id": t.trial_id} for t in self.trials]
        return pandas.DataFrame(rows).set_index("trial_id") if rows else pandas.DataFrame()

    @property
    def best_result_df(self) -> Any:
        """``best_trial``'s last result as a one-row DataFrame."""
        trial = self.best_trial
        return self.results_df.loc[[trial.trial_id]] if trial else None

    def dataframe(self, metric: str | None = None, mode: str | None = None) -> Any:
        """A pandas DataFrame with one row per trial (Tune 1.13): its last result, or with
        ``metric`` and ``mode`` its best one, flattened, plus ``trial_id`` and ``logdir``."""
        pandas = _pandas("dataframe()")
        if (metric is None) != (mode is None) or mode not in (None, "max", "min"):
            raise ValueError(f"dataframe: give both metric and mode ('max'/'min'), got {mode!r}")
        rows = []
        for trial in self.trials:
            results = _recorded_results(trial)
            row = results[-1]
            if metric is not None:
                scored = [r for r in results if metric_value(r, metric) is not None]
                if scored:
                    pick = max if mode == "max" else min
                    row = pick(scored, key=lambda r: r[metric])
            rows.append({**row, "trial_id": trial.trial_id, "logdir": trial.logdir})
        return pandas.DataFrame(rows)

    @property
    def results(self) -> dict[str, dict]:
        """Last result of every trial, by trial id."""
        return {trial.trial_id: trial.last_result for trial in self.trials}

    def get_trial_checkpoints_paths(
        self, trial: Trial, metric: str | None = None
    ) -> list[tuple[str, float | None]]:
        """Every checkpoint of ``trial`` as ``(path, value of metric when it was saved)``;
        the metric defaults to ``training_iteration``."""
        metric = metric or self.default_metric or TRAINING_ITERATION
        return [(path, metric_value(result, metric)) for path, result in trial.checkpoints]

    def get_best_checkpoint(
        self, trial: Trial, metric: str | None = None, mode: str | None = None
    ) -> str | None:
        """The checkpoint of ``trial`` whose result was best in ``metric`` (``mode`` "max"
        or "min"); None when no checkpoint has a value for it. ``metric`` defaults to
        ``tune.run``'s, else "training_iteration" (Tune 1.13's: the latest checkpoint)."""
        metric = metric or self.default_metric or "training_iteration"
        metric, mode = self._metric_and_mode("get_best_checkpoint", metric, mode)
        scored = [
            (v, path)
            for path, v in self.get_trial_checkpoints_paths(trial, metric)
            if v is not None
        ]
        if not scored:
            return None
        pick = max if mode == "max" else min
        return pick(scored, key=lambda pair: pair[0])[1]


class Analysis(ExperimentAnalysis):
    """Ray Tune 1.13's deprecated name of ``ExperimentAnalysis`` (a warning, then the
    same)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        logger.warning(
            "DeprecationWarning: the `Analysis` class is deprecated; use "
            "`ExperimentAnalysis` instead"
        )
        super().__init__(*args, **kwargs)


def _recorded_results(trial: Trial) -> list[dict]:
    """The numbers of each result of ``trial`` this process recorded (flattened); of a
    trial read from a folder, its last result's; ``[{}]`` when it has none."""
    if trial._results:
        return trial._results
    if trial.last_result:
        return [flatten_dict({k: v for k, v in trial.last_result.items() if k != CONFIG})]
    return [{}]


def _pandas(what: str) -> Any:
    try:
        import pandas
    except ImportError:
        raise ImportError(f"ExperimentAnalysis.{what} needs pandas: pip install pandas") from None
    return pandas


def _scoped_value(
    trial: Trial, metric: str, mode: str, scope: str, finite_only: bool = True
) -> float | None:
    """``trial``'s value of ``metric`` in ``scope`` (None when it has none, or with
    ``finite_only`` when it is NaN or infinite)."""
    if scope == "last":
        raw = lookup_result({k: v for k, v in trial.last_result.items() if k != CONFIG}, metric)
        try:
            value = float(raw)
        except (TypeError, ValueError):
            return None
    else:
        summary = trial.metric_analysis.get(metric)
        if not summary:
            return None
        value = summary[mode] if scope == "all" else summary[scope]
    if finite_only and not math.isfinite(value):
        return None
    return value


def _experiment_states(path: str, required: bool) -> list[tuple[str, dict]]:
    """(folder, state) of the experiment ``path`` names: its state file, its folder, or a
    folder of experiment folders (each that has a state).

    Raises:
        ValueError: ``required`` and no state found there.
    """
    if os.path.isfile(path):
        folders = [os.path.dirname(os.path.abspath(path))]
    elif os.path.isfile(os.path.join(path, experiment_state.STATE_FILE)):
        folders = [path]
    elif os.path.isdir(path):
        folders = sorted(
            os.path.join(path, entry)
            for entry in os.listdir(path)
            if os.path.isfile(os.path.join(path, entry, experiment_state.STATE_FILE))
        )
    else:
        folders = []
    states = [(folder, state) for folder in folders if (state := experiment_state.load(folder))]
    if required and not states:
        raise ValueError(
            f"ExperimentAnalysis: {path} holds no {experiment_state.STATE_FILE} (pass the "
            "folder of an experiment tune.run wrote, <local_dir>/<name>, or its "
            "local_dir)"
        )
    return states


def run(
    run_or_experiment: str | type[Trainable] | Callable[..., Any],
    config: dict | None = None,
    stop: Mapping[str, Any] | StopFn | Stopper | None = None,
    num_samples: int = 1,
    checkpoint_freq: int = 0,
    checkpoint_at_end: bool = False,
    local_dir: str | None = None,
    verbose: int = 1,
    restore: str | None = None,
    name: str | None = None,
    *,
    metric: str | None = None,
    mode: str | None = None,
    keep_checkpoints_num: int | None = None,
    checkpoint_score_attr: str | None = None,
    seed: int | None = None,
    callbacks: Sequence[Callback] | None = None,
    resources_per_trial: Any = None,
    time_budget_s: float | datetime.timedelta | None = None,
    max_failures: int = 0,
    fail_fast: bool | str = False,
    raise_on_failed_trial: bool = True,
    scheduler: Any = None,
    search_alg: SearchAlgorithm | Searcher | str | None = None,
    max_concurrent_trials: int | None = None,
    resume: bool | str = False,
    **ray_tune_options: Any,
) -> ExperimentAnalysis:
    """Train trials of a trainable until each meets ``stop``; return their analysis.

    Args:
        run_or_experiment: a ``Trainable`` subclass, a name given to
            ``register_trainable``, an algorithm name such as ``"PPO"``, or a function
            trainable ``train_fn(config)`` that reports with ``tune.report(...)`` (Ray Tune
            1.x's function API, see ``corral.tune.function_trainable``; local path only).
        config: the config; ``grid_search([...])`` values are expanded (by the default
            search algorithm; a ``Searcher``'s suggestions are put over it). With
            ``"backend": "ray"`` the trials run in parallel under Ray Tune (on the cluster
            ``ray.init()`` connects to), each in its ``default_resource_request`` placement
            group; the returned analysis is the same.
        stop: ``{key: threshold}``, a trial stops once any ``result[key] >=
            threshold`` (nested keys joined by "/"), ``stop(trial_id, result) ->
            bool``, or a ``corral.tune.stopper.Stopper`` (Ray Tune 1.13's: also its
            ``stop_all()``, asked after every step, ends the whole run). A trial also
            stops when a result has ``done=True``. With no criterion a trial runs until
            it reports ``done``.
        num_samples: how many times to run each grid combination (with a ``Searcher``:
            how many trials in all).
        checkpoint_freq: save every this many iterations (0: never).
        checkpoint_at_end: save after the last iteration.
        local_dir: results root, by default ``default_results_dir()``;
            trial logdirs go to ``<local_dir>/<name>/``.
        verbose: 0 silent, 1 a line per finished trial, 2 also a line per iteration.
        restore: a checkpoint every trial restores from before training.
        name: experiment folder name, by default the trainable's name.
        metric: default metric of the analysis' ``best_*`` helpers.
        mode: ``"max"`` or ``"min"``, default mode of those helpers.
        keep_checkpoints_num: keep at most this many checkpoints per trial, the
            best by ``checkpoint_score_attr``; the newest is never deleted.
        checkpoint_score_attr: result key that ranks checkpoints (default
            ``training_iteration``); a ``"min-"`` prefix ranks the lowest best, as in Tune.
        seed: seed of the draws of search spaces (``choice``, ``uniform``, ...) of the
            default search algorithm (a ``BasicVariantGenerator`` of yours takes
            ``random_state``).
        callbacks: ``tune.Callback`` hooks called once before the first trial
            (``setup``), around each step of the loop, as each trial starts, restores,
            reports a result, saves a checkpoint and ends, and once at the end
            (``on_experiment_end``); the local path only, not with ``"backend": "ray"``.
        resources_per_trial: what one trial needs, as Ray Tune takes it: a dict (``{"cpu":
            1, "gpu": 0, "extra_cpu": 2, ...}``) or a ``PlacementGroupFactory`` (e.g. a
            Trainer's ``default_resource_request(config)``). With ``"backend": "ray"`` it
            replaces the trainable's own request; locally the trials run one after
            another in this process, so it is only checked for its form.
        time_budget_s: seconds (or a ``timedelta``) after which the running trial stops
            and no further trial starts (those stay ``PENDING``).
        max_failures: how often a trial whose trainable raises (building, restoring,
            training, saving) starts again, from its latest checkpoint if it has one
            (-1: always). Its errors are in ``trial.error`` / ``trial.error_file``.
        fail_fast: False: a trial that fails for good is marked ERROR and the next trial
            runs; True: no further trial starts; ``"raise"``: its exception is raised at
            once (no recovery). Errors of the run itself (a bad ``stop`` key, a hook that
            raises, Ctrl-C) always end the run at once.
        raise_on_failed_trial: raise ``TuneError`` at the end when a trial failed (its
            first exception chained); False: return the analysis, failed trials marked.
        scheduler: a ``corral.tune.schedulers`` scheduler (Ray Tune 1.13's:
            ``ASHAScheduler``, ``MedianStoppingRule``, ``PopulationBasedTraining``,
            ``FIFOScheduler``), which stops, pauses or (PBT) perturbs trials as their
            results come in; it takes ``metric`` and ``mode`` from here when it has none.
            Default: ``FIFOScheduler`` (each trial runs until its stop rule).
        search_alg: where the trials come from (``corral.tune.suggest``, Ray Tune 1.13's):
            a ``SearchAlgorithm`` (default: ``BasicVariantGenerator``, the grid and draws
            of ``config``), a ``Searcher`` (its ``suggest(trial_id)`` gives each trial's
            config, put over ``config``; it hears every result and every trial's end;
            ``num_samples`` trials in all, fewer if it answers ``Searcher.FINISHED``),
            possibly wrapped in ``ConcurrencyLimiter`` / ``Repeater``, or a name of
            ``corral.tune.suggest.SEARCH_ALG_IMPORT`` (``"random"``). A searcher that does
            not take ``config`` as its search space (``set_search_properties`` False)
            needs a ``config`` without grids or search spaces. A new trial is asked for
            when a slot is free (all at once from ``BasicVariantGenerator``).
        max_concurrent_trials: how many trials train at once, taking turns an iteration
            each in this process. Default: all of them under population-based training
            (its population trains together), else one (one after another).
        resume: go on with the experiment of the same folder (``local_dir``/``name``)
            that an earlier call left unfinished (stopped, crashed, out of time), from its
            ``experiment_state.json``: True or "LOCAL" (finished trials are kept, the
            others continue from their latest checkpoints; errored ones stay errored),
            "AUTO" (the same, or a fresh run when there is no state), "ERRORED_ONLY" (only
            the errored trials run again, from their latest checkpoints). Call it with the
            same config, ``num_samples`` and search algorithm; values drawn from search
            spaces or suggested by a searcher are taken from the state (a searcher's own
            state comes back when it can save it as JSON: ``Searcher.get_state``), and
            the search goes on from there.
        **ray_tune_options: ``progress_reporter`` (a ``tune.ProgressReporter`` such as
            ``CLIReporter``, asked after every step and at the end; with it ``verbose=1``
            prints its status instead of the line per finished trial), ``sync_config``
            (a ``tune.SyncConfig`` without ``upload_dir``), and the rest of Ray Tune
            1.13's ``tune.run`` arguments (``trial_name_creator``, ...), accepted at their
            defaults; any other value raises ``NotImplementedError`` naming it (with the
            ``ray`` extra, ``ray.tune.run`` takes corral's Trainers).
    """
    check_sync_config(ray_tune_options.pop("sync_config", None), "tune.run")
    reporter: ProgressReporter | None = ray_tune_options.pop("progress_reporter", None)
    if reporter is not None:
        check_reporter(reporter)
        set_verbosity(verbose)
    _check_ray_tune_options(ray_tune_options)
    _check_failure_options(max_failures, fail_fast)
    _check_checkpoint_freq(checkpoint_freq)
    scheduler = _scheduler(scheduler, metric, mode)
    experiment_state.check_resume(resume)
    resources = resources_from_tune_argument(resources_per_trial)
    deadline = _deadline(time_budget_s)
    trainable_cls = _resolve_trainable(run_or_experiment)
    trainable_name = (
        run_or_experiment if isinstance(run_or_experiment, str) else trainable_cls.__name__
    )
    is_function = issubclass(trainable_cls, FunctionTrainable)
    if is_function and (checkpoint_freq or checkpoint_at_end):
        raise ValueError(
            f"checkpoint_freq / checkpoint_at_end cannot save the function trainable "
            f"{trainable_name}: its state lives in the function. Write checkpoints inside "
            "it with `with tune.checkpoint_dir(step) as path:` instead."
        )
    if is_function and restore:
        trainable_cls.check_restorable(restore)  # type: ignore[attr-defined]
    experiment_dir = os.path.join(local_dir or default_results_dir(), name or trainable_name)
    keeper = CheckpointKeeper(keep_checkpoints_num, checkpoint_score_attr)
    on_ray = (config or {}).get("backend") == "ray"
    if on_ray and search_alg is not None:
        raise ValueError(
            'tune.run(search_alg=...) runs on the local path only; with "backend": "ray" pass '
            "a Ray Tune search algorithm to ray.tune.run"
        )
    search = _search_alg(search_alg, seed, metric, mode, config or {})
    search.add_configurations(
        Experiment(
            name or trainable_name, trainable_name, config=config or {}, num_samples=num_samples
        )
    )
    trials = _resume(search, config or {}, experiment_dir, resume) if resume and not on_ray else []
    loop = TrialLoop(
        _until(deadline, stop_condition(stop)),
        restore=restore,
        checkpoint_freq=checkpoint_freq,
        checkpoint_at_end=checkpoint_at_end,
        keeper=keeper,
        callbacks=list(callbacks or ()),
        verbose=verbose,
        # Tune's fail_fast="raise" re-raises the first error: no recovery.
        max_failures=0 if fail_fast == "raise" else max_failures,
        stopping_criterion=dict(stop) if isinstance(stop, Mapping) else {},
    )
    if on_ray:
        if is_function:
            raise ValueError(
                f"The function trainable {trainable_name} runs on the local path only, not with "
                '"backend": "ray"; with the ray extra, call ray.tune.run on it directly.'
            )
        if callbacks:
            raise ValueError(
                "tune.run(callbacks=...) runs its hooks on the local path only; with "
                '"backend": "ray" pass Ray Tune callbacks to ray.tune.run instead'
            )
        if reporter is not None:
            raise ValueError(
                "tune.run(progress_reporter=...) reports local runs only; with "
                '"backend": "ray" pass it to ray.tune.run'
            )
        if resume:
            raise ValueError(
                'tune.run(resume=...) resumes local runs only; with "backend": "ray" pass '
                "resume to ray.tune.run"
            )
        if type(scheduler) is not FIFOScheduler:
            raise ValueError(
                f"tune.run(scheduler={type(scheduler).__name__}(...)) runs on the local path "
                'only; with "backend": "ray" pass a Ray Tune scheduler to ray.tune.run'
            )
        # The trials run in parallel under Ray Tune, each in its own placement group.
        from corral.tune.ray_run import run_trials_on_ray

        trials = _all_trials(search)
        run_trials_on_ray(
            trainable_cls,
            trials,
            experiment_root=local_dir or default_results_dir(),
            name=name or trainable_name,
            loop=loop,
            stop_all=_stop_all_of(stop),
            resources=resources,
            fail_fast=fail_fast,
            raise_on_failed_trial=raise_on_failed_trial,
        )
        return ExperimentAnalysis(trials=trials, default_metric=metric, default_mode=mode)
    if is_function and scheduler.trains_trials_together:
        raise ValueError(
            f"{type(scheduler).__name__} moves trials' states between them, which the "
            f"function trainable {trainable_name} keeps inside its function: use a "
            "Trainable class (or an algorithm name such as 'PPO') with it"
        )
    _check_max_concurrent(max_concurrent_trials)
    if reporter is not None:
        # The reporter's status replaces the line per finished trial; from verbose=2 on
        # the lines per trial are printed as well (Ray Tune's per-trial output).
        loop.verbose = verbose if verbose >= 2 else 0
        loop.callbacks = [*loop.callbacks, ReporterCallback(reporter, scheduler)]
        reporter.setup(
            start_time=time.time(),
            total_samples=search.total_samples,
            metric=metric,
            mode=mode,
        )
    for callback in loop.callbacks:
        callback.setup(
            stop=stop,
            num_samples=num_samples,
            total_num_samples=search.total_samples,
            time_budget_s=time_budget_s,
        )
    runner = TrialRunner(
        search,
        loop,
        lambda trial: functools.partial(
            _build_trainable, trial, trainable_cls, experiment_dir, resources
        ),
        scheduler,
        trials=trials,
        max_concurrent=max_concurrent_trials or (None if scheduler.trains_trials_together else 1),
        deadline=deadline,  # out of time_budget_s: the rest stay PENDING
        fail_fast=fail_fast,
        experiment_dir=experiment_dir,
        stop_all=_stop_all_of(stop),
    )
    runner.run()
    if raise_on_failed_trial:
        raise_if_failed(runner.trials)
    return ExperimentAnalysis(
        experiment_dir, trials=runner.trials, default_metric=metric, default_mode=mode
    )


def raise_if_failed(trials: Sequence[Trial]) -> None:
    """Raises ``TuneError("Trials did not complete", failed)`` if a trial is ``ERROR``."""
    failed = [trial for trial in trials if trial.status == "ERROR"]
    if failed:
        raise TuneError(
            f"Trials did not complete: {', '.join(str(t) for t in failed)} (their errors: "
            "trial.error, and error.txt in each trial's folder)",
            failed,
        ) from failed[0].error


def _scheduler(scheduler: Any, metric: str | None, mode: str | None) -> TrialScheduler:
    """``tune.run``'s scheduler (default FIFO; a name such as ``"asha"`` builds Ray
    Tune's scheduler of that name), given ``metric`` and ``mode`` where it has none (Ray
    Tune's ``set_search_properties``)."""
    if scheduler is None:
        return FIFOScheduler()
    if isinstance(scheduler, str):
        from corral.tune.schedulers import create_scheduler

        scheduler = create_scheduler(scheduler)
    if not isinstance(scheduler, TrialScheduler):
        raise TypeError(
            f"tune.run(scheduler=...) takes a corral.tune.schedulers scheduler "
            f"(ASHAScheduler, MedianStoppingRule, PopulationBasedTraining, ...), got "
            f"{scheduler!r}"
        )
    if not scheduler.set_search_properties(metric, mode):
        raise ValueError(
            f"tune.run(metric={metric!r}, mode={mode!r}) differs from the scheduler's own "
            f"metric and mode: set them in one place"
        )
    return scheduler


def _search_alg(
    search_alg: Any, seed: int | None, metric: str | None, mode: str | None, config: dict
) -> SearchAlgorithm:
    """``tune.run``'s search algorithm: ``search_alg`` (a ``Searcher`` wrapped in a
    ``SearchGenerator``, a name built with ``create_searcher``), default a
    ``BasicVariantGenerator`` seeded with ``seed``; given ``metric``, ``mode`` and
    ``config`` (Ray Tune's ``set_search_properties``).

    Raises:
        ValueError: ``seed`` with a search algorithm of the caller's; a config with grids
            or search spaces for a searcher that does not take them.
        TypeError: ``search_alg`` is none of these.
    """
    if search_alg is None:
        search_alg = BasicVariantGenerator(random_state=seed)
    elif seed is not None:
        raise ValueError(
            "tune.run(seed=...) seeds the default search algorithm; seed yours itself (e.g. "
            "BasicVariantGenerator(random_state=...))"
        )
    if isinstance(search_alg, str):
        search_alg = create_searcher(search_alg, metric=metric, mode=mode)
    if isinstance(search_alg, Searcher):
        search_alg = SearchGenerator(search_alg)
    if not isinstance(search_alg, SearchAlgorithm):
        raise TypeError(
            "tune.run(search_alg=...) takes a corral.tune.suggest SearchAlgorithm or Searcher "
            f"(BasicVariantGenerator, ConcurrencyLimiter(...), a Searcher subclass) or a "
            f"name of SEARCH_ALG_IMPORT, got {search_alg!r}"
        )
    if not search_alg.set_search_properties(metric, mode, config) and has_unresolved_values(config):
        raise ValueError(
            f"tune.run's config holds grid_search values or search spaces, but the search "
            f"algorithm {type(getattr(search_alg, 'searcher', search_alg)).__name__} does not "
            "take them (set_search_properties returned False): define the search space in "
            "the searcher and keep only constants in config"
        )
    return search_alg


def _all_trials(search_alg: SearchAlgorithm) -> list[Trial]:
    """Every trial ``search_alg`` makes, made now (for Ray Tune, which runs them all)."""
    trials = []
    while not search_alg.is_finished() and (trial := search_alg.next_trial()) is not None:
        trials.append(trial)
    return trials


def _resume(
    search_alg: SearchAlgorithm, config: dict, experiment_dir: str, resume: Any
) -> list[Trial]:
    """The trials of ``experiment_dir``'s saved state, made again by ``search_alg`` with
    their state put back (and the search algorithm's own state, where it saved one).

    Raises:
        ValueError: there is no state to resume from (except with ``resume="AUTO"``), or
            it does not fit this call.
    """
    state = experiment_state.load(experiment_dir)
    if state is None:
        if resume == "AUTO":
            return []
        raise ValueError(
            f"tune.run(resume={resume!r}): {experiment_dir} holds no "
            f"{experiment_state.STATE_FILE} to resume from (pass the local_dir and name of "
            "the run to resume, or resume='AUTO' to start afresh when there is none)"
        )
    try:
        trials = search_alg.resume_trials(state["trials"])
    except ValueError as e:
        raise ValueError(f"Cannot resume {experiment_dir}: {e}") from None
    experiment_state.apply(state, trials, config, experiment_dir, resume)
    search_alg.restore_from_dir(experiment_dir)
    logger.info("Resuming %s: %d trials", experiment_dir, len(trials))
    return trials


def _check_max_concurrent(value: Any) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"max_concurrent_trials must be an int >= 1 or None, got {value!r}")


def _check_failure_options(max_failures: Any, fail_fast: Any) -> None:
    if isinstance(max_failures, bool) or not isinstance(max_failures, int) or max_failures < -1:
        raise ValueError(
            f"max_failures must be an int >= -1 (-1: always recover), got {max_failures!r}"
        )
    if not (isinstance(fail_fast, bool) or fail_fast == "raise"):
        raise ValueError(f"fail_fast must be False, True or 'raise', got {fail_fast!r}")


def _check_checkpoint_freq(checkpoint_freq: Any) -> None:
    if (
        isinstance(checkpoint_freq, bool)
        or not isinstance(checkpoint_freq, int)
        or checkpoint_freq < 0
    ):
        raise ValueError(f"checkpoint_freq must be an int >= 0 (0: never), got {checkpoint_freq!r}")


def _resolve_trainable(run_or_experiment: Any) -> type[Trainable]:
    if isinstance(run_or_experiment, type) and issubclass(run_or_experiment, Trainable):
        return run_or_experiment
    if callable(run_or_experiment) and not isinstance(run_or_experiment, type):
        return wrap_function(run_or_experiment)
    if not isinstance(run_or_experiment, str):
        raise TypeError(
            "run_or_experiment must be a Trainable subclass, the name of one or a function "
            f"trainable, got {run_or_experiment!r}"
        )
    if global_registry.contains(TRAINABLE_CLASS, run_or_experiment):
        return global_registry.get(TRAINABLE_CLASS, run_or_experiment)
    return _algorithm_class(run_or_experiment)


# Ray Tune 1.13's `tune.run` arguments that corral.tune does not act on, with the values
# that ask for nothing it lacks (Ray's defaults, and those that match running trials one
# after another in this process).
_RAY_TUNE_OPTIONS: dict[str, tuple] = {
    "log_to_file": (False,),
    "trial_name_creator": (None,),
    "trial_dirname_creator": (None,),
    "export_formats": (None, ()),
    "server_port": (None,),
    "reuse_actors": (False, True),
    "trial_executor": (None,),
    "queue_trials": (None, False, True),
    "loggers": (None,),
}


def _check_ray_tune_options(options: Mapping[str, Any]) -> None:
    for key, value in options.items():
        if key not in _RAY_TUNE_OPTIONS:
            raise TypeError(f"tune.run() got an unexpected keyword argument {key!r}")
        accepted = _RAY_TUNE_OPTIONS[key]
        if not any(value is a or (type(value) is type(a) and value == a) for a in accepted):
            raise NotImplementedError(
                f"tune.run({key}={value!r}) is Ray Tune's: corral.tune runs trials in this "
                "process, without it (accepted here: "
                f"{key}={accepted[0]!r}). With the `ray` extra "
                "installed, ray.tune.run takes corral's Trainers with all its options."
            )


def _deadline(time_budget_s: float | datetime.timedelta | None) -> float | None:
    """The ``time.monotonic()`` at which ``time_budget_s`` from now runs out (None: never)."""
    if time_budget_s is None:
        return None
    if isinstance(time_budget_s, datetime.timedelta):
        time_budget_s = time_budget_s.total_seconds()
    if isinstance(time_budget_s, bool) or not isinstance(time_budget_s, int | float):
        raise ValueError(f"time_budget_s must be seconds or a timedelta, got {time_budget_s!r}")
    if not time_budget_s > 0:
        raise ValueError(f"time_budget_s must be > 0, got {time_budget_s!r}")
    return time.monotonic() + time_budget_s


def _stop_all_of(stop: Any) -> Callable[[], bool] | None:
    """The ``stop_all`` of a stopper given as ``tune.run(stop=...)`` (None for a dict or a
    plain function)."""
    if stop is None or isinstance(stop, Mapping):
        return None
    stop_all = getattr(stop, "stop_all", None)
    return stop_all if callable(stop_all) else None


def _until(deadline: float | None, should_stop: StopFn) -> StopFn:
    """``should_stop``, and from ``deadline`` on every result stops its trial."""
    if deadline is None:
        return should_stop
    return lambda trial_id, result: time.monotonic() >= deadline or should_stop(trial_id, result)


def _algorithm_class(name: str) -> type[Trainable]:
    """Built-in algorithms resolve through ``corral.agents.registry``, imported only when needed.

    Importing it pulls in torch; ``import corral.tune`` must stay cheap.
    """
    reason = "corral.agents.registry is not available"
    try:
        from corral.agents.registry import get_trainer_class
    except ModuleNotFoundError as e:
        if e.name not in ("corral.agents", "corral.agents.registry"):
            raise
    else:
        try:
            return get_trainer_class(name)
        except (ValueError, KeyError) as e:
            reason = str(e)
    registered = global_registry.names(TRAINABLE_CLASS)
    raise ValueError(
        f"Unknown trainable {name!r}: not registered with register_trainable "
        f"(registered: {registered}) nor a built-in algorithm ({reason})"
    )


def _build_trainable(
    trial: Trial, trainable_cls: type[Trainable], experiment_dir: str, resources: Any = None
) -> Trainable:
    trainable = trainable_cls(
        config=trial.config, logger_creator=_trial_logger_creator(trial, experiment_dir)
    )
    trainable._trial_info = TrialInfo(
        name=str(trial), trial_id=trial.trial_id, trial_resources=resources
    )
    return trainable


def _trial_logger_creator(trial: Trial, experiment_dir: str) -> Callable[[dict], Logger]:
    """Creates the trial's logdir under the experiment folder and records it on the trial."""

    def create(config: dict) -> Logger:
        # A recovering trial (max_failures) goes on logging into its folder.
        if trial.logdir is None:
            tag = _safe_tag(trial.experiment_tag)
            trial.logdir = new_logdir(f"{trial}_{tag}", experiment_dir)
        return UnifiedLogger(config, trial.logdir, trial=trial)

    return create
