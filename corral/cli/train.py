"""``corral train``: trains experiments on ``corral.tune``'s trial loop, with a live display.

The loop, its stop rule and its checkpoint keeping are ``corral.tune.trial_runner``'s
(the ones ``tune.run`` uses); this module builds the trainer so that config mistakes
end in one line, and hooks the display and the final summary in as a ``tune.Callback``.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from corral.cli import common
from corral.cli.experiments import DEFAULT_STOP, TrainSpec, check_stop_reachable, train_specs
from corral.cli.progress import ProgressDisplay
from corral.cli.summary import TrainOutcome, print_summary
from corral.tune.callback import Callback
from corral.tune.stopping import met_criterion, stop_condition

if TYPE_CHECKING:
    from corral.tune.trial import Trial


def add_train_parser(commands: Any) -> None:
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
        type=common.json_object,
        help="trainer config as a JSON object, merged over the file's config",
    )
    train.add_argument(
        "--stop",
        type=common.json_object,
        help="stop when any result[key] >= value, e.g. '{\"timesteps_total\": 100000}'; "
        f"nested keys joined by '/' (default: {json.dumps(DEFAULT_STOP)})",
    )
    train.add_argument(
        "--checkpoint-freq", type=common.non_negative_int, help="checkpoint every N iters"
    )
    train.add_argument(
        "--checkpoint-at-end",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="write a checkpoint when training ends (also after Ctrl-C)",
    )
    train.add_argument(
        "--keep-checkpoints-num",
        type=common.positive_int,
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
    train.add_argument(
        "--num-samples",
        type=common.positive_int,
        help="trials per combination of the config's grid_search values (search spaces "
        "are drawn for each); the trials train one after another",
    )
    _add_rllib_1_13_flags(train)
    train.set_defaults(handler=run_train, subparser=train)


# `rllib train` flags that start or size a Ray cluster: corral trains without one.
_RAY_CLUSTER_FLAGS = (
    "--ray-address",
    "--ray-num-cpus",
    "--ray-num-gpus",
    "--ray-num-nodes",
    "--ray-object-store-memory",
)
# `rllib train` flags for Ray Tune features corral's loop has not: accepted at these values.
_TUNE_ONLY_FLAGS = {
    "--max-failures": 0,
    "--scheduler": "FIFO",
    "--scheduler-config": {},
    "--export-formats": None,
    "--upload-dir": "",
    "--resume": False,
    "--sync-on-checkpoint": False,
    "--queue-trials": False,
}


def _add_rllib_1_13_flags(train: argparse.ArgumentParser) -> None:
    """The rest of RLlib 1.13's `rllib train` flags, so its command lines run."""
    rllib = train.add_argument_group("RLlib 1.13's other flags")
    rllib.add_argument("--framework", help="sets config['framework'] (corral builds torch)")
    rllib.add_argument("--torch", action="store_true", help="--framework torch")
    rllib.add_argument("--eager", action="store_true", help="--framework tf2 (not built)")
    rllib.add_argument("--trace", action="store_true", help="--framework tf2 (not built)")
    rllib.add_argument("--experiment-name", help="the experiment's name (folder and display)")
    rllib.add_argument(
        "--resources-per-trial",
        type=common.json_object,
        help="checked for its form; trials run one after another in this process",
    )
    for flag in _RAY_CLUSTER_FLAGS:
        rllib.add_argument(flag, help="no effect: corral trains without a Ray cluster")
    for flag in ("--ray-ui", "--no-ray-ui", "--local-mode"):
        rllib.add_argument(flag, action="store_true", help="no effect (no Ray cluster)")
    for flag, default in _TUNE_ONLY_FLAGS.items():
        rllib.add_argument(flag, default=default, help="Ray Tune's; not built", **_kind(default))


def _kind(default: Any) -> dict[str, Any]:
    """How argparse reads a flag of `_TUNE_ONLY_FLAGS`, from its default's type."""
    if default is False:
        return {"action": "store_true"}
    if isinstance(default, dict):
        return {"type": common.json_object}
    if isinstance(default, int):
        return {"type": int}
    return {}


def check_rllib_1_13_flags(args: argparse.Namespace) -> None:
    """Notes the Ray cluster flags that have no effect; refuses Ray Tune features.

    Raises:
        UsageError: a flag of `_TUNE_ONLY_FLAGS` away from its default, or a malformed
            --resources-per-trial.
    """
    given = [f for f in _RAY_CLUSTER_FLAGS if getattr(args, _dest(f)) is not None]
    given += [f for f in ("--ray-ui", "--no-ray-ui", "--local-mode") if getattr(args, _dest(f))]
    if given:
        print(
            f"Note: {', '.join(given)} ha{'s' if len(given) == 1 else 've'} no effect: corral "
            "trains without a Ray cluster (its workers are processes of this machine; with "
            'the ray extra, --config \'{"backend": "ray"}\' runs them as Ray actors).',
            file=sys.stderr,
        )
    for flag, default in _TUNE_ONLY_FLAGS.items():
        value = getattr(args, _dest(flag))
        if value != default:
            raise common.UsageError(
                f"{flag} {value!r}: Ray Tune's, not built in corral train (its trials run one "
                "after another in this process)"
            )
    if args.resources_per_trial is not None:
        from corral.tune.resources import resources_from_tune_argument

        try:
            resources_from_tune_argument(args.resources_per_trial)
        except ValueError as e:
            raise common.UsageError(str(e)) from None


