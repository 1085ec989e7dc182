"""Learning curves of trials: `corral plot LOGDIR...`.

Each trial's results are read from its logdir: `result.json` (one result per
line, every key, written by `JsonLogger`) when it is there, else
`progress.csv` (e.g. a trial copied without its JSON). Curves are drawn with
matplotlib (the `plot` extra), which is imported only here.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from corral.tune.logger import flatten_dict, read_json_results
from corral.tune.result import (
    EPISODE_REWARD_MEAN,
    EVALUATION_REWARD_MEAN,
    EXPR_PROGRESS_FILE,
    EXPR_RESULT_FILE,
    TIME_TOTAL_S,
    TIMESTEPS_TOTAL,
    TRAINING_ITERATION,
)

X_KEYS = {"timesteps": TIMESTEPS_TOTAL, "time": TIME_TOTAL_S, "iterations": TRAINING_ITERATION}
X_LABELS = {"timesteps": "env steps", "time": "wall time (s)", "iterations": "iteration"}
DEFAULT_Y = EPISODE_REWARD_MEAN
EVALUATION_Y = EVALUATION_REWARD_MEAN


class PlotError(ValueError):
    """A logdir without results, or a key no trial reports (the message says which)."""


@dataclass
class Run:
    """The results of one trial, each a flat dict of floats (nested keys joined by "/")."""

    name: str
    rows: list[dict[str, float]] = field(default_factory=list)

    def series(self, x: str, y: str) -> tuple[list[float], list[float]]:
        """The (x, y) points where both keys have finite values."""
        xs, ys = [], []
        for row in self.rows:
            if _finite(row.get(x)) and _finite(row.get(y)):
                xs.append(row[x])
                ys.append(row[y])
        return xs, ys


def read_run(logdir: str) -> Run:
    """The results of the trial in `logdir` (`result.json`, else `progress.csv`)."""
    name = os.path.basename(os.path.normpath(logdir))
    json_path = os.path.join(logdir, EXPR_RESULT_FILE)
    csv_path = os.path.join(logdir, EXPR_PROGRESS_FILE)
    if os.path.isfile(json_path) and os.path.getsize(json_path) > 0:
        return Run(name, list(_json_rows(json_path)))
    if os.path.isfile(csv_path):
        return Run(name, list(_csv_rows(csv_path)))
    raise PlotError(f"{logdir} holds no result.json or progress.csv: is it a trial's logdir?")


def _json_rows(path: str) -> Iterable[dict[str, float]]:
    try:
        for result in read_json_results(path):
            yield {k: float(v) for k, v in flatten_dict(result).items() if _number(v)}
    except ValueError as e:
        raise PlotError(str(e)) from None


def _csv_rows(path: str) -> Iterable[dict[str, float]]:
    with open(path, newline="", encoding="utf-8") as f:
        for row in csv.DictReader(f):
            out = {}
            for key, text in row.items():
                try:
                    out[key] = float(text)
                except (TypeError, ValueError):
                    continue
            yield out


def plot_runs(
    logdirs: Sequence[str],
    out: str,
    x: str = "timesteps",
    y: str | None = None,
    title: str | None = None,
) -> str:
    """Draws the learning curves of the trials in `logdirs` into the PNG `out`.

    Args:
        logdirs: trial logdirs (several are overlaid, with a legend).
        out: the PNG file to write.
        x: "timesteps" (env steps), "time" (wall time) or "iterations".
        y: a result key (nested keys joined by "/"); default: the mean training
            return with its min/max band, and the evaluation return when present.
        title: the figure's title (default: the y key).

    Returns:
        `out`.

    Raises:
        PlotError: a logdir has no results, `x` is unknown, or no run has `y`.
    """
    if x not in X_KEYS:
        raise PlotError(f"--x {x!r}: expected one of {sorted(X_KEYS)}")
    try:
        import matplotlib

        matplotlib.use("Agg")  # files only: no display needed
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise PlotError(f"plotting needs matplotlib: pip install 'corral[plot]' ({e})") from None

    runs = [read_run(d) for d in logdirs]
    x_key = X_KEYS[x]
    y_key = y or DEFAULT_Y

    def reported(key: str) -> bool:
        return any(run.series(x_key, key)[0] for run in runs)

    # Offline trainers report no training episodes: by default their curve is the
    # evaluation return alone.
    if not reported(y_key) and not (y is None and reported(EVALUATION_Y)):
        known = sorted({k for run in runs for row in run.rows for k in row})
        raise PlotError(f"no run reports {y_key!r} against {x_key!r}; keys: {known[:40]}")
    figure, axes = plt.subplots(figsize=(7, 4.2), dpi=110)
    for index, run in enumerate(runs):
        color = f"C{index % 10}"
        label = run.name if len(runs) > 1 else ("training" if y is None else y_key)
        xs, ys = run.series(x_key, y_key)
        if xs:
            axes.plot(xs, ys, color=color, label=f"{label}" if y else f"{label} (mean)")
        if y is None:
            _band(axes, run, x_key, color)
            ex, ey = run.series(x_key, EVALUATION_Y)
            if ex:
                name = f"{run.name}: evaluation" if len(runs) > 1 else "evaluation"
                axes.plot(ex, ey, color=color, linestyle="--", marker="o", ms=3, label=name)
    axes.set_xlabel(X_LABELS[x])
    axes.set_ylabel("episode return" if y is None else y_key)
    axes.set_title(title or ("episode return" if y is None else y_key))
    axes.grid(alpha=0.3)
    axes.legend(loc="best", fontsize="small")
    figure.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
    figure.savefig(out, format="png")
    plt.close(figure)
    return out


def _band(axes: Any, run: Run, x_key: str, color: str) -> None:
    """The min/max band of the training return."""
    rows = [
        r
        for r in run.rows
        if all(_finite(r.get(k)) for k in (x_key, "episode_reward_min", "episode_reward_max"))
    ]
    if rows:
        axes.fill_between(
            [r[x_key] for r in rows],
            [r["episode_reward_min"] for r in rows],
            [r["episode_reward_max"] for r in rows],
            color=color,
            alpha=0.15,
            linewidth=0,
        )


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _finite(value: Any) -> bool:
    return _number(value) and math.isfinite(value)
