"""Population-based training (Jaderberg et al. 2017, arXiv:1711.09846), as Ray Tune
1.13's ``PopulationBasedTraining``.

The trials (the population) train together, taking turns an iteration at a time. Every
``perturbation_interval`` units of ``time_attr`` a trial is ranked against the others
by its latest ``metric``: a trial in the top ``quantile_fraction`` is saved (in memory);
one in the bottom ``quantile_fraction`` *exploits* a random top trial (it is rebuilt with
that trial's saved state) and *explores* (its config becomes the top trial's with the
``hyperparam_mutations`` keys perturbed). Only configs change hands: the state is
corral's checkpoint (safetensors and JSON, ``Trainable.save_to_object``).

With ``synch=True`` (Ray Tune's synchronous PBT) a trial that reaches a perturbation
point waits (paused) until every unfinished trial has reached it; then all of them are
ranked and perturbed together, and they go on to the next point.
"""

from __future__ import annotations

import copy
import json
import math
import os
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from corral.tune.schedulers.trial_scheduler import FIFOScheduler, TrialScheduler
from corral.tune.search import Domain, _Spec
from corral.tune.trial import Trial


@dataclass
class _TrialState:
    """What PBT keeps of a trial."""

    trial: Trial
    orig_tag: str
    last_score: float | None = None  # higher is better
    last_checkpoint: bytes | None = None  # set while the trial is in the top quantile
    last_perturbation_time: float = 0.0
    last_train_time: float = 0.0
    last_result: dict | None = None


