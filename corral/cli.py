"""The ``corral`` command: ``corral train`` and ``corral evaluate``, as RLlib 1.x's CLI.

``corral train --run PPO --env CartPole-v1 --stop '{"training_iteration": 20}'``
and ``corral train -f tuned_examples/ppo/cartpole-ppo.yaml`` behave like
``rllib train``; ``corral evaluate CHECKPOINT`` like ``rllib evaluate`` (alias
``rollout``). Only the standard library is imported at module level so that
``corral --help`` answers at once; torch and the trainers load inside the
subcommands.

User mistakes (bad JSON, unknown algorithm, env or stop key, a path that is
not a checkpoint) end with an argparse-style message and exit code 2, never a
traceback: the traceback would point into corral when the fix is in the
command line.
"""

from __future__ import annotations

import argparse
import copy
import difflib
import json
import logging
import math
import os
import shutil
import sys
import tempfile
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import IO, Any, TypeGuard

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

# Used when neither the command line nor an experiment file gives a stop
# criterion: RLlib trained forever, which is rarely what a first try wants.
DEFAULT_STOP = {"training_iteration": 100}

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
)

# Top-level keys every trainer result has (``Trainer._compile_results`` and
# ``Trainable.train``); stop criteria are checked against them before training
# so that a typo fails in a second instead of after the first iteration.
RESULT_KEYS = frozenset(
    {
        "episode_reward_mean",
        "episode_reward_min",
        "episode_reward_max",
        "episode_len_mean",
        "episodes_this_iter",
        "episodes_total",
        "timesteps_this_iter",
        "timesteps_total",
        "agent_timesteps_total",
        "training_iteration",
        "time_this_iter_s",
        "time_total_s",
        "time_since_restore",
        "timesteps_since_restore",
        "iterations_since_restore",
        "num_healthy_workers",
        "num_env_steps_sampled",
        "num_env_steps_trained",
        "num_agent_steps_sampled",
        "num_agent_steps_trained",
    }
)
# Nested sections of a result; keys below them ("evaluation/episode_reward_mean")
# depend on the run (evaluation settings, custom metrics, policy ids).
RESULT_SECTIONS = frozenset(
    {
        "evaluation",
        "info",
        "custom_metrics",
        "policy_reward_mean",
        "policy_reward_min",
        "policy_reward_max",
        "sampler_perf",
        "hist_stats",
    }
)

# Config keys whose value is code; params.json holds only their qualified name.
_CODE_VALUED_PATHS = (
    ("callbacks",),
    ("custom_eval_function",),
    ("env_task_fn",),
    ("multiagent", "policy_mapping_fn"),
    ("multiagent", "observation_fn"),
    ("multiagent", "policies_to_train"),
)


# `corral evaluate` steps the env itself: no remote workers, no evaluation of the
# trainer's own, and an env on the driver.
LOCAL_ROLLOUT = {
    "num_workers": 0,
    "evaluation_interval": None,
    "evaluation_num_workers": 0,
    "create_env_on_driver": True,
}


class UsageError(Exception):
    """A mistake on the command line or in its files; reported without a traceback."""


class ExperimentFileError(UsageError):
    """An ``-f`` experiment file that cannot be read or does not have RLlib's layout."""


