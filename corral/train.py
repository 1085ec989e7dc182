"""RLlib 1.13's ``rllib train`` script as a module: ``ray.rllib.train`` -> ``corral.train``.

:func:`create_parser` is ``corral train``'s parser (RLlib 1.13's flags among its own) and
:func:`run` is ``corral train`` (`corral.cli.train.run_train`): the experiments of the
flags or of an ``-f`` file train on ``corral.tune``'s trial loop, with its progress
display and summary. User code that builds the parser, adds its flags and calls
``run(args, parser)`` runs as it did on RLlib; mistakes end in ``parser.error``.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any

from corral.cli.common import UsageError
from corral.cli.train import add_train_arguments, run_train

__all__ = ["EXAMPLE_USAGE", "create_parser", "main", "run"]

EXAMPLE_USAGE = """
Training example via the corral command (RLlib's `rllib train`):
    corral train --run DQN --env CartPole-v1

Grid search example via the corral command:
    corral train -f tuned_examples/cartpole-grid-search-example.yaml

Training example via this module:
    python -m corral.train --run PPO --env CartPole-v1 --stop '{"training_iteration": 10}'

Note that -f overrides all other trial-specific command-line options.
"""


def create_parser(parser_creator: Any = None) -> argparse.ArgumentParser:
    """``corral train``'s parser: ``parser_creator(**kwargs)`` builds it (e.g. a
    subparser; default ``argparse.ArgumentParser``) and ``corral train``'s flags go on it."""
    parser_creator = parser_creator or argparse.ArgumentParser
    parser = parser_creator(
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description="Train a reinforcement learning agent.",
        epilog=EXAMPLE_USAGE,
    )
    add_train_arguments(parser)
    return parser


def run(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """Trains the experiments of ``args`` (:func:`create_parser`'s) as ``corral train``
    does; returns its exit status (0: done, 130: interrupted, 1: a trial failed).

    Mistakes in the flags, the files or the config end in ``parser.error`` (exit status 2).
    """
    try:
        return run_train(args)
    except UsageError as e:
        parser.error(str(e))


def main() -> None:
    """``python -m corral.train``: :func:`run` with the command line's flags."""
    parser = create_parser()
    status = run(parser.parse_args(), parser)
    if status:
        sys.exit(status)


if __name__ == "__main__":
    main()