def _dest(flag: str) -> str:
    return flag.lstrip("-").replace("-", "_")


def run_train(args: argparse.Namespace) -> int:
    """``corral train``: trains each experiment in turn until its stop criteria are met."""
    _configure_logging(args.verbose)
    check_rllib_1_13_flags(args)
    specs = train_specs(args)
    display = ProgressDisplay(sys.stderr, enabled=not args.no_progress)
    for spec in specs:
        if len(specs) > 1:
            display.message(f"== Experiment {spec.name} ==")
        outcome = train_experiment(spec, display, verbose=args.verbose)
        print_summary(outcome, sys.stdout)
        if outcome.interrupted:
            return common.EXIT_INTERRUPTED
    return common.EXIT_OK


def _configure_logging(verbose: int) -> None:
    level = logging.DEBUG if verbose > 1 else logging.INFO if verbose else logging.WARNING
    logging.basicConfig(level=level, format="%(levelname)s %(name)s: %(message)s")


def train_experiment(spec: TrainSpec, display: ProgressDisplay, verbose: int = 0) -> TrainOutcome:
    """Builds the trainer and runs it as one trial of ``corral.tune``'s loop until
    ``spec.stop`` (or Ctrl-C); the trainer is always stopped."""
    from corral.tune.trial import Trial
    from corral.tune.trial_runner import CheckpointKeeper, TrialLoop

    try:
        keeper = CheckpointKeeper(spec.keep_checkpoints_num, spec.checkpoint_score_attr)
    except ValueError as e:
        raise common.UsageError(str(e)) from None
    # Found before the trainer is built: a wrong path fails in a second.
    restore = common.find_checkpoint_dir(spec.restore) if spec.restore else None
    trainer_class = common.get_trainer_class(spec.run)
    logger_creator = _local_dir_logger_creator(trainer_class, spec) if spec.local_dir else None
    trainer = common.build_trainer(trainer_class, spec.env, spec.config, logger_creator, verbose)
    outcome = TrainOutcome(
        logdir=trainer.logdir, env=spec.env, stop=dict(spec.stop), config=trainer.config
    )
    display.stop = dict(spec.stop)
    trial = Trial(trainable_name=spec.run, config=trainer.config, trial_id=spec.name)
    try:
        with common.checkpoint_errors_as_usage():  # a damaged --restore checkpoint
            TrialLoop(
                stop_condition(spec.stop),
                restore=restore,
                checkpoint_freq=spec.checkpoint_freq,
                checkpoint_at_end=spec.checkpoint_at_end,
                keeper=keeper,
                callbacks=[TrainProgress(spec, display, outcome)],
            ).run(trial, trainer)
    except KeyboardInterrupt:
        outcome.interrupted = True
        display.message("Interrupted: stopping training.")
    else:
        outcome.met = met_criterion(spec.stop, outcome.last_result)
    display.end_line()
    return outcome


class TrainProgress(Callback):
    """The hook ``corral train`` puts into the trial loop: checks, display and summary."""

    def __init__(self, spec: TrainSpec, display: ProgressDisplay, outcome: TrainOutcome) -> None:
        self.spec = spec
        self.display = display
        self.outcome = outcome

    def on_trial_start(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        """Refuses criteria the trainer can never meet; says what was restored and where
        results go."""
        trainer = info["trainable"]
        check_stop_reachable(self.spec.stop, trainer.config)
        if self.spec.restore:
            self.display.message(f"Restored {self.spec.restore} (iteration {iteration})")
        self.display.message(
            f"Training {self.spec.run} on {self.spec.env}; results in {trainer.logdir}"
        )

    def on_trial_result(
        self, iteration: int, trials: list[Trial], trial: Trial, result: dict, **info: Any
    ) -> None:
        """Shows the iteration and keeps its figures for the summary."""
        self.outcome.record(result)
        self.display.update(result)

    def on_checkpoint(
        self, iteration: int, trials: list[Trial], trial: Trial, checkpoint: str, **info: Any
    ) -> None:
        """Says where the checkpoint went (the summary names the last one)."""
        self.outcome.last_checkpoint = checkpoint
        self.display.message(f"Checkpoint saved: {checkpoint}")


def _local_dir_logger_creator(trainer_class: Any, spec: TrainSpec) -> Callable[[dict], Any]:
    """The trainer's default logger creator, with the trial folder under ``--local-dir``."""
    from corral.agents.driver import default_logger
    from corral.env.utils import env_id_of

    local_dir = os.path.abspath(os.path.expanduser(spec.local_dir or "."))
    trainer_name = getattr(trainer_class, "_name", trainer_class.__name__)

    def create(config: dict) -> Any:
        # Called while the trainer is built, so a bad env spec is a one-line error too.
        return default_logger(trainer_name, env_id_of(spec.env), config, local_dir)

    return create
