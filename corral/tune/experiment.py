"""Ray Tune 1.x's `tune.Experiment` and `tune.run_experiments`, as RLlib 1.x code used them:

    tune.run_experiments({
        "cartpole-ppo": {"run": "PPO", "env": "CartPole-v1", "stop": {...}, "config": {...}},
    })

Each experiment runs through `tune.run` (one after another), so a spec takes `run`'s
arguments; `env` moves into the config, as Tune did for RLlib.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from corral.tune.callback import Callback
from corral.tune.trial import Trial


class Experiment:
    """One named experiment: what to run, and `tune.run`'s arguments for it.

    Args:
        name: the experiment's name (its results folder).
        run: a trainable: an algorithm name such as "PPO", a registered name, a
            `Trainable` subclass or a function trainable.
        **spec: `tune.run`'s other arguments (`config`, `stop`, `num_samples`,
            `checkpoint_freq`, `local_dir`, ...), and `env` (moved into `config`).
    """

    def __init__(self, name: str, run: str | type | Callable[..., Any], **spec: Any) -> None:
        if not isinstance(name, str) or not name:
            raise ValueError(f"An experiment needs a name, got {name!r}")
        spec = dict(spec)
        env = spec.pop("env", None)
        if env is not None:
            spec["config"] = {**(spec.get("config") or {}), "env": env}
        self.name = name
        self.run = run
        self.spec = spec

    @classmethod
    def from_json(cls, name: str, spec: Mapping[str, Any]) -> Experiment:
        """An experiment from its dict form (`{"run": ..., "stop": ..., "config": ...}`).

        Raises:
            ValueError: `spec` is not a dict or names no `run`.
        """
        if not isinstance(spec, Mapping) or "run" not in spec:
            raise ValueError(f"Experiment {name!r} needs a dict with a 'run' key, got {spec!r}")
        spec = dict(spec)
        return cls(name, spec.pop("run"), **spec)

    def __repr__(self) -> str:
        return f"Experiment({self.name!r}, run={self.run!r})"


def run_experiments(
    experiments: Experiment | Sequence[Experiment] | Mapping[str, Mapping[str, Any]],
    *,
    verbose: int = 1,
    callbacks: Sequence[Callback] | None = None,
    concurrent: bool = True,
    **ray_tune_options: Any,
) -> list[Trial]:
    """Runs each experiment with `tune.run`, one after another; returns all their trials.

    Args:
        experiments: an `Experiment`, a list of them, or `{name: spec dict}`.
        verbose: as `tune.run`'s.
        callbacks: `tune.Callback` hooks, for every experiment.
        concurrent: Ray Tune's (run the experiments side by side); here they run one
            after another either way.
        **ray_tune_options: Ray Tune 1.13's other arguments (`scheduler`, `resume`,
            `max_failures`, ...), as `tune.run` takes them. With `raise_on_failed_trial`
            (the default) every experiment runs, then `TuneError` is raised if a trial
            failed.
    """
    from corral.tune.tune import raise_if_failed, run

    if isinstance(experiments, Experiment):
        experiments = [experiments]
    elif isinstance(experiments, Mapping):
        experiments = [Experiment.from_json(name, spec) for name, spec in experiments.items()]
    trials: list[Trial] = []
    for experiment in experiments:
        if not isinstance(experiment, Experiment):
            raise TypeError(f"run_experiments takes Experiments, got {experiment!r}")
        options = {**ray_tune_options, **experiment.spec}
        raise_on_failed_trial = options.pop("raise_on_failed_trial", True)
        analysis = run(
            experiment.run,
            name=experiment.name,
            verbose=options.pop("verbose", verbose),
            callbacks=options.pop("callbacks", callbacks),
            raise_on_failed_trial=False,
            **options,
        )
        trials.extend(analysis.trials)
    if raise_on_failed_trial:
        raise_if_failed(trials)
    return trials
