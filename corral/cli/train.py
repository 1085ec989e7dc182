"""``corral train``: trains experiments on ``corral.tune``'s trial loop, with a live display.

The loop, its stop rule and its checkpoint keeping are ``corral.tune.trial_runner``'s
(the ones ``tune.run`` uses); this module builds the trainer so that config mistakes
end in one line, and hooks the display and the final summary in as a ``tune.Callback``.
With ``--scheduler`` or ``--resume`` (``rllib train``'s Ray Tune flags) each experiment
runs through ``tune.run`` itself, as ``rllib train`` ran it through Ray Tune: its trials
under ``<local dir>/<experiment name>/``, scheduled together, resumable.
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
from corral.cli.experiments import (
    DEFAULT_STOP,
    TrainSpec,
    check_stop_reachable,
    experiment_specs,
    train_specs,
)
from corral.cli.progress import ProgressDisplay
from corral.cli.summary import TrainOutcome, print_summary
from corral.tune.callback import Callback
from corral.tune.stopping import met_criterion, stop_condition

# Exit status when a trial of a `tune.run` experiment failed (its error is printed).
EXIT_TRIAL_FAILED = 1

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
    add_train_arguments(train)
    train.set_defaults(handler=run_train, subparser=train)


def add_train_arguments(train: argparse.ArgumentParser) -> None:
    """``corral train``'s flags, RLlib 1.13's ``rllib train`` flags among them, on ``train``
    (``corral train``'s subparser, or ``corral.train.create_parser``'s parser)."""
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
    train.add_argument(
        "--local-dir",
        help="directory for the experiments: trial folders (logs, checkpoints) go in "
        "<local-dir>/<experiment name>/",
    )
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
    train.add_argument(
        "--scheduler",
        default="FIFO",
        help="Ray Tune's trial scheduler by name (fifo, asha, async_hyperband, "
        "median_stopping_rule, pbt); any but FIFO runs the experiment through tune.run, "
        "its trials under <local dir>/<experiment name>/",
    )
    train.add_argument(
        "--scheduler-config",
        type=common.json_object,
        default={},
        help="the scheduler's arguments as a JSON object, e.g. "
        '\'{"metric": "episode_reward_mean", "mode": "max", "max_t": 20}\'',
    )
    train.add_argument(
        "--resume",
        action="store_true",
        help="go on with the experiment of --local-dir and --experiment-name that an earlier "
        "--resume or --scheduler run left unfinished (through tune.run): finished trials are "
        "kept, the others continue from their latest checkpoints; with nothing to resume, "
        "start it",
    )
    _add_rllib_1_13_flags(train)


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
    "--export-formats": None,
    "--upload-dir": "",
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
    rllib.add_argument(
        "--experiment-name",
        help="the experiment's name: its folder under --local-dir and its display "
        "(default: 'default', or the experiment's key in a -f file)",
    )
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
    if uses_tune_run(args):
        return _run_on_tune(args)
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
    """The trainer's default logger creator, with the trial folder in
    ``<--local-dir>/<experiment name>/`` (RLlib 1.13's ``rllib train`` layout: the name is
    ``--experiment-name``, the file's experiment name, or ``default``)."""
    from corral.agents.driver import default_logger
    from corral.env.utils import env_id_of

    experiment_dir = os.path.join(
        os.path.abspath(os.path.expanduser(spec.local_dir or ".")), spec.experiment or spec.name
    )
    trainer_name = getattr(trainer_class, "_name", trainer_class.__name__)

    def create(config: dict) -> Any:
        # Called while the trainer is built, so a bad env spec is a one-line error too.
        return default_logger(trainer_name, env_id_of(spec.env), config, experiment_dir)

    return create


# -- experiments through tune.run (--scheduler, --resume) ----------------------------------


def uses_tune_run(args: argparse.Namespace) -> bool:
    """Whether the experiments run through ``tune.run`` (a scheduler other than FIFO, its
    config, or ``--resume``), as ``rllib train`` ran them through Ray Tune."""
    return bool(args.resume or args.scheduler_config or args.scheduler.lower() != "fifo")


def make_scheduler(name: str, config: dict) -> Any:
    """``create_scheduler(name, **config)``, its mistakes (an unknown name, a bad argument,
    a scheduler without a metric and mode) as a ``UsageError``."""
    from corral.tune.schedulers import FIFOScheduler, create_scheduler

    try:
        scheduler = create_scheduler(name, **config)
    except (ValueError, TypeError, NotImplementedError) as e:
        raise common.UsageError(f"--scheduler {name}: {e}") from None
    if type(scheduler) is not FIFOScheduler:
        try:
            scheduler._metric_op()
        except ValueError:
            raise common.UsageError(
                f"--scheduler {name} needs a metric and a mode: add them to --scheduler-config, "
                'e.g. \'{"metric": "episode_reward_mean", "mode": "max"}\''
            ) from None
    return scheduler


def _run_on_tune(args: argparse.Namespace) -> int:
    """Runs each experiment with ``tune.run`` (its scheduler, ``--resume``), one after
    another; prints each trial's summary."""
    display = ProgressDisplay(sys.stderr, enabled=not args.no_progress)
    status = common.EXIT_OK
    for spec in experiment_specs(args):
        display.message(f"== Experiment {spec.name} ==")
        try:
            analysis = train_experiment_on_tune(spec, args, display)
        except KeyboardInterrupt:
            display.end_line()
            display.message(
                f"Interrupted: training stopped. `corral train ... --resume` (the same "
                f"--local-dir and --experiment-name) goes on with experiment {spec.name}."
            )
            return common.EXIT_INTERRUPTED
        display.end_line()
        if any(trial.status == "ERROR" for trial in analysis.trials):
            status = EXIT_TRIAL_FAILED
    return status


def train_experiment_on_tune(
    spec: TrainSpec, args: argparse.Namespace, display: ProgressDisplay
) -> Any:
    """``tune.run`` of one experiment with ``--scheduler`` / ``--scheduler-config`` /
    ``--resume``, showing each result and ending with each trial's summary; returns its
    ``ExperimentAnalysis``."""
    from corral.tune.suggest.variant_generator import check_num_samples
    from corral.tune.tune import run

    common.get_trainer_class(spec.run)  # an unknown algorithm: a usage error now
    restore = common.find_checkpoint_dir(spec.restore) if spec.restore else None
    try:
        check_num_samples(spec.num_samples or 1)
    except ValueError as e:
        raise common.UsageError(str(e)) from None
    local_dir = os.path.abspath(os.path.expanduser(spec.local_dir)) if spec.local_dir else None
    resume: bool | str = False
    if args.resume:
        from corral.tune import experiment_state
        from corral.tune.result import default_results_dir

        experiment_dir = os.path.join(local_dir or default_results_dir(), spec.name)
        resume = True
        if experiment_state.load(experiment_dir) is None:
            # (A run outside tune.run leaves nothing to resume: this one starts it.)
            display.message(
                f"Note: {experiment_dir} holds no experiment to resume; starting it (after a "
                "Ctrl-C the same command goes on with it)."
            )
            resume = "AUTO"
    progress = TuneProgress(spec, display)
    display.stop = dict(spec.stop)
    try:
        analysis = run(
            spec.run,
            config={**spec.config, "env": spec.env},
            stop=spec.stop,
            num_samples=spec.num_samples or 1,
            checkpoint_freq=spec.checkpoint_freq,
            checkpoint_at_end=spec.checkpoint_at_end,
            keep_checkpoints_num=spec.keep_checkpoints_num,
            checkpoint_score_attr=spec.checkpoint_score_attr,
            local_dir=local_dir,
            name=spec.name,
            restore=restore,
            scheduler=make_scheduler(args.scheduler, args.scheduler_config),
            resume=resume,
            callbacks=[progress],
            verbose=0,
            raise_on_failed_trial=False,
        )
    except ValueError as e:  # a --resume that does not fit, a grid without values, ...
        raise common.UsageError(str(e)) from None
    for trial in analysis.trials:
        progress.summarise(trial)
    return analysis


class TuneProgress(Callback):
    """The hook ``corral train`` puts into ``tune.run``: checks, display and, per trial,
    the figures of its summary."""

    def __init__(self, spec: TrainSpec, display: ProgressDisplay) -> None:
        self.spec = spec
        self.display = display
        self.outcomes: dict[str, TrainOutcome] = {}

    def _outcome(self, trial: Trial) -> TrainOutcome:
        if trial.trial_id not in self.outcomes:
            self.outcomes[trial.trial_id] = TrainOutcome(
                logdir=trial.logdir or "", env=self.spec.env, stop=dict(self.spec.stop)
            )
        return self.outcomes[trial.trial_id]

    def on_trial_start(
        self, iteration: int, trials: list[Trial], trial: Trial, **info: Any
    ) -> None:
        """Refuses criteria the trainer can never meet; says which trial trains where."""
        trainer = info["trainable"]
        check_stop_reachable(self.spec.stop, trainer.config)
        self._outcome(trial).config = trainer.config
        verb = f"Resuming at iteration {iteration}" if iteration else "Training"
        self.display.message(f"{verb} trial {trial} ({trial.experiment_tag}) in {trainer.logdir}")

    def on_trial_result(
        self, iteration: int, trials: list[Trial], trial: Trial, result: dict, **info: Any
    ) -> None:
        """Shows the iteration, named by its trial, and keeps its figures."""
        self._outcome(trial).record(result)
        self.display.update(result, label=f"{trial.experiment_tag}: ")

    def on_checkpoint(
        self, iteration: int, trials: list[Trial], trial: Trial, checkpoint: str, **info: Any
    ) -> None:
        """Notes the trial's latest checkpoint."""
        self._outcome(trial).last_checkpoint = checkpoint

    def summarise(self, trial: Trial) -> None:
        """Prints the trial's summary (a trial this run did not train: from its state)."""
        outcome = self._outcome(trial)
        outcome.logdir = trial.logdir or outcome.logdir
        if not outcome.last_result and trial.last_result:
            outcome.record(trial.last_result)
        outcome.last_checkpoint = trial.checkpoint or outcome.last_checkpoint
        outcome.met = met_criterion(self.spec.stop, outcome.last_result)
        self.display.end_line()
        sys.stdout.write(f"Trial {trial} ({trial.experiment_tag}): {trial.status}\n")
        if trial.status == "ERROR":
            error = (trial.error_msg or "").strip().splitlines()
            sys.stdout.write(f"  failed: {error[-1] if error else 'unknown error'}\n")
        print_summary(outcome, sys.stdout)
