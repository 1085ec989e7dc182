"""RLlib 1.13's ``rllib`` command as a module: ``ray.rllib.scripts`` -> ``corral.scripts``.

:func:`cli` is RLlib 1.13's ``rllib`` entry point: ``train`` (:mod:`corral.train`),
``evaluate`` and its old name ``rollout`` (:mod:`corral.evaluate`), with RLlib 1.13's
flags. A script that registers its envs and models and then calls ``cli()`` runs as
it did on RLlib. corral's own command is ``corral`` (`corral.cli.main`).
"""

from __future__ import annotations

import argparse

from corral import evaluate, train
from corral.utils.deprecation import deprecation_warning

__all__ = ["EXAMPLE_USAGE", "cli"]

EXAMPLE_USAGE = """
Example usage for training:
    python -m corral.scripts train --run DQN --env CartPole-v1

Example usage for evaluate (aka: "rollout"):
    python -m corral.scripts evaluate /trial_dir/checkpoint_000001 --run DQN

corral's own command does both as well: `corral train ...`, `corral evaluate ...`.
"""


def cli() -> None:
    """Parses ``sys.argv`` and runs its subcommand: ``train``, ``evaluate`` or ``rollout``
    (deprecated: ``evaluate``); without one it prints the help."""
    parser = argparse.ArgumentParser(
        description="Train or evaluate an RLlib-style Trainer.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=EXAMPLE_USAGE,
    )
    commands = parser.add_subparsers(
        help="Commands to train or evaluate an RLlib-style agent.", dest="command"
    )
    parsers = {
        "train": train.create_parser(lambda **kwargs: commands.add_parser("train", **kwargs)),
        **{
            name: evaluate.create_parser(
                lambda name=name, **kwargs: commands.add_parser(name, **kwargs)
            )
            for name in ("evaluate", "rollout")
        },
    }
    options = parser.parse_args()
    if options.command == "train":
        status = train.run(options, parsers["train"])
        if status:
            raise SystemExit(status)
    elif options.command in ("evaluate", "rollout"):
        if options.command == "rollout":
            deprecation_warning(old="rllib rollout", new="rllib evaluate", error=False)
        evaluate.run(options, parsers[options.command])
    else:
        parser.print_help()


if __name__ == "__main__":
    cli()
