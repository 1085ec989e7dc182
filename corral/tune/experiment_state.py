"""``tune.run(resume=...)``: each run keeps its trials' state in its experiment folder
(``experiment_state.json``), and a later run with the same arguments goes on from it.

The file is JSON only: trial ids, tags, statuses, folders, checkpoints (relative to the
experiment folder), last results and the values each trial drew from the config's
``grid_search`` and search spaces, or that a ``Searcher`` suggested for it. Nothing in it
is imported or executed: the config (classes, functions, envs) comes from the resuming
call, and a trial's drawn values are put back only where they are plain JSON values that
the call's own config could draw (a suggestion: see ``resumed_suggestion``). The search
algorithm makes the saved trials again (``SearchAlgorithm.resume_trials``) and ``apply``
puts their state back.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Mapping, Sequence
from typing import Any

from corral.tune.logger import _write_json_atomically, to_jsonable
from corral.tune.result import EXPR_PARAM_FILE
from corral.tune.search import Choice, Domain, LogUniform, RandInt, Uniform
from corral.tune.trial import Trial

logger = logging.getLogger(__name__)

STATE_FILE = "experiment_state.json"
FORMAT_VERSION = 1

# `resume` values of Ray Tune 1.13 this builds: resume the unfinished trials (True,
# "LOCAL", "AUTO": a fresh run when there is no state yet), or only the errored ones.
RESUME_MODES = (True, "LOCAL", "AUTO", "ERRORED_ONLY")
_GRID = "grid_search"


def check_resume(resume: Any) -> None:
    """Raises for a ``resume`` value that is not False or one of ``RESUME_MODES``."""
    if resume is False or resume is None:
        return
    if any(resume is mode or (isinstance(resume, str) and resume == mode) for mode in RESUME_MODES):
        return
    if resume in ("REMOTE", "PROMPT"):
        raise NotImplementedError(
            f"tune.run(resume={resume!r}) is not built (no cloud syncing, no prompt); "
            "resume=True goes on from the experiment folder"
        )
    raise ValueError(
        f"resume must be False, True, 'LOCAL', 'AUTO' or 'ERRORED_ONLY', got {resume!r}"
    )


def varied_params(spec: Mapping, variant: Mapping) -> dict[str, Any]:
    """The values ``variant`` took at the paths where ``spec`` has a ``grid_search`` or
    a search space, keyed by their path joined by "/" (Ray Tune's ``evaluated_params``)."""
    out: dict[str, Any] = {}
    for path, _ in _varied_paths(spec):
        out["/".join(map(str, path))] = _get(variant, path)
    return out


def save(
    experiment_dir: str,
    trials: Sequence[Trial],
    *,
    runner_data: Mapping[str, Any] | None = None,
    stats: Mapping[str, Any] | None = None,
) -> None:
    """Writes ``experiment_state.json`` (atomically) with every trial's state, and the
    runner's data and statistics (``ExperimentAnalysis.runner_data()`` / ``stats()``)."""
    os.makedirs(experiment_dir, exist_ok=True)
    rows = [_trial_row(trial, experiment_dir) for trial in trials]
    state = {
        "format_version": FORMAT_VERSION,
        "trials": rows,
        "runner_data": to_jsonable(dict(runner_data or {})),
        "stats": to_jsonable(dict(stats or {})),
    }
    _write_json_atomically(os.path.join(experiment_dir, STATE_FILE), state)


def load(experiment_dir: str) -> dict | None:
    """The saved state, or None when the folder has none.

    Raises:
        ValueError: the file is not a state this version of corral wrote.
    """
    path = os.path.join(experiment_dir, STATE_FILE)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        state = json.load(f)
    if not isinstance(state, dict) or state.get("format_version") != FORMAT_VERSION:
        raise ValueError(f"{path} is not an experiment state corral can resume from")
    if not isinstance(state.get("trials"), list):
        raise ValueError(f"{path} holds no list of trials")
    return state


def apply(
    state: dict, trials: list[Trial], spec: Mapping, experiment_dir: str, resume: Any
) -> None:
    """Puts the saved state back on ``trials`` (made afresh from the same call's config).

    Finished trials stay as they ended (not run again); with ``resume`` True, "LOCAL" or
    "AUTO" the unfinished ones (pending, running, paused) are pending again and restore
    their latest checkpoint, errored ones stay errored; with "ERRORED_ONLY" only the
    errored ones run again, from their latest checkpoint.

    Raises:
        ValueError: the saved trials do not match this call's config (another number of
            trials, other grid values, or a drawn value this config cannot give back).
    """
    rows = state["trials"]
    if len(rows) != len(trials):
        raise ValueError(
            f"Cannot resume {experiment_dir}: it holds {len(rows)} trials, this call's "
            f"config and num_samples make {len(trials)}"
        )
    varied = dict(_varied_paths(spec))
    for row, trial in zip(rows, trials):
        _restore_params(row, trial, varied, experiment_dir)
        _put_back(row, trial, experiment_dir)
        trial.status = _resumed_status(str(row.get("status", Trial.PENDING)), resume)


def load_trials(state: dict, experiment_dir: str) -> list[Trial]:
    """The trials of a saved state as they were saved (statuses too), for reading them
    (``ExperimentAnalysis(path)``), not running them: each config is its trial's
    ``params.json`` (JSON only; ``{}`` where it cannot be read)."""
    trials = []
    for row in state["trials"]:
        trial = Trial(
            trainable_name=str(row.get("trainable_name") or os.path.basename(experiment_dir)),
            config={},
            trial_id=str(row["trial_id"]),
        )
        _put_back(row, trial, experiment_dir)
        trial.evaluated_params = dict(row.get("evaluated_params") or {})
        trial.status = str(row.get("status", Trial.PENDING))
        trial.config = _read_params(trial.logdir)
        trials.append(trial)
    return trials


def _read_params(logdir: str | None) -> dict:
    if not logdir:
        return {}
    try:
        with open(os.path.join(logdir, EXPR_PARAM_FILE), encoding="utf-8") as f:
            config = json.load(f)
    except (OSError, ValueError):
        return {}
    return config if isinstance(config, dict) else {}


def _put_back(row: dict, trial: Trial, experiment_dir: str) -> None:
    """A saved row's state, onto ``trial`` (all but its config and status)."""
    trial.trial_id = str(row["trial_id"])
    trial.experiment_tag = str(row.get("experiment_tag", trial.experiment_tag))
    trial.logdir = _inside(experiment_dir, row.get("logdir"))
    trial.checkpoint = _inside(experiment_dir, row.get("checkpoint"))
    trial.checkpoints = [
        (path, result)
        for rel, result in row.get("checkpoints", [])
        if (path := _inside(experiment_dir, rel)) is not None
    ]
    trial.last_result = dict(row.get("last_result") or {})
    trial.metric_analysis = dict(row.get("metric_analysis") or {})
    trial._history = {k: list(v) for k, v in (row.get("history") or {}).items()}
    trial.num_failures = int(row.get("num_failures", 0))
    trial.error_msg = row.get("error_msg")


def _resumed_status(saved: str, resume: Any) -> str:
    if resume == "ERRORED_ONLY":
        return Trial.PENDING if saved == Trial.ERROR else _kept(saved)
    if saved in (Trial.TERMINATED, Trial.ERROR):
        return saved
    return Trial.PENDING


def _kept(saved: str) -> str:
    # Under ERRORED_ONLY an unfinished trial is not run: it keeps a settled status.
    return saved if saved in (Trial.TERMINATED, Trial.ERROR) else Trial.TERMINATED


def _restore_params(row: dict, trial: Trial, varied: dict, experiment_dir: str) -> None:
    saved = row.get("evaluated_params") or {}
    if set(saved) != set(trial.evaluated_params):
        raise ValueError(
            f"Cannot resume {experiment_dir}: its trials varied {sorted(saved)}, this call's "
            f"config varies {sorted(trial.evaluated_params)}"
        )
    for key, value in saved.items():
        mine = trial.evaluated_params[key]
        if to_jsonable(mine) == value:
            continue
        path = tuple(key.split("/"))
        domain = varied.get(path)
        if domain is None or not _can_draw(domain, value):
            raise ValueError(
                f"Cannot resume {experiment_dir}: trial {row.get('trial_id')} had {key}="
                f"{value!r}, which this call's config ({key}={domain!r}) does not give; "
                "resume with the same config (and tune.run(seed=...) for values that "
                "are not plain numbers or strings)"
            )
        _set(trial.config, path, value)
        trial.evaluated_params[key] = value


def resumed_suggestion(row: Mapping, spec: Mapping) -> dict[str, Any]:
    """The suggestion a ``Searcher`` made for a saved trial (its ``evaluated_params``,
    keyed by path joined by "/"), checked before it goes into a config again.

    Each value must be plain JSON data; where the resuming call's config has a search
    space it must be a value that space could give, where it has a constant it must be
    that constant, and elsewhere a string must not look like a module or class path
    (no "." or ":"): nothing named in the state is imported.

    Raises:
        ValueError: a value breaks these rules (naming the trial and the key).
    """
    saved = row.get("evaluated_params")
    if not isinstance(saved, Mapping):
        raise ValueError(f"trial {row.get('trial_id')} has no saved suggestion")
    varied = dict(_varied_paths(spec))
    for key, value in saved.items():
        path = tuple(str(key).split("/"))
        where = f"trial {row.get('trial_id')} was suggested {key}={value!r}"
        if not _plain_data(value):
            raise ValueError(f"{where}, which is not plain JSON data")
        domain = varied.get(path)
        if domain is not None:
            if isinstance(domain, list):  # one of the grid's values
                gives = any(to_jsonable(v) == value and _plain_data(v) for v in domain)
            else:
                gives = _can_draw(domain, value)
            if not gives:
                raise ValueError(
                    f"{where}, which this call's config ({key}={domain!r}) does not give"
                )
            continue
        try:
            fixed = _get(spec, path)
        except (KeyError, TypeError):
            fixed = _ABSENT
        if fixed is not _ABSENT and to_jsonable(fixed) != value:
            raise ValueError(f"{where}, where this call's config sets {fixed!r}")
        if fixed is _ABSENT and _may_name_code(value):
            raise ValueError(
                f"{where}: a string that could name a module or class, which corral does not "
                "take from an experiment state (nothing named in it is imported); set it in "
                "the config instead"
            )
    return dict(saved)


_ABSENT = object()


def _plain_data(value: Any) -> bool:
    if isinstance(value, list):
        return all(_plain_data(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _plain_data(v) for k, v in value.items())
    return _plain(value)


def _may_name_code(value: Any) -> bool:
    if isinstance(value, str):
        return "." in value or ":" in value
    if isinstance(value, list):
        return any(_may_name_code(v) for v in value)
    if isinstance(value, dict):
        return any(_may_name_code(v) for v in value.values())
    return False


def _can_draw(domain: Any, value: Any) -> bool:
    """Whether ``value`` (from JSON) is a plain value ``domain`` could have drawn."""
    if isinstance(domain, Choice):
        return any(to_jsonable(c) == value and _plain(c) for c in domain.categories)
    if isinstance(domain, Uniform | LogUniform):
        return isinstance(value, int | float) and domain.lower <= value <= domain.upper
    if isinstance(domain, RandInt):
        return isinstance(value, int) and domain.lower <= value < domain.upper
    return False  # grid values are made again exactly; `sample_from` may give anything


def _plain(value: Any) -> bool:
    return value is None or isinstance(value, bool | int | float | str)


def _trial_row(trial: Trial, experiment_dir: str) -> dict:
    return {
        "trial_id": trial.trial_id,
        "trainable_name": trial.trainable_name,
        "experiment_tag": trial.experiment_tag,
        # A trial an error of the run ended (Ctrl-C, a hook) goes on when resumed.
        "status": Trial.RUNNING if trial.interrupted else trial.status,
        "logdir": _relative(experiment_dir, trial.logdir),
        "checkpoint": _relative(experiment_dir, trial.checkpoint),
        "checkpoints": [
            [_relative(experiment_dir, path), to_jsonable(result)]
            for path, result in trial.checkpoints
        ],
        "evaluated_params": to_jsonable(trial.evaluated_params),
        "last_result": to_jsonable(trial.last_result),
        "metric_analysis": to_jsonable(trial.metric_analysis),
        "history": to_jsonable(trial._history),
        "num_failures": trial.num_failures,
        "error_msg": trial.error_msg,
    }


def _relative(root: str, path: str | None) -> str | None:
    return None if path is None else os.path.relpath(path, root)


def _inside(root: str, relative: Any) -> str | None:
    """``root/relative`` if that stays inside ``root`` (else None, with a warning)."""
    if not isinstance(relative, str) or not relative:
        return None
    root = os.path.realpath(root)
    path = os.path.realpath(os.path.join(root, relative))
    if os.path.commonpath([root, path]) != root:
        logger.warning("Ignoring %r in the experiment state: it leaves %s", relative, root)
        return None
    return path


def _varied_paths(spec: Mapping, prefix: tuple = ()) -> list[tuple[tuple, Any]]:
    """(path, grid values or search space) of every varied value of ``spec``."""
    out: list[tuple[tuple, Any]] = []
    for key, value in spec.items():
        path = (*prefix, str(key))
        if isinstance(value, Domain):
            out.append((path, value))
        elif isinstance(value, Mapping):
            if set(value) == {_GRID}:
                out.append((path, value[_GRID]))
            else:
                out.extend(_varied_paths(value, path))
    return out


def _get(config: Mapping, path: tuple) -> Any:
    for key in path:
        config = config[key]
    return config


def _set(config: dict, path: tuple, value: Any) -> None:
    for key in path[:-1]:
        config = config[key]
    config[path[-1]] = value
