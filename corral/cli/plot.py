"""``corral plot``: learning curves of trial folders as a PNG (``corral.tune.plot``)."""

from __future__ import annotations

import argparse
from typing import Any

from corral.cli.common import EXIT_OK, UsageError


def add_plot_parser(commands: Any) -> None:
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


def run_plot(args: argparse.Namespace) -> int:
    """``corral plot``: writes the learning curves of ``args.logdirs`` to ``args.out``."""
    from corral.tune.plot import PlotError, plot_runs

    try:
        out = plot_runs(args.logdirs, args.out, x=args.x, y=args.y, title=args.title)
    except PlotError as e:
        raise UsageError(str(e)) from None
    print(f"Wrote {out}")
    return EXIT_OK
