"""``Trial``: one run of a trainable with one resolved config, as Ray Tune's."""

from __future__ import annotations

from dataclasses import dataclass, field

from corral.tune.logger import flatten_dict
from corral.tune.result import CONFIG

# Ray Tune 1.13's `ray.tune.trial.ExportFormat` (the formats `Trainer.export_model` takes).
from corral.tune.trainable import ExportFormat

__all__ = ["ExportFormat", "Trial"]


@dataclass(eq=False)
class Trial:
    """One run of a trainable with one resolved config (compared and hashed by identity,
    as Ray Tune's trials are: schedulers key their state by trial)."""

    # Its statuses (Ray Tune's): it waits to start, trains, waits to resume, or ended.
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    PAUSED = "PAUSED"
    TERMINATED = "TERMINATED"
    ERROR = "ERROR"

    trainable_name: str
    config: dict
    trial_id: str
    experiment_tag: str = ""
    logdir: str | None = None
    last_result: dict = field(default_factory=dict)
    checkpoint: str | None = None
    status: str = "PENDING"  # then RUNNING (PAUSED between turns), and TERMINATED or ERROR
    # Tune 1.13's per-metric summary over all results: metric (nested keys joined by
    # "/") -> {"max", "min", "avg", "last", "last-5-avg", "last-10-avg"}.
    metric_analysis: dict = field(default_factory=dict)
    # Each checkpoint saved, with the (flattened) result it was saved after.
    checkpoints: list = field(default_factory=list)
    # The values it drew from the config's grid_search and search spaces, by path
    # joined by "/" (Ray Tune's `evaluated_params`).
    evaluated_params: dict = field(default_factory=dict)
    # How often its trainable raised; the last such error, its traceback and the file in
    # the trial's logdir that holds the tracebacks (Ray Tune's `error.txt`).
    num_failures: int = 0
    error: BaseException | None = field(default=None, repr=False)
    error_msg: str | None = None
    error_file: str | None = None
    # Ended by an error of the run rather than its own (a hook, Ctrl-C): resumable.
    interrupted: bool = field(default=False, repr=False)
    _history: dict = field(default_factory=dict, repr=False)
    # Every result's numbers, flattened (for `ExperimentAnalysis.dataframe`).
    _results: list = field(default_factory=list, repr=False)

    def __str__(self) -> str:
        return f"{self.trainable_name}_{self.trial_id}"

    def is_finished(self) -> bool:
        """Whether the trial has ended (TERMINATED or ERROR)."""
        return self.status in (Trial.TERMINATED, Trial.ERROR)

    def update_last_result(self, result: dict) -> None:
        """Records a new result: `last_result` and `metric_analysis`."""
        self.last_result = result
        scalars = {}
        for key, value in flatten_dict({k: v for k, v in result.items() if k != CONFIG}).items():
            if isinstance(value, bool) or not isinstance(value, (int, float)):
                continue
            scalars[key] = value
            values = self._history.setdefault(key, [])
            values.append(float(value))
            self.metric_analysis[key] = {
                "max": max(values),
                "min": min(values),
                "avg": sum(values) / len(values),
                "last": values[-1],
                "last-5-avg": sum(values[-5:]) / len(values[-5:]),
                "last-10-avg": sum(values[-10:]) / len(values[-10:]),
            }
        self._results.append(scalars)
