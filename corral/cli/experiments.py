"""What ``corral train`` trains: RLlib-style experiment files, the flags over them, and
the stop criteria checked before anything is built.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import json
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from corral.cli.common import UsageError
from corral.tune.result import EVALUATION, RESULT_SECTIONS, TRAINER_RESULT_KEYS, TRAINING_ITERATION

# Used when neither the command line nor an experiment file gives a stop
# criterion: RLlib trained forever, which is rarely what a first try wants.
DEFAULT_STOP = {TRAINING_ITERATION: 100}

# Keys of an experiment in an ``-f`` file (RLlib's tuned-example layout).
EXPERIMENT_KEYS = (
    "run",
    "env",
    "stop",
    "config",
    "checkpoint_freq",
    "checkpoint_at_end",
    "local_dir",
    "keep_checkpoints_num",
    "checkpoint_score_attr",
    "restore",
    "num_samples",
)


class ExperimentFileError(UsageError):
    """An ``-f`` experiment file that cannot be read or does not have RLlib's layout."""


@dataclass
class TrainSpec:
    """One experiment to train, after merging the file's values with the flags."""

    name: str
    run: str
    env: str | None
    config: dict
    stop: dict
    checkpoint_freq: int = 0
    checkpoint_at_end: bool = False
    local_dir: str | None = None
    keep_checkpoints_num: int | None = None
    checkpoint_score_attr: str | None = None
    restore: str | None = None
    # Trials per grid combination (`--num-samples` or the file's); None: one.
    num_samples: int | None = None
    # The experiment a trial of a grid belongs to (its folder under `local_dir`, which
    # all its trials share); empty: `name`.
    experiment: str = ""


def load_experiments(path: str, extra_keys: tuple[str, ...] = ()) -> dict[str, dict]:
    """Reads an RLlib tuned-example YAML: ``{experiment name: spec}``.

    Each spec keeps RLlib's keys (``run``, ``env``, ``stop``, ``config``,
    ``checkpoint_freq``, ``checkpoint_at_end``, ``local_dir``); missing ones
    are filled with their defaults (``stop`` stays ``None`` so the caller can
    tell "not given" from "given as empty"). `extra_keys` (e.g. the
    ``pass_criteria`` of RLlib's learning tests) are allowed too, and kept as given
    when present.

    Raises:
        ExperimentFileError: the file is missing, not YAML, or not laid out as
            experiments; the message names the file and the bad entry.
    """
    import yaml

    try:
        with open(path) as f:
            data = yaml.safe_load(f)
    except OSError as e:
        raise ExperimentFileError(f"cannot read experiment file {path!r}: {e.strerror}") from None
    except yaml.YAMLError as e:
        raise ExperimentFileError(f"{path} is not valid YAML: {e}") from None
    if not isinstance(data, dict) or not data:
        raise ExperimentFileError(
            f"{path} must map experiment names to specs, e.g. 'cartpole-ppo: {{run: PPO, ...}}'"
        )
    return {
        str(name): _experiment_spec(path, str(name), spec, extra_keys)
        for name, spec in data.items()
    }


def _experiment_spec(path: str, name: str, spec: Any, extra_keys: tuple[str, ...] = ()) -> dict:
    where = f"{path}: experiment {name!r}"
    if not isinstance(spec, dict):
        raise ExperimentFileError(f"{where} must be a mapping, got {spec!r}")
    supported = [*EXPERIMENT_KEYS, *extra_keys]
    unknown = sorted(set(spec) - set(supported))
    if unknown:
        raise ExperimentFileError(f"{where} has unsupported keys {unknown}; supported: {supported}")
    for key in ("config", "stop"):
        if spec.get(key) is not None and not isinstance(spec[key], dict):
            raise ExperimentFileError(f"{where}: '{key}' must be a mapping, got {spec[key]!r}")
    freq = spec.get("checkpoint_freq", 0) or 0
    if not isinstance(freq, int) or isinstance(freq, bool) or freq < 0:
        raise ExperimentFileError(f"{where}: 'checkpoint_freq' must be an int >= 0, got {freq!r}")
    return {
        "run": spec.get("run"),
        "env": spec.get("env"),
        "stop": spec.get("stop"),
        "config": dict(spec.get("config") or {}),
        "checkpoint_freq": freq,
        "checkpoint_at_end": bool(spec.get("checkpoint_at_end", False)),
        "local_dir": spec.get("local_dir"),
        "keep_checkpoints_num": spec.get("keep_checkpoints_num"),
        "checkpoint_score_attr": spec.get("checkpoint_score_attr"),
        "restore": spec.get("restore"),
        "num_samples": spec.get("num_samples"),
        **{key: spec[key] for key in extra_keys if key in spec},
    }


def train_specs(args: argparse.Namespace) -> list[TrainSpec]:
    """The trials to train one by one: each experiment's (``experiment_specs``)
    combinations of ``grid_search`` values, times ``num_samples``."""
    return [
        trial for spec in experiment_specs(args) for trial in _trials_of(spec, spec.num_samples)
    ]


