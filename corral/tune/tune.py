"""``tune.run``: train one or more trials of a trainable, one after another, in this process.

A convenience for scripts ported from RLlib 1.x (``tune.run("PPO", config=...,
stop=...)``) and for the ``corral train`` command, not a port of Ray Tune:
no search algorithms, schedulers or parallel trials. ``grid_search`` values
are expanded into one trial per combination (times ``num_samples``); trials
run sequentially and an exception in one ends the run.
"""

from __future__ import annotations

import copy
import difflib
import itertools
import math
import os
import random
import re
import shutil
import tempfile
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from corral.tune.logger import Logger, UnifiedLogger, flatten_dict
from corral.tune.registry import TRAINABLE_CLASS, global_registry
from corral.tune.result import CONFIG, DONE, default_results_dir
from corral.tune.search import has_domains, resolve
from corral.tune.trainable import Trainable, TrialInfo

GRID_SEARCH = "grid_search"
StopFn = Callable[[str, dict], bool]


def grid_search(values: Iterable[Any]) -> dict[str, list[Any]]:
    """Mark a config value to be tried with each of ``values``, one trial per value.

    The marker is Ray's ``{"grid_search": [...]}``, so YAML experiment files
    that spell it out by hand are expanded too.
    """
    return {GRID_SEARCH: list(values)}


@dataclass
class Trial:
    """One run of a trainable with one resolved config."""

    trainable_name: str
    config: dict
    trial_id: str
    experiment_tag: str = ""
    logdir: str | None = None
    last_result: dict = field(default_factory=dict)
    checkpoint: str | None = None
    status: str = "PENDING"  # then RUNNING, and TERMINATED or ERROR
    # Tune 1.13's per-metric summary over all results: metric (nested keys joined by
    # "/") -> {"max", "min", "avg", "last", "last-5-avg", "last-10-avg"}.
    metric_analysis: dict = field(default_factory=dict)
    # Each checkpoint saved, with the (flattened) result it was saved after.
    checkpoints: list = field(default_factory=list)
    _history: dict = field(default_factory=dict, repr=False)
    # Every result's numbers, flattened (for `ExperimentAnalysis.dataframe`).
    _results: list = field(default_factory=list, repr=False)

    def __str__(self) -> str:
        return f"{self.trainable_name}_{self.trial_id}"

    def update_last_result(self, result: dict) -> None:
        """Records a new result: `last_result` and `metric_analysis`."""
        self.last_result = result
        scalars = {}
        for key, value in flatten_dict({k: v for k, v in result.items() if k != CONFIG}).items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            scalars[key] = value
            values = self._history.setdefault(key, [])
            values.append(float(value))
            self.metric_analysis[key] = {
                "max": max(values),
                "min": min(values),
                "avg": sum(values) / len(values),
                "last": values[-1],
                "last-5-avg": sum(values[-5:]) / len(values[-5:]),
                "last-10-avg": sum(values[-10:]) / len(values[-10:]),
            }
        self._results.append(scalars)


