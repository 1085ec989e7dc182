"""Asynchronous successive halving (ASHA; Li et al. 2018, arXiv:1810.05934), as Ray Tune
1.13's ``AsyncHyperBandScheduler`` / ``ASHAScheduler``.

Each trial passes rungs at ``grace_period * reduction_factor**k`` units of ``time_attr``.
A trial reaching a rung goes on only if its metric is at least the ``1 - 1 /
reduction_factor`` quantile of the results recorded at that rung so far (the top
``1 / reduction_factor``); decisions never wait for other trials, so trials that run
one after another are judged against those before them.
"""

from __future__ import annotations

import json
import math
import random
from typing import Any

from corral.tune.logger import _write_json_atomically
from corral.tune.schedulers.trial_scheduler import FIFOScheduler, TrialScheduler
from corral.tune.trial import Trial

_STATE_VERSION = 1


def _rng_to_json(state: tuple) -> list:
    # `random.Random.getstate()`: (version, tuple of ints, gauss_next).
    version, internal, gauss_next = state
    return [version, list(internal), gauss_next]


def _rng_from_json(saved: list) -> tuple:
    version, internal, gauss_next = saved
    return (int(version), tuple(int(x) for x in internal), gauss_next)


class AsyncHyperBandScheduler(FIFOScheduler):
    """Stops trials that do badly at a rung, compared with the trials seen there before.

    Args:
        time_attr: the result key that measures training progress (it should grow).
        metric: the result key to compare (or ``tune.run(metric=...)``).
        mode: "max" or "min" (or ``tune.run(mode=...)``).
        max_t: a trial stops once ``time_attr`` reaches this (see ``stop_last_trials``).
        grace_period: no trial stops before this much ``time_attr``: the first rung.
        reduction_factor: rungs are this factor apart; the top ``1 / reduction_factor`` of
            each rung goes on.
        brackets: how many brackets (each starts its rungs one factor later); a new trial
            joins one at random, weighted towards those with more rungs.
        stop_last_trials: stop trials at ``max_t`` (False: let them run on).
        seed: seeds the bracket draws (None: random).
    """

    def __init__(
        self,
        time_attr: str = "training_iteration",
        metric: str | None = None,
        mode: str | None = None,
        max_t: float = 100,
        grace_period: float = 1,
        reduction_factor: float = 4,
        brackets: int = 1,
        stop_last_trials: bool = True,
        seed: int | None = None,
    ) -> None:
        if not max_t > 0:
            raise ValueError(f"max_t must be > 0, got {max_t!r}")
        if not 0 < grace_period <= max_t:
            raise ValueError(f"grace_period must be in (0, max_t={max_t}], got {grace_period!r}")
        if not reduction_factor > 1:
            raise ValueError(f"reduction_factor must be > 1, got {reduction_factor!r}")
        if isinstance(brackets, bool) or not isinstance(brackets, int) or brackets < 1:
            raise ValueError(f"brackets must be an int >= 1, got {brackets!r}")
        if mode not in (None, "max", "min"):
            raise ValueError(f"mode must be 'max' or 'min', got {mode!r}")
        self._time_attr = time_attr
        self._metric, self._mode = metric, mode
        self._max_t = max_t
        self._stop_last_trials = stop_last_trials
        self._brackets = [
            _Bracket(grace_period, max_t, reduction_factor, s) for s in range(brackets)
        ]
        self._bracket_of: dict[str, _Bracket] = {}
        self._num_stopped = 0
        self._rng = random.Random(seed)

    def on_trial_add(self, trial_runner: Any, trial: Trial) -> None:
        self._metric_op()  # a clear error now rather than at the first result
        most = max(len(b.rungs) for b in self._brackets)
        weights = [math.exp(len(b.rungs) - most) for b in self._brackets]
        self._bracket_of[trial.trial_id] = self._rng.choices(self._brackets, weights=weights)[0]

    def on_trial_result(self, trial_runner: Any, trial: Trial, result: dict) -> str:
        if self._time_attr not in result or self._metric not in result:
            return TrialScheduler.CONTINUE
        if self._stop_last_trials and result[self._time_attr] >= self._max_t:
            decision = TrialScheduler.STOP
        else:
            bracket = self._bracket_of[trial.trial_id]
            decision = bracket.on_result(
                trial.trial_id, result[self._time_attr], self._metric_op() * result[self._metric]
            )
        if decision == TrialScheduler.STOP:
            self._num_stopped += 1
        return decision

    def on_trial_complete(self, trial_runner: Any, trial: Trial, result: dict) -> None:
        bracket = self._bracket_of.pop(trial.trial_id, None)
        if bracket is not None and self._time_attr in result and self._metric in result:
            bracket.on_result(
                trial.trial_id, result[self._time_attr], self._metric_op() * result[self._metric]
            )

    def on_trial_remove(self, trial_runner: Any, trial: Trial) -> None:
        self._bracket_of.pop(trial.trial_id, None)

    def save(self, checkpoint_path: str) -> None:
        """Writes the scheduler's whole state to the file ``checkpoint_path`` as JSON
        (Ray Tune pickles it; nothing here is unpickled): its settings, each bracket's
        rungs, which bracket each trial is in, the count of stopped trials and the state
        of its random draws."""
        state = {
            "format_version": _STATE_VERSION,
            "time_attr": self._time_attr,
            "metric": self._metric,
            "mode": self._mode,
            "max_t": self._max_t,
            "stop_last_trials": self._stop_last_trials,
            "brackets": [
                {
                    "reduction_factor": b.reduction_factor,
                    "rungs": [[milestone, recorded] for milestone, recorded in b.rungs],
                }
                for b in self._brackets
            ],
            "bracket_of": {
                trial_id: self._brackets.index(b) for trial_id, b in self._bracket_of.items()
            },
            "num_stopped": self._num_stopped,
            "rng": _rng_to_json(self._rng.getstate()),
        }
        _write_json_atomically(checkpoint_path, state)

    def restore(self, checkpoint_path: str) -> None:
        """Takes the state ``save`` wrote to ``checkpoint_path`` (settings included).

        Raises:
            ValueError: the file is not such a state; then nothing changes.
        """
        try:
            with open(checkpoint_path, encoding="utf-8") as f:
                state = json.load(f)
            if state.get("format_version") != _STATE_VERSION:
                raise ValueError(f"format_version {state.get('format_version')!r}")
            brackets = []
            for saved in state["brackets"]:
                bracket = _Bracket.__new__(_Bracket)
                bracket.reduction_factor = float(saved["reduction_factor"])
                bracket.rungs = [
                    (float(milestone), {str(k): float(v) for k, v in recorded.items()})
                    for milestone, recorded in saved["rungs"]
                ]
                brackets.append(bracket)
            bracket_of = {str(t): brackets[int(i)] for t, i in state["bracket_of"].items()}
            rng = random.Random()
            rng.setstate(_rng_from_json(state["rng"]))
            settings = (
                str(state["time_attr"]),
                state["metric"],
                state["mode"],
                float(state["max_t"]),
                bool(state["stop_last_trials"]),
                int(state["num_stopped"]),
            )
        except (OSError, ValueError, KeyError, TypeError, IndexError, AttributeError) as e:
            raise ValueError(
                f"{checkpoint_path} is not a state AsyncHyperBandScheduler.save wrote ({e})"
            ) from None
        (
            self._time_attr,
            self._metric,
            self._mode,
            self._max_t,
            self._stop_last_trials,
            self._num_stopped,
        ) = settings
        self._brackets, self._bracket_of, self._rng = brackets, bracket_of, rng

    def debug_string(self) -> str:
        lines = [f"Using AsyncHyperBand: num_stopped={self._num_stopped}"]
        lines += [f"Bracket: {b.debug_string()}" for b in self._brackets]
        return "\n".join(lines)