# --------------------------------------------------------------------------------------
# Entry point and parser
# --------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    """Runs the ``corral`` command with ``argv`` (default: ``sys.argv[1:]``); returns the exit code.

    Returns instead of exiting (argparse's own exits included) so that tests
    and other Python code can call it.
    """
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as e:  # --help, or argparse reporting a usage error
        return e.code if isinstance(e.code, int) else EXIT_USAGE
    try:
        return args.handler(args)
    except UsageError as e:
        args.subparser.print_usage(sys.stderr)
        print(f"{args.subparser.prog}: error: {e}", file=sys.stderr)
        return EXIT_USAGE
    except KeyboardInterrupt:
        print("\nInterrupted.", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:  # e.g. `corral config PPO | head`: the reader has gone
        sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - silences the flush at exit
        return EXIT_OK


def build_parser() -> argparse.ArgumentParser:
    """The ``corral`` parser with its ``train`` and ``evaluate`` subcommands."""
    parser = argparse.ArgumentParser(
        prog="corral",
        description="Train and evaluate RLlib-style agents (PyTorch + Gymnasium, no Ray).",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_train_parser(commands)
    _add_evaluate_parser(commands)
    _add_plot_parser(commands)
    _add_config_parser(commands)
    return parser


def _add_train_parser(commands: Any) -> None:
    train = commands.add_parser(
        "train",
        help="train an algorithm on an env",
        description="Train an algorithm, like RLlib 1.x's `rllib train`.",
        epilog="Example: corral train --run PPO --env CartPole-v1 "
        "--stop '{\"episode_reward_mean\": 475}' --checkpoint-at-end",
    )
    train.add_argument("--run", help="algorithm name, e.g. PPO")
    train.add_argument("--env", help="Gymnasium id, registered env name or dotted class path")
    train.add_argument(
        "--config",
        type=json_object,
        help="trainer config as a JSON object, merged over the file's config",
    )
    train.add_argument(
        "--stop",
        type=json_object,
        help="stop when any result[key] >= value, e.g. '{\"timesteps_total\": 100000}'; "
        f"nested keys joined by '/' (default: {json.dumps(DEFAULT_STOP)})",
    )
    train.add_argument("--checkpoint-freq", type=non_negative_int, help="checkpoint every N iters")
    train.add_argument(
        "--checkpoint-at-end",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="write a checkpoint when training ends (also after Ctrl-C)",
    )
    train.add_argument(
        "--keep-checkpoints-num",
        type=positive_int,
        help="keep only this many checkpoints, the best by --checkpoint-score-attr "
        "(the newest is always kept)",
    )
    train.add_argument(
        "--checkpoint-score-attr",
        help="result key ranking checkpoints (default training_iteration; 'min-KEY': lowest best)",
    )
    train.add_argument("--restore", help="checkpoint to restore before training")
    train.add_argument("--local-dir", help="directory for the trial folders (logs, checkpoints)")
    train.add_argument(
        "-f",
        "--config-file",
        dest="config_file",
        help="RLlib-style experiment YAML (name -> run, env, stop, config, ...)",
    )
    train.add_argument("--seed", type=int, help="sets config['seed']")
    train.add_argument(
        "-v",
        "--verbose",
        action="count",
        default=0,
        help="-v: log_level INFO, -vv: DEBUG (and tracebacks for errors)",
    )
    train.add_argument("--no-progress", action="store_true", help="no per-iteration progress")
    train.set_defaults(handler=run_train, subparser=train)


def _add_evaluate_parser(commands: Any) -> None:
    evaluate = commands.add_parser(
        "evaluate",
        aliases=["rollout"],
        help="roll out a checkpoint's policy",
        description="Run episodes with a trained checkpoint, like RLlib 1.x's `rllib evaluate`.",
    )
    evaluate.add_argument("checkpoint", help="checkpoint directory (or a file inside it)")
    evaluate.add_argument("--run", help="algorithm (default: the one that wrote the checkpoint)")
    evaluate.add_argument("--env", help="env (default: the one it was trained on)")
    evaluate.add_argument("--episodes", type=positive_int, default=10, help="default: 10")
    evaluate.add_argument(
        "--steps", type=positive_int, help="stop after this many env steps in all (default: none)"
    )
    evaluate.add_argument(
        "--policy",
        help="multi-agent checkpoints: the policy every agent acts with (default: the policy "
        "named like the agent, or the only one)",
    )
    display = evaluate.add_mutually_exclusive_group()
    display.add_argument("--render", action="store_true", help="show the env (render_mode human)")
    display.add_argument("--video-dir", help="record each episode as mp4 here (needs moviepy)")
    evaluate.add_argument("--config", type=json_object, help="config overrides as a JSON object")
    evaluate.add_argument("--seed", type=int, help="seed of the first env reset and the trainer")
    evaluate.set_defaults(handler=run_evaluate, subparser=evaluate)


def _add_plot_parser(commands: Any) -> None:
    plot = commands.add_parser(
        "plot",
        help="draw learning curves of trials as a PNG",
        description="Learning curves from trials' results (result.json or progress.csv): the "
        "mean training return with its min/max band and the evaluation return, or any key.",
        epilog="Example: corral plot ~/corral_results/PPO_CartPole-v1_* -o cartpole.png",
    )
    plot.add_argument("logdirs", nargs="+", metavar="LOGDIR", help="trial logdirs to overlay")
    plot.add_argument("-o", "--out", default="learning_curve.png", help="PNG file to write")
    plot.add_argument(
        "--x", choices=["timesteps", "time", "iterations"], default="timesteps", help="x axis"
    )
    plot.add_argument("--y", help="result key to plot (nested keys joined by '/')")
    plot.add_argument("--title", help="figure title")
    plot.set_defaults(handler=run_plot, subparser=plot)


def _add_config_parser(commands: Any) -> None:
    config = commands.add_parser(
        "config",
        help="show an algorithm's config keys, defaults and documentation",
        description="Print an algorithm's default config, each key with its documentation, "
        "or one key (nested keys as model.fcnet_hiddens).",
        epilog="Example: corral config PPO lr",
    )
    config.add_argument("algorithm", help="e.g. PPO, DQN, SAC")
    config.add_argument("key", nargs="?", help="one key, e.g. lr or model.fcnet_hiddens")
    config.set_defaults(handler=run_config, subparser=config)


def run_config(args: argparse.Namespace) -> int:
    """``corral config ALGO [KEY]``: the default config with each key's documentation."""
    import textwrap

    from corral.agents.config_docs import config_docs

    trainer_class = get_trainer_class(args.algorithm)
    defaults = trainer_class.get_default_config()
    docs = config_docs(trainer_class)
    entries = _config_entries(defaults)
    if args.key:
        key = args.key.replace("/", ".")
        if key not in entries:
            close = difflib.get_close_matches(key, list(entries), n=3)
            hint = f"; did you mean {', '.join(close)}?" if close else ""
            raise UsageError(f"{args.algorithm} has no config key {args.key!r}{hint}")
        entries = {key: entries[key]}
    for key, value in entries.items():
        print(f"{key} = {_config_value_text(value)}")
        doc = docs.get(key) or "(undocumented)"
        print(textwrap.fill(doc, width=88, initial_indent="    ", subsequent_indent="    "))
    return EXIT_OK


def _config_entries(defaults: Mapping) -> dict[str, Any]:
    """Every key, with the keys of ``model`` spelled out as ``model.<key>``."""
    out: dict[str, Any] = {}
    for key, value in defaults.items():
        if key == "model" and isinstance(value, Mapping):
            out.update({f"model.{k}": v for k, v in value.items()})
        else:
            out[key] = value
    return out


def _config_value_text(value: Any) -> str:
    if isinstance(value, type) or callable(value):
        return f"{getattr(value, '__module__', '?')}.{getattr(value, '__qualname__', value)}"
    try:
        return json.dumps(value)
    except (TypeError, ValueError):
        return repr(value)


def run_plot(args: argparse.Namespace) -> int:
    """``corral plot``: writes the learning curves of ``args.logdirs`` to ``args.out``."""
    from corral.tune.plot import PlotError, plot_runs

    try:
        out = plot_runs(args.logdirs, args.out, x=args.x, y=args.y, title=args.title)
    except PlotError as e:
        raise UsageError(str(e)) from None
    print(f"Wrote {out}")
    return EXIT_OK


def json_object(text: str) -> dict:
    """argparse type: a JSON object (dict); anything else is a usage error."""
    try:
        value = json.loads(text)
    except json.JSONDecodeError as e:
        raise argparse.ArgumentTypeError(f"invalid JSON ({e}): {text!r}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(
            f"expected a JSON object such as '{{\"lr\": 0.001}}', got {text!r}"
        )
    return value


def positive_int(text: str) -> int:
    """argparse type: an int >= 1."""
    value = _int_arg(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected an integer >= 1, got {text!r}")
    return value


def non_negative_int(text: str) -> int:
    """argparse type: an int >= 0."""
    value = _int_arg(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected an integer >= 0, got {text!r}")
    return value


def _int_arg(text: str) -> int:
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None


# --------------------------------------------------------------------------------------
# Experiment files and the train spec
# --------------------------------------------------------------------------------------


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


def load_experiments(path: str) -> dict[str, dict]:
    """Reads an RLlib tuned-example YAML: ``{experiment name: spec}``.

    Each spec keeps RLlib's keys (``run``, ``env``, ``stop``, ``config``,
    ``checkpoint_freq``, ``checkpoint_at_end``, ``local_dir``); missing ones
    are filled with their defaults (``stop`` stays ``None`` so the caller can
    tell "not given" from "given as empty").

    :raises ExperimentFileError: the file is missing, not YAML, or not laid
        out as experiments; the message names the file and the bad entry.
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
    return {str(name): _experiment_spec(path, str(name), spec) for name, spec in data.items()}


def _experiment_spec(path: str, name: str, spec: Any) -> dict:
    where = f"{path}: experiment {name!r}"
    if not isinstance(spec, dict):
        raise ExperimentFileError(f"{where} must be a mapping, got {spec!r}")
    unknown = sorted(set(spec) - set(EXPERIMENT_KEYS))
    if unknown:
        raise ExperimentFileError(
            f"{where} has unsupported keys {unknown}; supported: {list(EXPERIMENT_KEYS)}"
        )
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
    }


def deep_merge(base: Mapping, override: Mapping) -> dict:
    """A new dict: ``override`` merged into ``base``, nested dicts merged key by key."""
    merged = dict(base)
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = deep_merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def train_specs(args: argparse.Namespace) -> list[TrainSpec]:
    """The experiments to run: the ``-f`` file's (or one from the flags), flags overriding."""
    if args.config_file:
        experiments = load_experiments(args.config_file)
    else:
        experiments = {"default": _experiment_spec("<command line>", "default", {})}
    return [_apply_flags(name, spec, args) for name, spec in experiments.items()]


def _apply_flags(name: str, spec: dict, args: argparse.Namespace) -> TrainSpec:
    config = deep_merge(spec["config"], args.config or {})
    if args.seed is not None:
        config["seed"] = args.seed
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
        name=name,
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
    )


def _first_given(flag: Any, from_file: Any) -> Any:
    return from_file if flag is None else flag


# --------------------------------------------------------------------------------------
# Stop criteria
# --------------------------------------------------------------------------------------


def validate_stop(stop: Mapping) -> None:
    """Checks stop criteria before training: known result keys, numeric thresholds.

    :raises UsageError: naming the bad key (with close matches) or value.
    """
    for key, threshold in stop.items():
        if isinstance(threshold, bool) or not isinstance(threshold, int | float):
            raise UsageError(f"stop value for {key!r} must be a number, got {threshold!r}")
        head, _, rest = str(key).partition("/")
        if head in RESULT_SECTIONS and rest:
            continue
        if head in RESULT_KEYS and not rest:
            continue
        candidates = sorted(RESULT_KEYS) + [f"{s}/..." for s in sorted(RESULT_SECTIONS)]
        close = difflib.get_close_matches(str(key), candidates, n=3)
        hint = f"; did you mean {', '.join(close)}?" if close else ""
        raise UsageError(f"unknown stop key {key!r}{hint} (result keys: {', '.join(candidates)})")


def lookup_result(result: Mapping, key: str) -> Any:
    """``result[key]`` where ``key`` may be a '/'-joined path into nested dicts; None if absent."""
    value: Any = result
    for part in key.split("/"):
        if not isinstance(value, Mapping) or part not in value:
            return None
        value = value[part]
    return value


def _is_number(value: Any) -> TypeGuard[float]:
    """A real number that is not NaN: what a stop criterion or a "best" can compare."""
    return isinstance(value, int | float) and not isinstance(value, bool) and not math.isnan(value)


def should_stop(stop: Mapping[str, float], result: Mapping) -> bool:
    """Tune's rule: stop once any ``result[key] >= threshold`` (NaN never meets it), or done."""
    return bool(result.get("done")) or met_criterion(stop, result) is not None


def met_criterion(stop: Mapping[str, float], result: Mapping) -> tuple[str, float] | None:
    """The first stop criterion ``result`` meets, as (key, value); None if none."""
    for key, threshold in stop.items():
        value = lookup_result(result, key)
        if _is_number(value) and value >= threshold:
            return key, value
    return None


def _check_stop_reachable(stop: Mapping, trainer_config: Mapping) -> None:
    """An ``evaluation/...`` criterion never triggers if the trainer never evaluates."""
    evaluation_keys = [k for k in stop if str(k).startswith("evaluation/")]
    if evaluation_keys and not trainer_config.get("evaluation_interval"):
        raise UsageError(
            f"stop keys {evaluation_keys} need evaluation results, but this config never "
            "evaluates: add e.g. --config '{\"evaluation_interval\": 1}'"
        )


# --------------------------------------------------------------------------------------
# Progress display
# --------------------------------------------------------------------------------------


class ProgressDisplay:
    """Shows one line per training iteration.

    On a terminal the line is rewritten in place (``\\r``) so that a long run
    does not scroll; in a log file or pipe every iteration gets its own line,
    which is what a later reader of that log needs.
    """

    def __init__(
        self, stream: IO[str], enabled: bool = True, stop: Mapping[str, float] | None = None
    ) -> None:
        self.stream = stream
        self.enabled = enabled
        self.live = enabled and _is_tty(stream)
        self.stop = dict(stop or {})
        self._pending = False
        self._last_evaluation: float | None = None

    def update(self, result: Mapping) -> None:
        """Shows the figures of one iteration's result."""
        if not self.enabled:
            return
        evaluation = lookup_result(result, "evaluation/episode_reward_mean")
        if _is_number(evaluation):
            self._last_evaluation = evaluation
        line = format_progress(result, self._last_evaluation, time_left(self.stop, result))
        if self.live:
            width = shutil.get_terminal_size().columns - 1
            self.stream.write("\r" + line[:width] + "\x1b[K")
            self._pending = True
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def message(self, text: str) -> None:
        """Prints a line of its own (e.g. "checkpoint saved") without breaking the live line."""
        self.end_line()
        self.stream.write(text + "\n")
        self.stream.flush()

    def end_line(self) -> None:
        """Moves past the live line so that what follows starts on a new line."""
        if self._pending:
            self.stream.write("\n")
            self.stream.flush()
            self._pending = False


def _is_tty(stream: IO[str]) -> bool:
    isatty = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


def format_progress(
    result: Mapping, last_evaluation: float | None = None, left: float | None = None
) -> str:
    """One progress line, e.g.
    ``iter 3 | steps 768 | reward 21.4 [9, 60] | eval 80.0 | 912 steps/s | 0:00:02 | 0:00:30 left``.

    ``eval`` is this iteration's evaluation return, else ``last_evaluation`` (the
    latest one); ``left`` is the estimated time to the nearest stop criterion.
    """
    parts = [
        f"iter {result.get('training_iteration', 0)}",
        f"steps {result.get('timesteps_total') or 0:,}",
        "reward {} [{}, {}]".format(
            _fmt(result.get("episode_reward_mean")),
            _fmt(result.get("episode_reward_min")),
            _fmt(result.get("episode_reward_max")),
        ),
    ]
    evaluation = lookup_result(result, "evaluation/episode_reward_mean")
    if not _is_number(evaluation):
        evaluation = last_evaluation
    if evaluation is not None:
        parts.append(f"eval {_fmt(evaluation)}")
    parts.append(f"{_steps_per_second(result):,.0f} steps/s")
    parts.append(format_duration(result.get("time_total_s") or 0.0))
    if left is not None:
        parts.append(f"{format_duration(left)} left")
    return " | ".join(parts)


# Stop keys whose progress grows steadily with time, so the time to reach them can be estimated.
_PROGRESS_KEYS = ("timesteps_total", "training_iteration", "time_total_s")


def time_left(stop: Mapping[str, float], result: Mapping) -> float | None:
    """Seconds until the first of the steadily growing stop criteria is reached (None: none).

    Return criteria (e.g. ``evaluation/episode_reward_mean``) may end the run
    earlier; no one can say when.
    """
    elapsed = result.get("time_total_s") or 0.0
    estimates = []
    for key in _PROGRESS_KEYS:
        threshold, value = stop.get(key), result.get(key)
        if _is_number(threshold) and _is_number(value) and value > 0 and elapsed > 0:
            estimates.append(max(0.0, (threshold - value) * elapsed / value))
    return min(estimates) if estimates else None


def _steps_per_second(result: Mapping) -> float:
    seconds = result.get("time_this_iter_s") or 0.0
    return (result.get("timesteps_this_iter") or 0) / seconds if seconds > 0 else 0.0


def _fmt(value: Any) -> str:
    return f"{value:.1f}" if _is_number(value) else "n/a"


def format_duration(seconds: float) -> str:
    """``h:mm:ss``, the way elapsed training time is usually read."""
    seconds = int(seconds)
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


# --------------------------------------------------------------------------------------
# corral train
# --------------------------------------------------------------------------------------


@dataclass
class TrainOutcome:
    """What a training run reached; the summary is printed from it."""

    logdir: str
    last_result: dict = field(default_factory=dict)
    best_reward: float | None = None
    best_reward_iteration: int | None = None
    best_eval_reward: float | None = None
    last_checkpoint: str | None = None
    interrupted: bool = False
    env: str | None = None
    stop: dict = field(default_factory=dict)
    config: dict = field(default_factory=dict)
    # The stop criterion that ended the run, as (key, value).
    met: tuple[str, float] | None = None

    def record(self, result: Mapping) -> None:
        """Keeps the latest result and the best mean rewards seen so far."""
        self.last_result = dict(result)
        reward = result.get("episode_reward_mean")
        if _is_number(reward) and (self.best_reward is None or reward > self.best_reward):
            self.best_reward = reward
            self.best_reward_iteration = result.get("training_iteration")
        evaluation = lookup_result(result, "evaluation/episode_reward_mean")
        if _is_number(evaluation) and (
            self.best_eval_reward is None or evaluation > self.best_eval_reward
        ):
            self.best_eval_reward = evaluation


def run_train(args: argparse.Namespace) -> int:
    """``corral train``: trains each experiment in turn until its stop criteria are met."""
    _configure_logging(args.verbose)
    specs = train_specs(args)
    display = ProgressDisplay(sys.stderr, enabled=not args.no_progress)
    for spec in specs:
        if len(specs) > 1:
            display.message(f"== Experiment {spec.name} ==")
        outcome = train_experiment(spec, display, verbose=args.verbose)
        print_summary(outcome, sys.stdout)
        if outcome.interrupted:
            return EXIT_INTERRUPTED
    return EXIT_OK


def _configure_logging(verbose: int) -> None:
    level = logging.DEBUG if verbose > 1 else logging.INFO if verbose else logging.WARNING
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")


def train_experiment(spec: TrainSpec, display: ProgressDisplay, verbose: int = 0) -> TrainOutcome:
    """Builds the trainer, trains it until ``spec.stop`` (or Ctrl-C), always stops it."""
    trainer_class = get_trainer_class(spec.run)
    logger_creator = _local_dir_logger_creator(trainer_class, spec) if spec.local_dir else None
    trainer = build_trainer(trainer_class, spec.env, spec.config, logger_creator, verbose)
    try:
        _check_stop_reachable(spec.stop, trainer.config)
        if spec.restore:
            _restore(trainer, find_checkpoint_dir(spec.restore))
            display.message(f"Restored {spec.restore} (iteration {trainer.iteration})")
        display.message(f"Training {spec.run} on {spec.env}; results in {trainer.logdir}")
        return _training_loop(trainer, spec, display)
    finally:
        trainer.stop()


def _training_loop(trainer: Any, spec: TrainSpec, display: ProgressDisplay) -> TrainOutcome:
    """Trains with `corral.tune`'s trial loop (the one `tune.run` uses), showing progress."""
    from corral.tune.tune import CheckpointKeeper, Trial, train_trial

    outcome = TrainOutcome(
        logdir=trainer.logdir, env=spec.env, stop=dict(spec.stop), config=trainer.config
    )
    display.stop = dict(spec.stop)
    trial = Trial(trainable_name=spec.run, config=trainer.config, trial_id=spec.name)
    trial.logdir = trainer.logdir

    def on_result(result: dict) -> None:
        outcome.record(result)
        display.update(result)

    def on_checkpoint(path: str) -> None:
        outcome.last_checkpoint = path
        display.message(f"Checkpoint saved: {path}")

    def stop(trial_id: str, result: dict) -> bool:
        if should_stop(spec.stop, result):
            outcome.met = met_criterion(spec.stop, result)
            return True
        return False

    try:
        keeper = CheckpointKeeper(spec.keep_checkpoints_num, spec.checkpoint_score_attr)
    except ValueError as e:
        raise UsageError(str(e)) from None
    try:
        train_trial(
            trial,
            trainer,
            stop,
            checkpoint_freq=spec.checkpoint_freq,
            checkpoint_at_end=spec.checkpoint_at_end,
            keeper=keeper,
            on_result=on_result,
            on_checkpoint=on_checkpoint,
        )
    except KeyboardInterrupt:
        outcome.interrupted = True
        display.message("Interrupted: stopping training.")
    display.end_line()
    return outcome


def _local_dir_logger_creator(trainer_class: Any, spec: TrainSpec) -> Callable[[dict], Any]:
    """A logger creator that puts the trial folder under ``--local-dir``, named as by default."""
    from corral.tune.logger import UnifiedLogger

    local_dir = os.path.abspath(os.path.expanduser(spec.local_dir or "."))
    trainer_name = getattr(trainer_class, "_name", trainer_class.__name__)
    env_name = str(spec.env).replace("/", "_")

    def create(config: dict) -> Any:
        os.makedirs(local_dir, exist_ok=True)
        timestr = datetime.today().strftime("%Y-%m-%d_%H-%M-%S")
        prefix = f"{trainer_name}_{env_name}_{timestr}_"
        return UnifiedLogger(config, tempfile.mkdtemp(prefix=prefix, dir=local_dir))

    return create


def print_summary(outcome: TrainOutcome, stream: IO[str]) -> None:
    """The final figures, the logdir and the last checkpoint: what to look at next."""
    result = outcome.last_result
    verb = "interrupted" if outcome.interrupted else "finished"
    lines = [
        f"Training {verb} after {result.get('training_iteration', 0)} iterations "
        f"({result.get('timesteps_total') or 0:,} timesteps, "
        f"{format_duration(result.get('time_total_s') or 0.0)}).",
    ]
    if outcome.best_reward is not None:
        lines.append(
            f"  best episode_reward_mean: {outcome.best_reward:.2f} "
            f"(iteration {outcome.best_reward_iteration})"
        )
    if outcome.best_eval_reward is not None:
        lines.append(f"  best evaluation/episode_reward_mean: {outcome.best_eval_reward:.2f}")
    lines.append(f"  logdir: {outcome.logdir}")
    lines.append(f"  last checkpoint: {outcome.last_checkpoint or 'none'}")
    verdict = solved_line(outcome)
    if verdict:
        lines.append(verdict)
    stream.write("\n".join(lines) + "\n")
    stream.flush()


_RETURN_KEYS = ("evaluation/episode_reward_mean", "episode_reward_mean")


def solved_line(outcome: TrainOutcome) -> str | None:
    """``Solved CartPole-v1: evaluation return 500.0 (10 episodes, greedy) after 12,288 env
    steps, 6.1 s of training`` when a return criterion ended the run; ``Not solved: ...``
    when the stop criteria had one and another criterion (or Ctrl-C) came first."""
    goals = [k for k in _RETURN_KEYS if k in outcome.stop]
    if not goals:
        return None
    result = outcome.last_result
    steps = result.get("timesteps_total") or 0
    seconds = result.get("time_total_s") or 0.0
    if outcome.met is not None and outcome.met[0] in goals:
        key, value = outcome.met
        if key.startswith("evaluation/"):
            episodes = lookup_result(result, "evaluation/episodes_this_iter")
            explore = (outcome.config.get("evaluation_config") or {}).get(
                "explore", outcome.config.get("explore", True)
            )
            detail = ", ".join(
                ([f"{episodes} episodes"] if _is_number(episodes) else [])
                + ([] if explore else ["greedy"])
            )
            what = f"evaluation return {value:.1f}" + (f" ({detail})" if detail else "")
        else:
            what = f"training return {value:.1f} (mean of the last episodes)"
        goal = outcome.stop[key]
        threshold = _reward_threshold(outcome.env)
        verb = (
            f"Reached {key} >= {goal:g} on {outcome.env} (its reward threshold is {threshold:g})"
            if threshold is not None and goal < threshold
            else f"Solved {outcome.env}"
        )
        return f"{verb}: {what} after {steps:,} env steps, {seconds:.1f} s of training"
    key = goals[0]
    best = outcome.best_eval_reward if key.startswith("evaluation/") else outcome.best_reward
    best_text = "n/a" if best is None else f"{best:.1f}"
    return (
        f"Not solved: best {key} {best_text} < {outcome.stop[key]} after {steps:,} env steps, "
        f"{seconds:.1f} s of training"
    )


def _reward_threshold(env: Any) -> float | None:
    """The return at which Gymnasium calls the env solved (None: unknown or none)."""
    if not isinstance(env, str):
        return None
    import gymnasium

    spec = gymnasium.registry.get(env)
    threshold = getattr(spec, "reward_threshold", None)
    return float(threshold) if _is_number(threshold) else None


# --------------------------------------------------------------------------------------
# Building trainers (shared by train and evaluate)
# --------------------------------------------------------------------------------------


def get_trainer_class(name: str) -> Any:
    """The trainer class of ``name``; unknown names are a usage error listing the known ones."""
    from corral.agents.registry import get_trainer_class as lookup

    try:
        return lookup(name)
    except (ValueError, NotImplementedError) as e:
        raise UsageError(str(e)) from None


def build_trainer(
    trainer_class: Any,
    env: Any,
    config: dict,
    logger_creator: Callable[[dict], Any] | None = None,
    verbose: int = 0,
) -> Any:
    """Constructs the trainer; config and env mistakes become a ``UsageError``.

    With ``-vv`` the traceback is printed as well, for when the mistake turns
    out to be corral's.
    """
    return _constructed(
        trainer_class,
        lambda: trainer_class(config=config, env=env, logger_creator=logger_creator),
        verbose,
    )


def _constructed(trainer_class: Any, construct: Callable[[], Any], verbose: int = 0) -> Any:
    """``construct()``, its config and env mistakes reported as a ``UsageError``.

    A ``CheckpointError`` passes through unchanged (its message names the file).
    """
    from gymnasium.error import Error as GymnasiumError

    from corral.utils.error import CheckpointError, EnvError, UnsupportedSpaceException

    user_errors = (
        ValueError,
        TypeError,
        KeyError,
        NotImplementedError,
        EnvError,
        UnsupportedSpaceException,
        GymnasiumError,
    )
    try:
        return construct()
    except CheckpointError:
        raise
    except user_errors as e:
        if verbose > 1:
            traceback.print_exc()
        raise UsageError(f"cannot build the {trainer_class.__name__}: {_describe(e)}") from None


def _describe(error: BaseException) -> str:
    text = str(error)
    if isinstance(error, KeyError) and error.args:
        text = f"missing key {error.args[0]!r}"
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


# --------------------------------------------------------------------------------------
# corral evaluate
# --------------------------------------------------------------------------------------


def run_evaluate(args: argparse.Namespace) -> int:
    """``corral evaluate``: restores a checkpoint and prints each episode's reward and the mean.

    The trainer is rebuilt from the config the checkpoint stored
    (``Trainer.from_checkpoint``), or, for checkpoints older than that, from the
    trial's ``params.json``. Nothing either file names is imported: an env that
    is not registered in this process or a plain Gymnasium id must be given with
    ``--env``, and config values that were code fall back to their defaults.
    """
    from corral.tune.logger import UnifiedLogger
    from corral.utils import checkpoint_config
    from corral.utils.checkpoints import read_saved_config
    from corral.utils.error import CheckpointError

    if args.video_dir:
        _check_video_support()
    checkpoint_dir = find_checkpoint_dir(args.checkpoint)
    try:
        name, saved = read_saved_config(checkpoint_dir)
        source = f"{checkpoint_dir}/trainer_state.json"
    except CheckpointError:  # written before checkpoints stored their config
        name, saved, source = _trainer_name(checkpoint_dir), None, ""
    trainer_class = get_trainer_class(args.run or name)
    if saved is None:
        params = read_params(checkpoint_dir)
        source = "the trial's params.json"
        saved_env = params.get("env")
        if saved_env is not None and not checkpoint_config.env_is_known(saved_env):
            saved_env = checkpoint_config.Unresolved(
                "env", checkpoint_config.env_refusal(saved_env, source)
            )
    else:
        saved_env = saved.get("env")
    env = args.env or saved_env
    if isinstance(env, checkpoint_config.Unresolved):
        raise UsageError(f"{env.reason} with --env")
    if not env:
        raise UsageError(f"no env is recorded for {checkpoint_dir}: give --env")
    with tempfile.TemporaryDirectory(prefix="corral-evaluate-") as logdir:
        # The trainer is only a policy holder here: log nowhere that outlives this command.
        def logger_creator(cfg: dict) -> Any:
            return UnifiedLogger(cfg, logdir, loggers=[])

        if saved is None:
            config = evaluation_config(params, trainer_class, args.config or {}, args.seed)
            trainer = build_trainer(trainer_class, env, config, logger_creator)
            config_env = config.get("env_config") or {}
            try:
                _restore(trainer, checkpoint_dir)
            except BaseException:
                trainer.stop()
                raise
        else:
            overrides = evaluation_overrides(
                saved, trainer_class, args.config or {}, args.seed, args.policy
            )
            overrides["env"] = env
            trainer = _from_checkpoint(trainer_class, checkpoint_dir, overrides, logger_creator)
            config_env = trainer.config.get("env_config") or {}
        try:
            rewards = _evaluate_episodes(trainer, env, config_env, args)
        finally:
            trainer.stop()
    mean = sum(rewards) / len(rewards)
    print(f"Mean reward over {len(rewards)} episodes: {mean:.2f}")
    return EXIT_OK


def evaluation_overrides(
    saved: Mapping,
    trainer_class: Any,
    overrides: Mapping,
    seed: int | None,
    policy: str | None = None,
) -> dict:
    """``config_overrides`` that turn a checkpoint's saved config into one for local rollouts.

    Values the checkpoint could not give back (code) return to the algorithm's
    defaults; remote workers and the trainer's own evaluation are switched off
    (this command steps the env itself); the user's ``--config`` comes last.
    """
    from corral.utils import checkpoint_config

    defaults = trainer_class.get_default_config()
    out: dict = {}
    for missing in checkpoint_config.find_unresolved(saved):
        path = missing.key
        if path == "env" or path.startswith("multiagent.policies"):
            continue  # the env is passed separately; policies: see _single_agent_policies
        *parents, leaf = path.split(".")
        node = out
        for parent in parents:
            node = node.setdefault(parent, {})
        # evaluation_config overrides the main config: its lost values fall back to
        # the main config's defaults.
        default: Any = defaults
        for key in [*parents, leaf][1 if parents[:1] == ["evaluation_config"] else 0 :]:
            default = default.get(key) if isinstance(default, Mapping) else None
        node[leaf] = default
    policies = _saved_policies(saved.get("multiagent") or {})
    if policies is not None:
        out.setdefault("multiagent", {})["policies"] = policies
        if set(policies) != {"default_policy"}:
            out["multiagent"]["policy_mapping_fn"] = evaluation_mapping(list(policies), policy)
    out.update(LOCAL_ROLLOUT)
    if seed is not None:
        out["seed"] = seed
    return deep_merge(out, overrides)


def _saved_policies(multiagent: Mapping) -> dict | None:
    """The saved policy specs, each class dropped where the checkpoint could not name it
    (the trainer's default policy class then stands in)."""
    from corral.utils import checkpoint_config

    policies = multiagent.get("policies")
    if not isinstance(policies, Mapping) or not policies:
        return None
    out = {}
    for policy_id, spec in policies.items():
        spec = list(spec) if isinstance(spec, list | tuple) else [None, None, None, {}]
        if checkpoint_config.find_unresolved(spec[:1]):
            spec[0] = None
        if checkpoint_config.find_unresolved(spec):
            raise UsageError(f"the saved spec of policy {policy_id!r} cannot be rebuilt: {spec}")
        out[policy_id] = spec
    return out


def evaluation_mapping(policy_ids: list[str], chosen: str | None) -> Callable[..., str]:
    """The ``policy_mapping_fn`` of a multi-agent rollout (the trained one was code, which
    checkpoints do not store): ``chosen`` for every agent, else the policy named like the
    agent, else the only policy."""
    if chosen is not None and chosen not in policy_ids:
        raise UsageError(f"--policy {chosen!r}: the checkpoint's policies are {policy_ids}")

    def mapping(agent_id: Any, *args: Any, **kwargs: Any) -> str:
        if chosen is not None:
            return chosen
        if str(agent_id) in policy_ids:
            return str(agent_id)
        if len(policy_ids) == 1:
            return policy_ids[0]
        raise UsageError(
            f"agent {agent_id!r} has no policy of its name among {policy_ids}: "
            "pick one with --policy"
        )

    return mapping


def _from_checkpoint(
    trainer_class: Any, checkpoint_dir: str, overrides: dict, logger_creator: Callable
) -> Any:
    """``trainer_class.from_checkpoint``, its mistakes reported as one-line usage errors."""
    from corral.utils.error import CheckpointError

    try:
        return _constructed(
            trainer_class,
            lambda: trainer_class.from_checkpoint(
                checkpoint_dir, overrides, logger_creator=logger_creator
            ),
        )
    except CheckpointError as e:
        raise UsageError(str(e)) from None


def find_checkpoint_dir(path: str) -> str:
    """The checkpoint directory holding ``trainer_state.json``: ``path`` or an ancestor.

    Ancestors count because RLlib users pass files inside the checkpoint
    (``.../checkpoint_000010/checkpoint-10``).
    """
    from corral.utils.checkpoints import TRAINER_STATE

    path = os.path.abspath(os.path.expanduser(path))
    if not os.path.exists(path):
        raise UsageError(f"checkpoint {path} does not exist")
    candidate = path if os.path.isdir(path) else os.path.dirname(path)
    while not os.path.isfile(os.path.join(candidate, TRAINER_STATE)):
        parent = os.path.dirname(candidate)
        if parent == candidate:
            raise UsageError(
                f"{path} is not a checkpoint: no {TRAINER_STATE} in it or above it "
                "(expected a checkpoint_<iteration> folder written by `corral train`)"
            )
        candidate = parent
    return candidate


def read_params(checkpoint_dir: str) -> dict:
    """The trial's ``params.json`` (in the checkpoint's folder or its parent), or ``{}``."""
    from corral.tune.result import EXPR_PARAM_FILE

    for folder in (checkpoint_dir, os.path.dirname(checkpoint_dir)):
        path = os.path.join(folder, EXPR_PARAM_FILE)
        if os.path.isfile(path):
            return _read_json_object(path, "the trial's config")
    return {}


def _trainer_name(checkpoint_dir: str) -> str:
    from corral.utils.checkpoints import TRAINER_STATE

    state = _read_json_object(os.path.join(checkpoint_dir, TRAINER_STATE), "the trainer state")
    name = state.get("trainer")
    if not isinstance(name, str):
        raise UsageError(f"{checkpoint_dir}/{TRAINER_STATE} names no 'trainer': give --run")
    return name


def _read_json_object(path: str, what: str) -> dict:
    try:
        with open(path) as f:
            value = json.load(f)
    except (OSError, json.JSONDecodeError, UnicodeDecodeError) as e:
        raise UsageError(f"cannot read {path} ({what}): {e}") from None
    if not isinstance(value, dict):
        raise UsageError(f"{path} ({what}) is not a JSON object")
    return value


def evaluation_config(
    params: Mapping, trainer_class: Any, overrides: Mapping, seed: int | None
) -> dict:
    """The trained config, made loadable and set up for a single local rollout.

    ``params.json`` stores classes and functions as qualified-name strings; a
    trainer cannot call those, so such keys fall back to their defaults.
    Remote workers and the trainer's own evaluation are switched off: this
    command steps the env itself.
    """
    config = usable_params(params, trainer_class.get_default_config())
    config = deep_merge(config, overrides)
    config.update(LOCAL_ROLLOUT)
    if seed is not None:
        config["seed"] = seed
    return config


def usable_params(params: Mapping, defaults: Mapping) -> dict:
    """``params`` without the values JSON could not keep (code stored as its name)."""
    from corral.utils.deprecation import DEPRECATED_VALUE

    config = copy.deepcopy({k: v for k, v in params.items() if k != "env"})
    for key, default in defaults.items():
        if callable(default) and isinstance(config.get(key), str):
            del config[key]
        elif type(default) is int and default == DEPRECATED_VALUE and key in config:
            # The trainer already moved a deprecated key's value to its successor;
            # passing the resolved value back would only trigger the warning again.
            del config[key]
    for *parents, key in _CODE_VALUED_PATHS:
        node: Any = config
        for parent in parents:
            node = node.get(parent) if isinstance(node, dict) else None
        if isinstance(node, dict) and isinstance(node.get(key), str):
            del node[key]
    # Only the trainer's own evaluation reads it, and that is switched off.
    config.pop("evaluation_config", None)
    _reset_policy_specs(config)
    return config


def _reset_policy_specs(config: dict) -> None:
    """Single-agent only: the policy's class and spaces come from the trainer and the env.

    A stored spec holds the class as a name and the spaces as their repr;
    neither can be rebuilt, and multi-agent rollouts would also need the
    (lost) ``policy_mapping_fn``.
    """
    multiagent = config.get("multiagent")
    if not isinstance(multiagent, dict) or not isinstance(multiagent.get("policies"), dict):
        return
    policies = multiagent["policies"]
    if set(policies) != {"default_policy"}:
        raise UsageError(
            f"the checkpoint has policies {sorted(policies)}; `corral evaluate` rolls out "
            "single-agent checkpoints (the default_policy) only"
        )
    spec = policies["default_policy"]
    policy_config = spec[3] if isinstance(spec, list) and len(spec) == 4 else None
    multiagent["policies"] = {"default_policy": [None, None, None, policy_config or {}]}


def _restore(trainer: Any, checkpoint_dir: str) -> None:
    from corral.tune.trainable import CheckpointError

    try:
        trainer.restore(checkpoint_dir)
    except CheckpointError as e:
        raise UsageError(str(e)) from None


def _evaluate_episodes(
    trainer: Any, env_spec: Any, env_config: Mapping, args: argparse.Namespace
) -> list[float]:
    from gymnasium.error import DependencyNotInstalled

    env = make_evaluation_env(trainer, env_spec, env_config, args.render, args.video_dir)
    budget = getattr(args, "steps", None)
    try:
        rewards = []
        for episode in range(args.episodes):
            seed = args.seed if episode == 0 else None
            reward, length, finished = run_episode(trainer, env, seed, budget)
            cut = "" if finished else " (cut by --steps)"
            print(f"Episode {episode + 1}: reward {reward:.2f}, length {length}{cut}", flush=True)
            rewards.append(reward)
            if budget is not None:
                budget -= length
                if budget <= 0:
                    break
        return rewards
    except DependencyNotInstalled as e:  # rendering libraries load on the first render
        raise UsageError(f"cannot render {env_spec!r}: {e}") from None
    finally:
        env.close()


def run_episode(
    trainer: Any, env: Any, seed: int | None = None, max_steps: int | None = None
) -> tuple[float, int, bool]:
    """One episode with the trainer's greedy actions, at most ``max_steps`` long.

    Multi-agent envs act through the trainer's ``policy_mapping_fn``; the
    episode's reward is the sum over its agents, as in RLlib's results.

    Returns:
        (total reward, steps, whether the episode ended by itself).
    """
    from corral.env import MultiAgentEnv

    multi_agent = isinstance(env, MultiAgentEnv)
    mapping: Callable[..., Any] = trainer.config["multiagent"]["policy_mapping_fn"]
    obs, _ = env.reset(seed=seed)
    total, steps, done = 0.0, 0, False
    finished: set = set()  # agents whose own episode ended: they get no more actions
    while not done and (max_steps is None or steps < max_steps):
        if multi_agent:
            actions = {
                agent: trainer.compute_single_action(
                    agent_obs, policy_id=mapping(agent, None, None), explore=False
                )
                for agent, agent_obs in obs.items()
                if agent not in finished
            }
            obs, rewards, terminateds, truncateds, _ = env.step(actions)
            total += float(sum(rewards.values()))
            done = bool(terminateds.get("__all__") or truncateds.get("__all__"))
            finished |= {
                a for a in {*terminateds, *truncateds} if _ended(a, terminateds, truncateds)
            }
        else:
            action = trainer.compute_single_action(obs, explore=False)
            obs, reward, terminated, truncated, _ = env.step(action)
            total += float(reward)
            done = terminated or truncated
        steps += 1
    return total, steps, done


def _ended(agent: Any, terminateds: Mapping, truncateds: Mapping) -> bool:
    return agent != "__all__" and bool(terminateds.get(agent) or truncateds.get(agent))


def make_evaluation_env(
    trainer: Any, env_spec: Any, env_config: Mapping, render: bool, video_dir: str | None
) -> Any:
    """A fresh env to roll out in, set up to render or record when asked.

    Gymnasium ids are made with ``gymnasium.make`` so ``render_mode`` can be
    chosen; other envs (registered names, classes) come from the trainer's
    creator and render as they were built to.
    """
    import gymnasium

    from corral.env import EnvContext, MultiAgentEnv

    render_mode = "rgb_array" if video_dir else "human" if render else None
    try:
        if _is_gymnasium_id(env_spec):
            env = gymnasium.make(env_spec, render_mode=render_mode, **dict(env_config))
        else:
            env = trainer.env_creator(EnvContext(dict(env_config)))
    except gymnasium.error.Error as e:
        raise UsageError(f"cannot make env {env_spec!r}: {e}") from None
    if isinstance(env, MultiAgentEnv) and video_dir:
        env.close()
        raise UsageError("--video-dir records single-agent envs only")
    if render_mode and getattr(env, "render_mode", None) != render_mode:
        print(f"Note: env {env_spec!r} does not render in mode {render_mode!r}.", file=sys.stderr)
        if video_dir:
            env.close()
            raise UsageError(f"--video-dir needs an env with render_mode 'rgb_array': {env_spec!r}")
    return _record_video(env, video_dir) if video_dir else env


def _is_gymnasium_id(env_spec: Any) -> bool:
    import gymnasium

    from corral.tune.registry import ENV_CREATOR, _global_registry

    if not isinstance(env_spec, str) or _global_registry.contains(ENV_CREATOR, env_spec):
        return False
    return env_spec in gymnasium.registry or ":" in env_spec


def _check_video_support() -> None:
    """Fails before the trainer is built: recording needs moviepy, an optional dependency."""
    import importlib.util

    if importlib.util.find_spec("moviepy") is None:
        raise UsageError("--video-dir needs moviepy: pip install moviepy")


def _record_video(env: Any, video_dir: str) -> Any:
    import gymnasium

    try:
        return gymnasium.wrappers.RecordVideo(
            env, video_folder=video_dir, episode_trigger=lambda _: True, disable_logger=True
        )
    except gymnasium.error.Error as e:
        env.close()
        raise UsageError(f"cannot record video: {e}") from None


if __name__ == "__main__":
    sys.exit(main())