class ExperimentAnalysis:
    """The trials of a ``tune.run`` call and helpers to pick the best one.

    :param default_metric: metric the ``best_*`` properties rank by (``run``'s ``metric``).
    :param default_mode: ``"max"`` or ``"min"`` (``run``'s ``mode``).
    """

    def __init__(
        self,
        trials: list[Trial],
        default_metric: str | None = None,
        default_mode: str | None = None,
    ) -> None:
        self.trials = trials
        self.default_metric = default_metric
        self.default_mode = default_mode

    def get_best_trial(
        self, metric: str | None = None, mode: str | None = None, scope: str = "last"
    ) -> Trial | None:
        """The trial that is best in ``metric`` (a key, nested keys joined by "/").

        ``scope`` (Tune 1.13): "last" compares each trial's last result, "all" the best
        value of all its results (per ``mode``), "avg" the average of all results,
        "last-5-avg" / "last-10-avg" the average of the last 5 / 10 results.
        Trials without a finite value for the metric are ignored; ``None`` if none has one.
        """
        metric = metric or self.default_metric
        mode = mode or self.default_mode
        if metric is None or mode not in ("max", "min"):
            raise ValueError(
                f"get_best_trial needs a metric and a mode of 'max' or 'min' (here or in "
                f"tune.run(metric=..., mode=...)), got metric={metric!r}, mode={mode!r}"
            )
        scopes = ("all", "last", "avg", "last-5-avg", "last-10-avg")
        if scope not in scopes:
            raise ValueError(f"get_best_trial: scope={scope!r}, expected one of {scopes}.")
        scored = [
            (value, trial)
            for trial in self.trials
            if (value := _scoped_value(trial, metric, mode, scope)) is not None
        ]
        if not scored:
            return None
        pick = max if mode == "max" else min
        return pick(scored, key=lambda pair: pair[0])[1]

    def get_best_config(self, metric: str | None = None, mode: str | None = None) -> dict | None:
        """Config of ``get_best_trial(metric, mode)``."""
        trial = self.get_best_trial(metric, mode)
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

    def dataframe(self, metric: str | None = None, mode: str | None = None) -> Any:
        """A pandas DataFrame with one row per trial (Tune 1.13): its last result, or with
        ``metric`` and ``mode`` its best one, flattened, plus ``trial_id`` and ``logdir``."""
        try:
            import pandas
        except ImportError:
            raise ImportError(
                "ExperimentAnalysis.dataframe() needs pandas: pip install pandas"
            ) from None
        if (metric is None) != (mode is None) or mode not in (None, "max", "min"):
            raise ValueError(f"dataframe: give both metric and mode ('max'/'min'), got {mode!r}")
        rows = []
        for trial in self.trials:
            results = trial._results or [{}]
            row = results[-1]
            if metric is not None:
                scored = [r for r in results if _finite(r.get(metric))]
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
        metric = metric or self.default_metric or "training_iteration"
        return [(path, _metric_value(result, metric)) for path, result in trial.checkpoints]

    def get_best_checkpoint(
        self, trial: Trial, metric: str | None = None, mode: str | None = None
    ) -> str | None:
        """The checkpoint of ``trial`` whose result was best in ``metric`` (``mode`` "max"
        or "min"); None when no checkpoint has a value for it."""
        metric = metric or self.default_metric
        mode = mode or self.default_mode
        if metric is None or mode not in ("max", "min"):
            raise ValueError(
                f"get_best_checkpoint needs a metric and a mode of 'max' or 'min', got "
                f"metric={metric!r}, mode={mode!r}"
            )
        scored = [
            (v, path)
            for path, v in self.get_trial_checkpoints_paths(trial, metric)
            if v is not None
        ]
        if not scored:
            return None
        pick = max if mode == "max" else min
        return pick(scored, key=lambda pair: pair[0])[1]


def _finite(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value)


def _scoped_value(trial: Trial, metric: str, mode: str, scope: str) -> float | None:
    if scope == "last":
        return _metric_value(trial.last_result, metric)
    summary = trial.metric_analysis.get(metric)
    if not summary:
        return None
    value = summary[mode] if scope == "all" else summary[scope]
    return value if math.isfinite(value) else None