class PopulationBasedTraining(FIFOScheduler):
    """Exploits the best trials' states and explores their hyperparameters.

    Args:
        time_attr: the result key that measures training progress (it should grow).
        metric: the result key to rank by (or ``tune.run(metric=...)``).
        mode: "max" or "min" (or ``tune.run(mode=...)``).
        perturbation_interval: ``time_attr`` units between a trial's perturbations.
        burn_in_period: no perturbation before this much ``time_attr``.
        hyperparam_mutations: config keys -> how to perturb them: a list (a neighbour of
            the current value, or with ``resample_probability`` any of the list), a search
            space (``tune.uniform`` ...) or a function of no arguments (resampled with
            ``resample_probability``, else the value times 0.8 or 1.2), or a dict of these
            for a nested config. A key the trial's config lacks is drawn at the start.
        quantile_fraction: the share of trials in the top and in the bottom quantile
            (0 to 0.5).
        resample_probability: how often a value is drawn anew instead of perturbed.
        custom_explore_fn: ``fn(config) -> config``, applied after the mutations.
        log_config: write each exploit to ``pbt_global.txt`` in the experiment folder and
            ``pbt_policy_<trial_id>.txt`` (JSON lines; Ray Tune's files).
        require_attrs: a result without ``time_attr`` or ``metric`` raises (False: the
            trial just goes on).
        synch: Ray Tune's synchronous PBT: exploit and explore only once every unfinished
            trial has reached the perturbation point (each waits for the others, paused),
            then for all of them at once, the top quantile saved first (False: each trial
            is perturbed as it reaches its own perturbation point, against the others'
            latest scores). A trial that ends, or fails, is waited for no longer.
        seed: seeds the exploit and explore draws (None: random).
    """

    trains_trials_together = True

    def __init__(
        self,
        time_attr: str = "time_total_s",
        metric: str | None = None,
        mode: str | None = None,
        perturbation_interval: float = 60.0,
        burn_in_period: float = 0.0,
        hyperparam_mutations: Mapping[str, Any] | None = None,
        quantile_fraction: float = 0.25,
        resample_probability: float = 0.25,
        custom_explore_fn: Callable[[dict], dict] | None = None,
        log_config: bool = True,
        require_attrs: bool = True,
        synch: bool = False,
        seed: int | None = None,
    ) -> None:
        if not hyperparam_mutations and custom_explore_fn is None:
            raise ValueError(
                "PopulationBasedTraining needs hyperparam_mutations or custom_explore_fn "
                "(what to perturb)"
            )
        _check_mutations(hyperparam_mutations or {})
        if not 0 <= quantile_fraction <= 0.5:
            raise ValueError(f"quantile_fraction must be in [0, 0.5], got {quantile_fraction!r}")
        if not perturbation_interval > 0:
            raise ValueError(f"perturbation_interval must be > 0, got {perturbation_interval!r}")
        if mode not in (None, "max", "min"):
            raise ValueError(f"mode must be 'max' or 'min', got {mode!r}")
        self._time_attr = time_attr
        self._metric, self._mode = metric, mode
        self._perturbation_interval = perturbation_interval
        self._burn_in_period = burn_in_period
        self._hyperparam_mutations = dict(hyperparam_mutations or {})
        self._quantile_fraction = quantile_fraction
        self._resample_probability = resample_probability
        self._custom_explore_fn = custom_explore_fn
        self._log_config = log_config
        self._require_attrs = require_attrs
        self._synch = synch
        # (synch) The `time_attr` every trial waits at for the others.
        self._next_perturbation_sync = max(perturbation_interval, burn_in_period)
        self._rng = random.Random(seed)
        self._state: dict[str, _TrialState] = {}  # by trial_id
        self._num_checkpoints = 0
        self._num_perturbations = 0

    def on_trial_add(self, trial_runner: Any, trial: Trial) -> None:
        self._metric_op()  # a clear error now rather than at the first result
        self._state[trial.trial_id] = _TrialState(trial, orig_tag=trial.experiment_tag)
        _fill_missing(trial.config, self._hyperparam_mutations, self._rng)

    def on_trial_result(self, trial_runner: Any, trial: Trial, result: dict) -> str:
        for key in (self._time_attr, self._metric):
            if key not in result:
                if self._require_attrs:
                    raise ValueError(
                        f"PopulationBasedTraining: the result of trial {trial} has no "
                        f"{key!r} (its keys: {sorted(result)}); pass "
                        "require_attrs=False to let such trials run on"
                    )
                return TrialScheduler.CONTINUE
        now = result[self._time_attr]
        state = self._state[trial.trial_id]
        if now < self._burn_in_period:
            return TrialScheduler.CONTINUE
        if now - state.last_perturbation_time < self._perturbation_interval:
            return TrialScheduler.CONTINUE
        state.last_score = self._metric_op() * result[self._metric]
        state.last_train_time = now
        state.last_result = result
        if self._synch:
            # It waits for the others; the last to arrive perturbs them all.
            if not self._behind(trial_runner, trial):
                self._perturb_all(trial_runner, now)
            return TrialScheduler.PAUSE
        state.last_perturbation_time = now
        lower, upper = self._quantiles()
        waiting = any(t.status in (Trial.PENDING, Trial.PAUSED) for t in trial_runner.get_trials())
        self._checkpoint_or_exploit(trial_runner, trial, lower, upper)
        # Trials waiting for a slot take turns with this one.
        return TrialScheduler.PAUSE if waiting else TrialScheduler.CONTINUE

    def choose_trial_to_run(self, trial_runner: Any) -> Trial | None:
        """The pending or paused trial that has trained least (``time_attr``); with
        ``synch``, only one that has not reached the perturbation point yet."""
        waiting = [
            t
            for t in trial_runner.get_trials()
            if t.status in (Trial.PENDING, Trial.PAUSED)
            and not (
                self._synch
                and self._state[t.trial_id].last_train_time >= self._next_perturbation_sync
            )
        ]
        if not waiting:
            return None
        return min(waiting, key=lambda t: self._state[t.trial_id].last_train_time)

    def on_trial_complete(self, trial_runner: Any, trial: Trial, result: dict) -> None:
        self._state[trial.trial_id].last_checkpoint = None  # (a finished trial is no donor)
        self._sync_without(trial_runner)

    def on_trial_error(self, trial_runner: Any, trial: Trial) -> None:
        self._state[trial.trial_id].last_checkpoint = None
        self._sync_without(trial_runner)

    def reset_stats(self) -> None:
        """Sets the counts of checkpoints and perturbations back to zero."""
        self._num_perturbations = 0
        self._num_checkpoints = 0

    def last_scores(self, trials: list[Trial]) -> list[float]:
        """The latest score of each of ``trials`` that has one and has not ended (the
        metric as recorded at its last perturbation point, negated for ``mode="min"``:
        higher is better)."""
        scores = []
        for trial in trials:
            state = self._state.get(trial.trial_id)
            if state is not None and state.last_score is not None and not trial.is_finished():
                scores.append(state.last_score)
        return scores

    def debug_string(self) -> str:
        return (
            f"PopulationBasedTraining: {self._num_checkpoints} checkpoints, "
            f"{self._num_perturbations} perturbs"
        )

    # -- exploit and explore --------------------------------------------------

    def _checkpoint_or_exploit(
        self, trial_runner: Any, trial: Trial, lower: list[Trial], upper: list[Trial]
    ) -> None:
        """Saves ``trial``'s state if it is in the top quantile; if it is in the bottom
        one, it exploits a random top trial (that has a saved state) and explores."""
        state = self._state[trial.trial_id]
        if any(t is trial for t in upper):
            state.last_checkpoint = trial_runner.save_to_object(trial)
            self._num_checkpoints += 1
        else:
            state.last_checkpoint = None
        if any(t is trial for t in lower):
            donor = self._rng.choice(upper)
            if self._state[donor.trial_id].last_checkpoint is not None:
                self._exploit(trial_runner, trial, donor)

    def _behind(self, trial_runner: Any, trial: Trial | None) -> list[Trial]:
        """(synch) The unfinished trials but ``trial`` that have not reached the
        perturbation point yet."""
        return [
            t
            for t in trial_runner.get_trials()
            if t is not trial
            and not t.is_finished()
            and self._state[t.trial_id].last_train_time < self._next_perturbation_sync
        ]

    def _perturb_all(self, trial_runner: Any, now: float) -> None:
        """(synch) Every unfinished trial reached the perturbation point: the top quantile
        is saved first, then the bottom one exploits it; the next point is set."""
        lower, upper = self._quantiles()
        unfinished = [t for t in trial_runner.get_trials() if not t.is_finished()]
        ranked = {id(t) for t in lower + upper}
        middle = [t for t in unfinished if id(t) not in ranked]
        for trial in upper + middle + lower:
            self._state[trial.trial_id].last_perturbation_time = now
            self._checkpoint_or_exploit(trial_runner, trial, lower, upper)
        latest = max((self._state[t.trial_id].last_train_time for t in unfinished), default=0.0)
        self._next_perturbation_sync = max(
            self._next_perturbation_sync + self._perturbation_interval, latest
        )

    def _sync_without(self, trial_runner: Any) -> None:
        """(synch) A trial ended: if the others were all waiting for it, they go on."""
        if not self._synch:
            return
        waiting = [
            t
            for t in trial_runner.get_trials()
            if t.status == Trial.PAUSED
            and self._state[t.trial_id].last_train_time >= self._next_perturbation_sync
        ]
        if waiting and not self._behind(trial_runner, None):
            now = max(self._state[t.trial_id].last_train_time for t in waiting)
            self._perturb_all(trial_runner, now)

    def _quantiles(self) -> tuple[list[Trial], list[Trial]]:
        """The bottom and top quantiles of the unfinished trials that have a score."""
        scored = [
            (s.last_score, s.trial)
            for s in self._state.values()
            if not s.trial.is_finished() and s.last_score is not None
        ]
        scored.sort(key=lambda pair: pair[0])
        trials = [trial for _, trial in scored]
        size = min(math.ceil(len(trials) * self._quantile_fraction), len(trials) // 2)
        if size == 0:
            return [], []
        return trials[:size], trials[-size:]

    def _exploit(self, trial_runner: Any, trial: Trial, donor: Trial) -> None:
        state, donor_state = self._state[trial.trial_id], self._state[donor.trial_id]
        new_config = explore(
            donor.config,
            self._hyperparam_mutations,
            self._resample_probability,
            self._custom_explore_fn,
            self._rng,
        )
        tag = _experiment_tag(state.orig_tag, new_config, self._hyperparam_mutations)
        if self._log_config:
            self._log_exploit(trial_runner, trial, donor, new_config)
        assert donor_state.last_checkpoint is not None
        trial_runner.restart_trial(trial, new_config, donor_state.last_checkpoint, tag)
        self._num_perturbations += 1
        state.last_perturbation_time = donor_state.last_perturbation_time
        state.last_train_time = donor_state.last_train_time

    def _log_exploit(self, trial_runner: Any, trial: Trial, donor: Trial, new_config: dict) -> None:
        folder = getattr(trial_runner, "experiment_dir", None)
        if not folder:
            return
        os.makedirs(folder, exist_ok=True)
        donor_state = self._state[donor.trial_id]
        row = {
            "target_trial": donor.trial_id,
            "trial": trial.trial_id,
            "target_iteration": (donor_state.last_result or {}).get("training_iteration"),
            "iteration": (self._state[trial.trial_id].last_result or {}).get("training_iteration"),
            "old_config": donor.config,
            "new_config": new_config,
        }
        line = json.dumps(row, default=repr) + "\n"
        for name in ("pbt_global.txt", f"pbt_policy_{trial.trial_id}.txt"):
            with open(os.path.join(folder, name), "a", encoding="utf-8") as f:
                f.write(line)


def explore(
    config: dict,
    mutations: Mapping[str, Any],
    resample_probability: float,
    custom_explore_fn: Callable[[dict], dict] | None = None,
    rng: random.Random | None = None,
) -> dict:
    """A perturbed copy of ``config`` (see ``PopulationBasedTraining``'s
    ``hyperparam_mutations``), then ``custom_explore_fn`` of it."""
    rng = rng or random.Random()
    new = copy.deepcopy(config)
    for key, how in mutations.items():
        if isinstance(how, Mapping):
            new[key] = explore(config.get(key, {}), how, resample_probability, None, rng)
        elif isinstance(how, list | tuple):
            values = list(how)
            current = config.get(key)
            if rng.random() < resample_probability or current not in values:
                new[key] = rng.choice(values)
            else:
                index = values.index(current) + (-1 if rng.random() > 0.5 else 1)
                new[key] = values[min(max(index, 0), len(values) - 1)]
        else:
            current = config.get(key)
            if current is None or rng.random() < resample_probability:
                new[key] = _draw(how, rng, config)
            else:
                new[key] = current * (1.2 if rng.random() > 0.5 else 0.8)
            if type(current) is int:
                new[key] = int(new[key])
    if custom_explore_fn is not None:
        new = custom_explore_fn(new)
        if not isinstance(new, dict):
            raise ValueError(f"custom_explore_fn must return the new config, got {new!r}")
    return new


def _draw(how: Any, rng: random.Random, config: dict) -> Any:
    if isinstance(how, Domain):
        return how.sample(rng, _Spec(config))
    return how()


def _check_mutations(mutations: Mapping[str, Any], prefix: str = "") -> None:
    for key, how in mutations.items():
        if isinstance(how, Mapping):
            _check_mutations(how, f"{prefix}{key}/")
        elif isinstance(how, list | tuple):
            if not how:
                raise ValueError(f"hyperparam_mutations[{prefix}{key}] is an empty list")
        elif not (isinstance(how, Domain) or callable(how)):
            raise TypeError(
                f"hyperparam_mutations[{prefix}{key}] must be a list, a search space "
                f"(tune.uniform, ...), a function or a dict of these, got {how!r}"
            )


def _fill_missing(config: dict, mutations: Mapping[str, Any], rng: random.Random) -> None:
    """Draws the mutated keys a trial's config lacks (Ray Tune's rule)."""
    for key, how in mutations.items():
        if isinstance(how, Mapping):
            _fill_missing(config.setdefault(key, {}), how, rng)
        elif key not in config:
            config[key] = (
                rng.choice(list(how)) if isinstance(how, list | tuple) else _draw(how, rng, config)
            )


def _experiment_tag(orig_tag: str, config: dict, mutations: Mapping[str, Any]) -> str:
    """The trial's tag with its mutated values (``"0@perturbed[lr=0.0012]"``)."""
    values = ",".join(f"{k}={_short(config.get(k))}" for k in mutations)
    return f"{orig_tag}@perturbed[{values}]"


def _short(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)
