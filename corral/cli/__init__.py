"""The ``corral`` command: ``corral train`` and ``corral evaluate``, as RLlib 1.x's CLI.

``corral train --run PPO --env CartPole-v1 --stop '{"training_iteration": 20}'``
and ``corral train -f tuned_examples/ppo/cartpole-ppo.yaml`` behave like
``rllib train``; ``corral evaluate CHECKPOINT`` like ``rllib evaluate`` (alias
``rollout``). Only the standard library is imported at module level so that
``corral --help`` answers at once; torch and the trainers load inside the
subcommands.

The package: ``train`` (on ``corral.tune``'s trial loop, ``progress`` its live display,
``summary`` its last lines, ``experiments`` the ``-f`` files and flags), ``evaluate`` (with
``rollout``), ``plot``, ``config``; ``common`` holds what they share.

User mistakes (bad JSON, unknown algorithm, env or stop key, a path that is
not a checkpoint) end with an argparse-style message and exit code 2, never a
traceback: the traceback would point into corral when the fix is in the
command line.
"""

from __future__ import annotations

import argparse
import os
import sys

from corral.cli.common import (
    EXIT_INTERRUPTED,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    build_trainer,
    find_checkpoint_dir,
    get_trainer_class,
    json_object,
    non_negative_int,
    positive_int,
)
from corral.cli.config import add_config_parser, run_config
from corral.cli.evaluate import (
    LOCAL_ROLLOUT,
    add_evaluate_parser,
    evaluation_config,
    evaluation_mapping,
    evaluation_overrides,
    read_params,
    run_evaluate,
    usable_params,
)
from corral.cli.experiments import (
    DEFAULT_STOP,
    EXPERIMENT_KEYS,
    ExperimentFileError,
    TrainSpec,
    load_experiments,
    train_specs,
    validate_stop,
)
from corral.cli.plot import add_plot_parser, run_plot
from corral.cli.progress import ProgressDisplay, format_duration, format_progress, time_left
from corral.cli.rollout import make_evaluation_env, run_episode
from corral.cli.summary import TrainOutcome, print_summary, solved_line
from corral.cli.train import (
    TrainProgress,
    add_train_parser,
    check_rllib_1_13_flags,
    run_train,
    train_experiment,
)
from corral.tune.stopping import lookup_result, met_criterion, should_stop

__all__ = [
    "DEFAULT_STOP",
    "EXIT_INTERRUPTED",
    "EXIT_OK",
    "EXIT_USAGE",
    "EXPERIMENT_KEYS",
    "LOCAL_ROLLOUT",
    "ExperimentFileError",
    "ProgressDisplay",
    "TrainOutcome",
    "TrainProgress",
    "TrainSpec",
    "UsageError",
    "build_parser",
    "build_trainer",
    "check_rllib_1_13_flags",
    "evaluation_config",
    "evaluation_mapping",
    "evaluation_overrides",
    "find_checkpoint_dir",
    "format_duration",
    "format_progress",
    "get_trainer_class",
    "json_object",
    "load_experiments",
    "lookup_result",
    "main",
    "make_evaluation_env",
    "met_criterion",
    "non_negative_int",
    "positive_int",
    "print_summary",
    "read_params",
    "run_config",
    "run_episode",
    "run_evaluate",
    "run_plot",
    "run_train",
    "should_stop",
    "solved_line",
    "time_left",
    "train_experiment",
    "train_specs",
    "usable_params",
    "validate_stop",
]


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
    """The ``corral`` parser: ``train``, ``evaluate``, ``plot`` and ``config``."""
    parser = argparse.ArgumentParser(
        prog="corral",
        description="Train and evaluate RLlib-style agents (PyTorch + Gymnasium, no Ray).",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    add_train_parser(commands)
    add_evaluate_parser(commands)
    add_plot_parser(commands)
    add_config_parser(commands)
    return parser