def _metric_value(result: dict, metric: str) -> float | None:
    value = flatten_dict({k: v for k, v in result.items() if k != CONFIG}).get(metric)
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def run(
    run_or_experiment: str | type[Trainable],
    config: dict | None = None,
    stop: Mapping[str, Any] | StopFn | None = None,
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
) -> ExperimentAnalysis:
    """Train trials of a trainable until each meets ``stop``; return their analysis.

    :param run_or_experiment: a ``Trainable`` subclass, a name given to
        ``register_trainable``, or an algorithm name such as ``"PPO"``.
    :param config: the config; ``grid_search([...])`` values are expanded. With
        ``"backend": "ray"`` the trials run in parallel under Ray Tune (on the cluster
        ``ray.init()`` connects to), each in its ``default_resource_request`` placement
        group; the returned analysis is the same.
    :param stop: ``{key: threshold}``, a trial stops once any ``result[key] >=
        threshold`` (nested keys joined by "/"), or ``stop(trial_id, result) ->
        bool``. A trial also stops when a result has ``done=True``. With no
        criterion a trial runs until it reports ``done``.
    :param num_samples: how many times to run each grid combination.
    :param checkpoint_freq: save every this many iterations (0: never).
    :param checkpoint_at_end: save after the last iteration.
    :param local_dir: results root, by default ``default_results_dir()``;
        trial logdirs go to ``<local_dir>/<name>/``.
    :param verbose: 0 silent, 1 a line per finished trial, 2 also a line per iteration.
    :param restore: a checkpoint every trial restores from before training.
    :param name: experiment folder name, by default the trainable's name.
    :param metric: default metric of the analysis' ``best_*`` helpers.
    :param mode: ``"max"`` or ``"min"``, default mode of those helpers.
    :param keep_checkpoints_num: keep at most this many checkpoints per trial, the
        best by ``checkpoint_score_attr``; the newest is never deleted.
    :param checkpoint_score_attr: result key that ranks checkpoints (default
        ``training_iteration``); a ``"min-"`` prefix ranks the lowest best, as in Tune.
    :param seed: seed of the draws of search spaces (``choice``, ``uniform``, ...).
    """
    trainable_cls = _resolve_trainable(run_or_experiment)
    trainable_name = (
        run_or_experiment if isinstance(run_or_experiment, str) else trainable_cls.__name__
    )
    experiment_dir = os.path.join(local_dir or default_results_dir(), name or trainable_name)
    should_stop = _stop_condition(stop)
    keeper = CheckpointKeeper(keep_checkpoints_num, checkpoint_score_attr)
    trials = _make_trials(trainable_name, config or {}, num_samples, random.Random(seed))
    if (config or {}).get("backend") == "ray":
        # The trials run in parallel under Ray Tune, each in its own placement group.
        from corral.tune.ray_run import run_trials_on_ray

        run_trials_on_ray(
            trainable_cls,
            trials,
            experiment_root=local_dir or default_results_dir(),
            name=name or trainable_name,
            stop=stop,
            checkpoint_freq=checkpoint_freq,
            checkpoint_at_end=checkpoint_at_end,
            restore=restore,
            verbose=verbose,
            keep_checkpoints_num=keep_checkpoints_num,
            checkpoint_score_attr=checkpoint_score_attr,
        )
        return ExperimentAnalysis(trials, default_metric=metric, default_mode=mode)
    for trial in trials:
        _run_trial(
            trial,
            trainable_cls,
            experiment_dir,
            should_stop,
            checkpoint_freq=checkpoint_freq,
            checkpoint_at_end=checkpoint_at_end,
            restore=restore,
            verbose=verbose,
            keeper=keeper,
        )
    return ExperimentAnalysis(trials, default_metric=metric, default_mode=mode)


def _resolve_trainable(run_or_experiment: Any) -> type[Trainable]:
    if isinstance(run_or_experiment, type) and issubclass(run_or_experiment, Trainable):
        return run_or_experiment
    if not isinstance(run_or_experiment, str):
        raise TypeError(
            "run_or_experiment must be a Trainable subclass or the name of one, "
            f"got {run_or_experiment!r}"
        )
    if global_registry.contains(TRAINABLE_CLASS, run_or_experiment):
        return global_registry.get(TRAINABLE_CLASS, run_or_experiment)
    return _algorithm_class(run_or_experiment)


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


def _stop_condition(stop: Mapping[str, Any] | StopFn | None) -> StopFn:
    if stop is None:
        return lambda trial_id, result: False
    if isinstance(stop, Mapping):
        criteria = dict(stop)
        return lambda trial_id, result: _criteria_met(criteria, result)
    if callable(stop):
        return stop
    raise TypeError(f"stop must be a dict, a callable or None, got {stop!r}")