def experiment_specs(args: argparse.Namespace) -> list[TrainSpec]:
    """The experiments to run: the ``-f`` file's (or one from the flags), flags overriding;
    their configs as given (``grid_search`` values and search spaces not expanded)."""
    if args.config_file:
        experiments = load_experiments(args.config_file)
    else:
        experiments = {"default": _experiment_spec("<command line>", "default", {})}
    return [_apply_flags(name, spec, args) for name, spec in experiments.items()]


def _trials_of(spec: TrainSpec, num_samples: int | None) -> list[TrainSpec]:
    """One spec per trial of the experiment: each combination of its config's
    ``grid_search`` values, times ``num_samples``, with search spaces drawn (as
    ``tune.run`` expands a config); the spec itself when there is one trial."""
    from corral.tune.tune import config_variants

    try:
        variants = config_variants(spec.config, num_samples or 1)
    except ValueError as e:
        raise UsageError(str(e)) from None
    if len(variants) == 1:
        return [dataclasses.replace(spec, config=variants[0][0])]
    return [
        dataclasses.replace(
            spec,
            name=f"{spec.name}_{i}" + (f"_{tag}" if tag else ""),
            config=c,
            experiment=spec.experiment or spec.name,
        )
        for i, (c, tag) in enumerate(variants)
    ]


def _apply_flags(name: str, spec: dict, args: argparse.Namespace) -> TrainSpec:
    from corral.utils import merge_dicts

    config = merge_dicts(spec["config"], args.config or {})
    if args.seed is not None:
        config["seed"] = args.seed
    framework = args.framework or (
        "torch" if args.torch else "tf2" if args.eager or args.trace else None
    )
    if framework:
        config["framework"] = framework
    if args.verbose:
        config["log_level"] = "DEBUG" if args.verbose > 1 else "INFO"
    run = args.run or spec["run"]
    if not run:
        raise UsageError("no algorithm given: use --run (e.g. --run PPO) or 'run:' in the file")
    env = args.env or spec["env"] or config.get("env")
    if not env:
        raise UsageError("no env given: use --env (e.g. --env CartPole-v1) or 'env:' in the file")
    stop = args.stop if args.stop is not None else spec["stop"]
    if stop is None:
        print(
            f"Note: no stop criterion given; training stops at {json.dumps(DEFAULT_STOP)} "
            "(use --stop to change).",
            file=sys.stderr,
        )
        stop = dict(DEFAULT_STOP)
    elif not stop:
        print("Note: empty stop criteria; training runs until Ctrl-C.", file=sys.stderr)
    validate_stop(stop)
    return TrainSpec(
        name=args.experiment_name or name,
        run=str(run),
        env=env,
        config=config,
        stop=stop,
        checkpoint_freq=_first_given(args.checkpoint_freq, spec["checkpoint_freq"]),
        checkpoint_at_end=_first_given(args.checkpoint_at_end, spec["checkpoint_at_end"]),
        local_dir=args.local_dir or spec["local_dir"],
        keep_checkpoints_num=_first_given(args.keep_checkpoints_num, spec["keep_checkpoints_num"]),
        checkpoint_score_attr=args.checkpoint_score_attr or spec["checkpoint_score_attr"],
        restore=args.restore or spec["restore"],
        num_samples=args.num_samples or spec["num_samples"],
    )


def _first_given(flag: Any, from_file: Any) -> Any:
    return from_file if flag is None else flag


def validate_stop(stop: Mapping) -> None:
    """Checks stop criteria before training: known result keys, numeric thresholds.

    Raises:
        UsageError: naming the bad key (with close matches) or value.
    """
    for key, threshold in stop.items():
        if isinstance(threshold, bool) or not isinstance(threshold, int | float):
            raise UsageError(f"stop value for {key!r} must be a number, got {threshold!r}")
        head, _, rest = str(key).partition("/")
        if head in RESULT_SECTIONS and rest:
            continue
        if head in TRAINER_RESULT_KEYS and not rest:
            continue
        candidates = sorted(TRAINER_RESULT_KEYS) + [f"{s}/..." for s in sorted(RESULT_SECTIONS)]
        close = difflib.get_close_matches(str(key), candidates, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UsageError(f"unknown stop key {key!r}{hint} (result keys: {', '.join(candidates)})")


def check_stop_reachable(stop: Mapping, trainer_config: Mapping) -> None:
    """An ``evaluation/...`` criterion never triggers if the trainer never evaluates."""
    evaluation_keys = [k for k in stop if str(k).startswith(f"{EVALUATION}/")]
    if evaluation_keys and not trainer_config.get("evaluation_interval"):
        raise UsageError(
            f"stop keys {evaluation_keys} need evaluation results, but this config never "
            "evaluates: add e.g. --config '{\"evaluation_interval\": 1}'"
        )