class _Bracket:
    """One bracket's rungs: milestone -> {trial_id: metric (higher is better)}."""

    def __init__(self, min_t: float, max_t: float, reduction_factor: float, s: int) -> None:
        self.reduction_factor = reduction_factor
        count = int(math.log(max_t / min_t) / math.log(reduction_factor) - s + 1)
        # Highest milestone first: a result records at the highest rung it has reached.
        self.rungs: list[tuple[float, dict[str, float]]] = [
            (min_t * reduction_factor ** (k + s), {}) for k in reversed(range(count))
        ]

    def cutoff(self, recorded: dict[str, float]) -> float | None:
        """The value a trial needs at a rung: the rung's top ``1 / reduction_factor``."""
        values = sorted(v for v in recorded.values() if not math.isnan(v))
        if not values:
            return None
        # The quantile between the two nearest values (numpy's "linear" percentile).
        position = (len(values) - 1) * (1 - 1 / self.reduction_factor)
        low = math.floor(position)
        high = min(low + 1, len(values) - 1)
        return values[low] + (values[high] - values[low]) * (position - low)

    def on_result(self, trial_id: str, progress: float, value: float) -> str:
        for milestone, recorded in self.rungs:
            if progress < milestone or trial_id in recorded:
                continue
            cutoff = self.cutoff(recorded)
            recorded[trial_id] = value
            if cutoff is not None and value < cutoff:
                return TrialScheduler.STOP
            break
        return TrialScheduler.CONTINUE

    def debug_string(self) -> str:
        rungs = ", ".join(
            f"Iter {milestone:.1f}: {self.cutoff(recorded)}" for milestone, recorded in self.rungs
        )
        return f"Max Size (n)={len(self.rungs)}, Milestones: [{rungs}]"


# Ray Tune's shorter name.
ASHAScheduler = AsyncHyperBandScheduler