def _criteria_met(criteria: dict[str, Any], result: dict) -> bool:
    flat = flatten_dict({k: v for k, v in result.items() if k != CONFIG})
    for key, threshold in criteria.items():
        if key not in flat:
            close = difflib.get_close_matches(key, flat, n=3)
            raise ValueError(
                f"Stop criterion {key!r} is not a key of the training result"
                + (f"; did you mean {close}?" if close else f"; keys: {sorted(flat)}")
            )
        if flat[key] is not None and flat[key] >= threshold:
            return True
    return False


def _make_trials(
    trainable_name: str, config: dict, num_samples: int, rng: random.Random
) -> list[Trial]:
    run_id = uuid.uuid4().hex[:5]
    variants = _expand_grid(config)
    trials = []
    for _ in range(num_samples):
        for variant, tag in variants:
            index = len(trials)
            if has_domains(variant):  # fresh draws for every trial
                variant = resolve(variant, rng)
            trials.append(
                Trial(
                    trainable_name=trainable_name,
                    config=variant,
                    trial_id=f"{run_id}_{index:05d}",
                    experiment_tag=f"{index}_{tag}" if tag else str(index),
                )
            )
    return trials


def _expand_grid(config: dict) -> list[tuple[dict, str]]:
    """Every combination of the config's grid values, with a tag such as ``"lr=0.01,gamma=0.9"``."""
    grids = list(_grid_paths(config))
    variants = []
    for values in itertools.product(*(grid_values for _, grid_values in grids)):
        variant = copy.deepcopy(config)
        for (path, _), value in zip(grids, values):
            _set_path(variant, path, copy.deepcopy(value))
        tag = ",".join(f"{path[-1]}={value}" for (path, _), value in zip(grids, values))
        variants.append((variant, tag))
    return variants


def _grid_paths(config: Mapping, prefix: tuple = ()) -> Iterator[tuple[tuple, list]]:
    for key, value in config.items():
        if not isinstance(value, Mapping):
            continue
        path = (*prefix, key)
        if set(value) == {GRID_SEARCH}:
            values = list(value[GRID_SEARCH])
            if not values:
                raise ValueError(f"grid_search for {'/'.join(map(str, path))} has no values")
            yield path, values
        else:
            yield from _grid_paths(value, path)


def _set_path(config: dict, path: tuple, value: Any) -> None:
    for key in path[:-1]:
        config = config[key]
    config[path[-1]] = value


def _run_trial(
    trial: Trial,
    trainable_cls: type[Trainable],
    experiment_dir: str,
    should_stop: StopFn,
    *,
    checkpoint_freq: int,
    checkpoint_at_end: bool,
    restore: str | None,
    verbose: int,
    keeper: CheckpointKeeper,
) -> None:
    trial.status = "RUNNING"
    trainable = trainable_cls(
        config=trial.config, logger_creator=_trial_logger_creator(trial, experiment_dir)
    )
    trainable._trial_info = TrialInfo(name=str(trial), trial_id=trial.trial_id)
    try:
        if restore:
            trainable.restore(restore)
        train_trial(
            trial,
            trainable,
            should_stop,
            checkpoint_freq=checkpoint_freq,
            checkpoint_at_end=checkpoint_at_end,
            keeper=keeper,
            verbose=verbose,
        )
        trial.status = "TERMINATED"
    except BaseException:
        trial.status = "ERROR"
        raise
    finally:
        trainable.stop()
        if verbose >= 1:
            print(f"Trial {trial} {trial.status} after {trainable.iteration} iterations")


def train_trial(
    trial: Trial,
    trainable: Trainable,
    should_stop: StopFn,
    *,
    checkpoint_freq: int = 0,
    checkpoint_at_end: bool = False,
    keeper: CheckpointKeeper | None = None,
    on_result: Callable[[dict], None] | None = None,
    on_checkpoint: Callable[[str], None] | None = None,
    verbose: int = 0,
) -> None:
    """The training loop of one trial: the one `tune.run` and `corral train` share.

    Trains until a result is ``done`` or ``should_stop(trial_id, result)``, saving
    every ``checkpoint_freq`` iterations and, with ``checkpoint_at_end``, once
    more at the end (also when the loop is left by an exception such as Ctrl-C's
    ``KeyboardInterrupt``, which is then re-raised) unless the last iteration was
    just saved. ``keeper`` prunes old checkpoints; ``on_result`` sees every result,
    ``on_checkpoint`` every checkpoint path.
    """
    keeper = keeper or CheckpointKeeper()

    def save() -> None:
        path = keeper.save(trial, trainable)
        if on_checkpoint is not None:
            on_checkpoint(path)

    try:
        while True:
            result = trainable.train()
            trial.update_last_result(result)
            if on_result is not None:
                on_result(result)
            if verbose >= 2:
                print(f"Trial {trial} iteration {trainable.iteration}: {_summary(result)}")
            if checkpoint_freq and trainable.iteration % checkpoint_freq == 0:
                save()
            if result.get(DONE) or should_stop(trial.trial_id, result):
                return
    finally:
        if checkpoint_at_end and trainable.iteration and not _checkpointed_now(trial, trainable):
            save()


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
        score_attr = score_attr or "training_iteration"
        self.minimise = score_attr.startswith("min-")
        self.score_attr = score_attr[4:] if self.minimise else score_attr

    def save(self, trial: Trial, trainable: Trainable) -> str:
        """Saves a checkpoint of ``trainable``, records it on ``trial``, prunes; returns it."""
        path = trainable.save()
        trial.checkpoint = path
        trial.checkpoints = [(p, r) for p, r in trial.checkpoints if p != path]
        trial.checkpoints.append((path, trial.last_result))
        if self.num is not None and len(trial.checkpoints) > self.num:
            self._prune(trial)
        return path

    def _score(self, result: dict) -> float:
        value = _metric_value(result, self.score_attr)
        if value is None:
            return -math.inf
        return -value if self.minimise else value

    def _prune(self, trial: Trial) -> None:
        ranked = sorted(trial.checkpoints, key=lambda entry: self._score(entry[1]), reverse=True)
        keep = {path for path, _ in ranked[: self.num]} | {trial.checkpoint}
        for path, _ in trial.checkpoints:
            if path not in keep:
                shutil.rmtree(path, ignore_errors=True)
        trial.checkpoints = [(p, r) for p, r in trial.checkpoints if p in keep]


def _checkpointed_now(trial: Trial, trainable: Trainable) -> bool:
    expected = f"checkpoint_{trainable.iteration:06d}"
    return trial.checkpoint is not None and os.path.basename(trial.checkpoint) == expected


def _summary(result: dict) -> str:
    keys = ("episode_reward_mean", "timesteps_total", "time_total_s")
    return ", ".join(f"{k}={result[k]}" for k in keys if result.get(k) is not None)


def _trial_logger_creator(trial: Trial, experiment_dir: str) -> Callable[[dict], Logger]:
    """Creates the trial's logdir under the experiment folder and records it on the trial."""

    def create(config: dict) -> Logger:
        os.makedirs(experiment_dir, exist_ok=True)
        timestr = datetime.today().strftime("%Y-%m-%d_%H-%M-%S")
        prefix = f"{trial}_{_safe_tag(trial.experiment_tag)}_{timestr}"
        trial.logdir = tempfile.mkdtemp(prefix=prefix, dir=experiment_dir)
        return UnifiedLogger(config, trial.logdir, trial=trial)

    return create


def _safe_tag(tag: str, max_length: int = 80) -> str:
    # Grid values can hold "/" or spaces; keep folder names portable and short.
    return re.sub(r"[^A-Za-z0-9._=,+-]", "_", tag)[:max_length]
