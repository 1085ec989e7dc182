"""Ray Tune 1.13's progress reporters (``ray.tune.progress_reporter``): what
``tune.run(progress_reporter=...)`` prints while trials run.

A reporter is asked ``should_report(trials, done)`` after every step of the run (a trial's
iteration) and once at its end (``done=True``); when it answers True, ``report(trials,
done, *sys_info)`` is called (``sys_info``: the scheduler's summary line). ``CLIReporter``
prints a status block: time, memory, the current best trial, the number of trials per
status and, as Tune does, a table of the trials (name, status, location, parameters,
metrics) at the end from ``verbose=2`` on and after every report from ``verbose=3`` on
(``print_intermediate_tables=True``: always). Without a reporter ``tune.run`` prints its
own lines (a line per finished trial; with ``verbose=2`` a line per iteration); with one,
``verbose=1`` prints the reporter's output only, ``verbose>=2`` both.
"""

from __future__ import annotations

import collections
import datetime
import html
import logging
import sys
import time
from collections.abc import Mapping, MutableMapping, Sequence
from typing import Any

from corral.tune.callback import Callback
from corral.tune.result import (
    DEBUG_METRICS,
    DONE,
    EPISODE_REWARD_MEAN,
    NODE_IP,
    PID,
    TIME_TOTAL_S,
    TIMESTEPS_TOTAL,
    TRAINING_ITERATION,
)
from corral.tune.session import DEFAULT_METRIC
from corral.tune.trial import Trial
from corral.tune.utils.log import Verbosity, has_verbosity
from corral.tune.utils.util import unflattened_lookup

logger = logging.getLogger(__name__)

__all__ = [
    "CLIReporter",
    "JupyterNotebookReporter",
    "ProgressReporter",
    "TuneReporterBase",
    "detect_reporter",
]

# Ray Tune's names of the metrics a function trainable reports most often.
MEAN_ACCURACY = "mean_accuracy"
MEAN_LOSS = "mean_loss"

# Result keys every trainable fills in (never inferred as the user's metrics).
_AUTO_RESULT_KEYS = frozenset(
    {
        TRAINING_ITERATION,
        TIME_TOTAL_S,
        TIMESTEPS_TOTAL,
        DONE,
        *DEBUG_METRICS,
        "time_this_iter_s",
        "timesteps_this_iter",
        "episodes_total",
        "time_since_restore",
        "timesteps_since_restore",
        "iterations_since_restore",
        "warmup_time",
    }
)


def _is_notebook() -> bool:
    try:
        shell = get_ipython()  # type: ignore[name-defined]  # noqa: F821
    except NameError:
        return False
    return "Terminal" not in type(shell).__name__


class ProgressReporter:
    """What ``tune.run(progress_reporter=...)`` takes: subclass it and define
    ``should_report`` and ``report``.

    ``should_report(trials, done)`` is asked after every step of the run and once at its
    end (``done=True``); ``report(trials, done, *sys_info)`` follows when it answers True.
    """

    def setup(
        self,
        start_time: float | None = None,
        total_samples: int | None = None,
        metric: str | None = None,
        mode: str | None = None,
        **kwargs: Any,
    ) -> None:
        """Called once by ``tune.run`` before the first trial: the run's start time, how
        many trials it will make, its metric and mode. Does nothing by default."""

    def should_report(self, trials: list[Trial], done: bool = False) -> bool:
        """Whether to ``report`` now (``done``: the run is over)."""
        raise NotImplementedError

    def report(self, trials: list[Trial], done: bool, *sys_info: str) -> None:
        """Reports the progress of ``trials`` (``sys_info``: status lines of the run)."""
        raise NotImplementedError


class TuneReporterBase(ProgressReporter):
    """The default reporters' shared part: which columns, how often, which trial is best.

    Args:
        metric_columns: the metrics shown, a list of result keys (nested keys joined by
            "/") or ``{key: heading}``. Default: Tune's (``mean_accuracy``, ``mean_loss``,
            ``training_iteration``, ``time_total_s``, ``timesteps_total``,
            ``episode_reward_mean``, those reported) and up to ``infer_limit`` more numbers
            the trials report.
        parameter_columns: the config values shown, a list of paths (joined by "/") or
            ``{path: heading}``; default: every value drawn from a grid or search space.
        total_samples: how many trials the run makes (``tune.run`` sets it).
        max_progress_rows: at most this many rows in the trial table (each status keeps
            a fair share; the oldest trials are left out); the last report shows all.
        max_error_rows: at most this many rows in the table of errored trials.
        max_report_frequency: report at most once per this many seconds (and at the end).
        infer_limit: how many metrics to infer when ``metric_columns`` is not given.
        print_intermediate_tables: print the trial table in every report (default: from
            ``verbose=3`` on; from ``verbose=2`` on it is printed at the end).
        metric: the metric that picks the current best trial (else ``tune.run``'s).
        mode: "max" or "min" (else ``tune.run``'s).
        sort_by_metric: sort the terminated trials by ``metric`` in the table.
    """

    DEFAULT_COLUMNS = collections.OrderedDict(
        {
            MEAN_ACCURACY: "acc",
            MEAN_LOSS: "loss",
            TRAINING_ITERATION: "iter",
            TIME_TOTAL_S: "total time (s)",
            TIMESTEPS_TOTAL: "ts",
            EPISODE_REWARD_MEAN: "reward",
        }
    )

    def __init__(
        self,
        metric_columns: list[str] | dict[str, str] | None = None,
        parameter_columns: list[str] | dict[str, str] | None = None,
        total_samples: int | None = None,
        max_progress_rows: int = 20,
        max_error_rows: int = 20,
        max_report_frequency: float = 5,
        infer_limit: int = 3,
        print_intermediate_tables: bool | None = None,
        metric: str | None = None,
        mode: str | None = None,
        sort_by_metric: bool = False,
    ) -> None:
        if mode not in (None, "max", "min"):
            raise ValueError(
                f"{type(self).__name__}(mode=...) must be 'max' or 'min', got {mode!r}"
            )
        for name, value in (
            ("max_progress_rows", max_progress_rows),
            ("max_error_rows", max_error_rows),
        ):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(
                    f"{type(self).__name__}({name}=...) must be an int >= 1, got {value!r}"
                )
        self._total_samples = total_samples
        self._metrics_override = metric_columns is not None
        self._inferred_metrics: dict[str, str] = {}
        self._metric_columns: Any = (
            metric_columns if metric_columns is not None else self.DEFAULT_COLUMNS.copy()
        )
        self._parameter_columns: Any = parameter_columns or []
        self._max_progress_rows = max_progress_rows
        self._max_error_rows = max_error_rows
        self._max_report_frequency = max_report_frequency
        self._infer_limit = infer_limit
        self._print_intermediate_tables = print_intermediate_tables
        self._last_report_time = 0.0
        self._start_time = time.time()
        self._metric = metric
        self._mode = mode
        self._sort_by_metric = sort_by_metric

    def setup(
        self,
        start_time: float | None = None,
        total_samples: int | None = None,
        metric: str | None = None,
        mode: str | None = None,
        **kwargs: Any,
    ) -> None:
        self.set_start_time(start_time)
        self.set_total_samples(total_samples)
        self.set_search_properties(metric=metric, mode=mode)

    def set_search_properties(self, metric: str | None, mode: str | None) -> bool:
        """Takes ``tune.run``'s ``metric`` and ``mode``.

        Raises:
            ValueError: the reporter has its own ``metric`` or ``mode`` as well.
        """
        if (self._metric and metric) or (self._mode and mode):
            raise ValueError(
                "tune.run(metric=..., mode=...) and the progress reporter's own metric / "
                "mode: set them in one place (the reporter or tune.run)"
            )
        self._metric = self._metric or metric
        self._mode = self._mode or mode
        if self._metric is None and self._mode:
            self._metric = DEFAULT_METRIC  # (Tune's anonymous metric)
        return True

    def set_total_samples(self, total_samples: int | None) -> None:
        """How many trials the run makes (shown as ``Number of trials: n/total``)."""
        self._total_samples = total_samples

    def set_start_time(self, timestamp: float | None = None) -> None:
        """When the run started (``time.time()``; default: now)."""
        self._start_time = time.time() if timestamp is None else timestamp

    def should_report(self, trials: list[Trial], done: bool = False) -> bool:
        """True at most once per ``max_report_frequency`` seconds, and when ``done``."""
        if time.time() - self._last_report_time > self._max_report_frequency:
            self._last_report_time = time.time()
            return True
        return done

    def add_metric_column(self, metric: str, representation: str | None = None) -> None:
        """Shows ``metric`` too (under ``representation``, default its name).

        Raises:
            ValueError: it is shown already, or a ``representation`` other than its name
                for a reporter given a list of columns.
        """
        self._metrics_override = True
        _add_column(self._metric_columns, metric, representation)

    def add_parameter_column(self, parameter: str, representation: str | None = None) -> None:
        """Shows the config value ``parameter`` too (under ``representation``).

        Raises:
            ValueError: as ``add_metric_column``.
        """
        _add_column(self._parameter_columns, parameter, representation)

    def _progress_str(
        self, trials: list[Trial], done: bool, *sys_info: str, fmt: str = "psql", delim: str = "\n"
    ) -> str:
        """The status block: time, memory, ``sys_info``, best trial, trials and errors."""
        if not self._metrics_override:
            self._metric_columns.update(self._infer_user_metrics(trials, self._infer_limit))
        messages = [
            "== Status ==",
            time_passed_str(self._start_time, time.time()),
            memory_debug_str(),
            *sys_info,
        ]
        best, metric = self._current_best_trial(trials)
        if best is not None and metric is not None:
            messages.append(best_trial_str(best, metric, self._parameter_columns))
        if has_verbosity(Verbosity.V1_EXPERIMENT):
            tables = self._print_intermediate_tables
            if tables is None:
                tables = has_verbosity(Verbosity.V3_TRIAL_DETAILS)
            messages.append(
                trial_progress_str(
                    trials,
                    metric_columns=self._metric_columns,
                    parameter_columns=self._parameter_columns,
                    total_samples=self._total_samples,
                    force_table=tables,
                    fmt=fmt,
                    max_rows=None if done else self._max_progress_rows,
                    done=done,
                    metric=self._metric,
                    mode=self._mode,
                    sort_by_metric=self._sort_by_metric,
                )
            )
            messages.append(
                trial_errors_str(trials, fmt=fmt, max_rows=None if done else self._max_error_rows)
            )
        return delim.join(m for m in messages if m) + delim

    def _infer_user_metrics(self, trials: Sequence[Trial], limit: int = 4) -> dict[str, str]:
        """Up to ``limit`` numbers the trials report besides the default columns."""
        if len(self._inferred_metrics) >= limit:
            return self._inferred_metrics
        self._inferred_metrics = {}
        for trial in trials:
            for key, value in (trial.last_result or {}).items():
                if key in self.DEFAULT_COLUMNS or key in _AUTO_RESULT_KEYS:
                    continue
                if (
                    value is None
                    or (isinstance(value, int | float) and not isinstance(value, bool))
                    or type(value).__module__ == "numpy"
                    and getattr(value, "ndim", 1) == 0
                ):
                    self._inferred_metrics[key] = key
                if len(self._inferred_metrics) >= limit:
                    return self._inferred_metrics
        return self._inferred_metrics

    def _current_best_trial(self, trials: Sequence[Trial]) -> tuple[Trial | None, str | None]:
        metric, mode = self._metric, self._mode
        if not metric and len(self._inferred_metrics) == 1:
            metric = next(iter(self._inferred_metrics))
        if not trials or not metric or not mode:
            return None, metric
        sign = 1.0 if mode == "max" else -1.0
        best, best_value = None, -float("inf")
        for trial in trials:
            value = unflattened_lookup(metric, trial.last_result or {}, default=None)
            try:
                score = sign * float(value)
            except (TypeError, ValueError):
                continue
            if best is None or score > best_value:
                best, best_value = trial, score
        return best, metric


def _add_column(columns: Any, key: str, representation: str | None) -> None:
    if key in columns:
        raise ValueError(f"Column {key} already exists.")
    if isinstance(columns, MutableMapping):
        columns[key] = representation or key
        return
    if representation is not None and representation != key:
        raise ValueError(
            "`representation` cannot differ from the column's name for a reporter given a "
            "list of columns (give a dict {name: heading} instead)"
        )
    columns.append(key)


class CLIReporter(TuneReporterBase):
    """Prints the status block (``TuneReporterBase``'s arguments) to standard output."""

    def report(self, trials: list[Trial], done: bool, *sys_info: str) -> None:
        print(self._progress_str(trials, done, *sys_info))


class JupyterNotebookReporter(TuneReporterBase):
    """Shows the status block as HTML in a Jupyter notebook (outside one, with a warning,
    prints it as ``CLIReporter`` does).

    Args:
        overwrite: replace the previous report instead of adding one below it.
        **kwargs: ``TuneReporterBase``'s arguments.
    """

    def __init__(self, overwrite: bool, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._overwrite = overwrite
        self._display: Any = None
        if _is_notebook():
            try:
                from IPython import display

                self._display = display
            except ImportError:
                pass
        if self._display is None:
            logger.warning(
                "JupyterNotebookReporter outside an IPython/Jupyter session: the progress "
                "is printed as text (CLIReporter's output)"
            )

    def report(self, trials: list[Trial], done: bool, *sys_info: str) -> None:
        if self._display is None:
            print(self._progress_str(trials, done, *sys_info))
            return
        text = self._progress_str(trials, done, *sys_info, fmt="html", delim="<br>")
        if self._overwrite:
            self._display.clear_output(wait=True)
        self._display.display(self._display.HTML(text))


def detect_reporter(**kwargs: Any) -> TuneReporterBase:
    """A ``JupyterNotebookReporter`` in a notebook, else a ``CLIReporter`` (``kwargs``:
    their arguments)."""
    if _is_notebook():
        kwargs.setdefault("overwrite", not has_verbosity(Verbosity.V2_TRIAL_NORM))
        return JupyterNotebookReporter(**kwargs)
    return CLIReporter(**kwargs)


# -- the status block's parts ---------------------------------------------------------


def memory_debug_str() -> str:
    """``Memory usage on this node: used/total GiB`` (a warning past 90%)."""
    try:
        import psutil
    except ImportError:
        return "Unknown memory usage (pip install psutil)"
    memory = psutil.virtual_memory()
    total = memory.total / 1024**3
    used = total - memory.available / 1024**3
    warn = (
        ": ***LOW MEMORY*** less than 10% of the memory is available" if used > 0.9 * total else ""
    )
    return f"Memory usage on this node: {round(used, 1)}/{round(total, 1)} GiB{warn}"


def time_passed_str(start_time: float, current_time: float) -> str:
    """``Current time: ... (running for hh:mm:ss.ss)``."""
    now = datetime.datetime.fromtimestamp(current_time)
    rest = max(0.0, current_time - start_time)
    days, rest = divmod(rest, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    running = f"{days:.0f} days, " if days else ""
    running += f"{hours:02.0f}:{minutes:02.0f}:{seconds:05.2f}"
    return f"Current time: {now:%Y-%m-%d %H:%M:%S} (running for {running})"


def best_trial_str(
    trial: Trial, metric: str, parameter_columns: list[str] | dict[str, str] | None = None
) -> str:
    """``Current best trial: <id> with <metric>=<value> and parameters={...}``."""
    value = unflattened_lookup(metric, trial.last_result, default=None)
    config = trial.config
    keys = list(parameter_columns or config)
    params = {key: unflattened_lookup(key, config, default=None) for key in keys}
    return f"Current best trial: {trial.trial_id} with {metric}={value} and parameters={params}"


def _by_status(trials: Sequence[Trial]) -> dict[str, list[Trial]]:
    grouped: dict[str, list[Trial]] = collections.defaultdict(list)
    for trial in trials:
        grouped[trial.status].append(trial)
    return grouped


def trial_progress_str(
    trials: Sequence[Trial],
    metric_columns: list[str] | dict[str, str],
    parameter_columns: list[str] | dict[str, str] | None = None,
    total_samples: int | None = 0,
    force_table: bool = False,
    fmt: str = "psql",
    max_rows: int | None = None,
    done: bool = False,
    metric: str | None = None,
    mode: str | None = None,
    sort_by_metric: bool = False,
) -> str:
    """The trials' folders, their number per status and (``force_table``, or at the end
    from ``verbose=2`` on) their table."""
    if not trials:
        return ""
    delim = "<br>" if fmt == "html" else "\n"
    grouped = _by_status(trials)
    messages = [
        f"Result logdir: {folder}"
        for folder in sorted({_local_dir(t) for t in trials} - {None})  # type: ignore[type-var]
    ]
    counts = ", ".join(f"{len(grouped[status])} {status}" for status in sorted(grouped))
    total = ""
    if total_samples:
        total = "/infinite" if total_samples >= sys.maxsize else f"/{total_samples}"
    messages.append(f"Number of trials: {len(trials)}{total} ({counts})")
    if force_table or (has_verbosity(Verbosity.V2_TRIAL_NORM) and done):
        messages += trial_progress_table(
            trials, metric_columns, parameter_columns, fmt, max_rows, metric, mode, sort_by_metric
        )
    return delim.join(messages)


def _local_dir(trial: Trial) -> str | None:
    import os

    return os.path.dirname(trial.logdir) if trial.logdir else None


_STATUS_ORDER = (Trial.RUNNING, Trial.PAUSED, Trial.PENDING, Trial.TERMINATED, Trial.ERROR)


def trial_progress_table(
    trials: Sequence[Trial],
    metric_columns: list[str] | dict[str, str],
    parameter_columns: list[str] | dict[str, str] | None = None,
    fmt: str = "psql",
    max_rows: int | None = None,
    metric: str | None = None,
    mode: str | None = None,
    sort_by_metric: bool = False,
) -> list[str]:
    """The table of the trials (at most ``max_rows`` rows, each status its fair share),
    running first, then paused, pending, terminated and errored; the metric columns that
    no trial reports are left out."""
    grouped = _by_status(trials)
    if sort_by_metric and metric and mode:
        grouped[Trial.TERMINATED] = sorted(
            grouped[Trial.TERMINATED],
            key=lambda t: _sort_value(t, metric),
            reverse=mode == "max",
        )
    overflow = ""
    if max_rows is not None and len(trials) > max_rows:
        kept = _fair_filter_trials(grouped, max_rows, sort_by_metric)
        left_out = [
            f"{len(grouped[s]) - len(kept[s])} {s}"
            for s in _STATUS_ORDER
            if len(grouped.get(s, ())) > len(kept.get(s, ()))
        ]
        overflow = f"... {len(trials) - max_rows} more trials not shown ({', '.join(left_out)})"
        grouped = kept
    shown = [t for status in _STATUS_ORDER for t in grouped.get(status, ())]
    shown += [t for s, ts in grouped.items() if s not in _STATUS_ORDER for t in ts]

    metric_keys = [
        key
        for key in metric_columns
        if any(
            unflattened_lookup(key, t.last_result or {}, default=None) is not None for t in shown
        )
    ]
    if not parameter_columns:
        parameter_keys = sorted(set().union(*(t.evaluated_params for t in shown)))
    else:
        parameter_keys = list(parameter_columns)
    metric_heads = [_heading(metric_columns, k) for k in metric_keys]
    parameter_heads = [_heading(parameter_columns, k) for k in parameter_keys]
    rows = [
        [str(t), t.status, _location(t)]
        + [unflattened_lookup(k, t.config, default=None) for k in parameter_keys]
        + [unflattened_lookup(k, t.last_result or {}, default=None) for k in metric_keys]
        for t in shown
    ]
    messages = [
        format_table(rows, ["Trial name", "status", "loc", *parameter_heads, *metric_heads], fmt)
    ]
    if overflow:
        messages.append(overflow)
    return messages


def _sort_value(trial: Trial, metric: str) -> float:
    value = unflattened_lookup(metric, trial.last_result or {}, default=None)
    try:
        return float(value)
    except (TypeError, ValueError):
        return -float("inf")


def _heading(columns: Any, key: str) -> str:
    return str(columns[key]) if isinstance(columns, Mapping) else key


def _location(trial: Trial) -> str:
    result = trial.last_result or {}
    if result.get(NODE_IP) and result.get(PID):
        return f"{result[NODE_IP]}:{result[PID]}"
    return ""


def _fair_filter_trials(
    grouped: Mapping[str, list[Trial]], max_trials: int, sort_by_metric: bool = False
) -> dict[str, list[Trial]]:
    """At most ``max_trials`` trials, each status given rows in turn; within a status the
    newest are kept (terminated ones in metric order with ``sort_by_metric``)."""
    counts: dict[str, int] = collections.defaultdict(int)
    changed = True
    while max_trials > 0 and changed:
        changed = False
        for status in sorted(grouped):
            if max_trials > 0 and counts[status] < len(grouped[status]):
                counts[status] += 1
                max_trials -= 1
                changed = True
    kept = {}
    for status in sorted(grouped):
        ordered = list(grouped[status])
        if not (status == Trial.TERMINATED and sort_by_metric):
            ordered.sort(key=lambda t: t.trial_id)
        kept[status] = ordered[: counts[status]]
    return kept


def trial_errors_str(
    trials: Sequence[Trial], fmt: str = "psql", max_rows: int | None = None
) -> str:
    """The table of the trials that errored (their error files), if any did."""
    failed = [t for t in trials if t.error_file]
    if not failed:
        return ""
    messages = [f"Number of errored trials: {len(failed)}"]
    if max_rows is not None and len(failed) > max_rows:
        messages.append(f"Table truncated to {max_rows} rows ({len(failed) - max_rows} overflow)")
        failed = failed[:max_rows]
    rows = [[str(t), t.num_failures, t.error_file] for t in failed]
    messages.append(format_table(rows, ["Trial name", "# failures", "error file"], fmt))
    return ("<br>" if fmt == "html" else "\n").join(messages)


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:.6g}"
    return str(value)


def format_table(rows: Sequence[Sequence[Any]], headers: Sequence[str], fmt: str = "psql") -> str:
    """``rows`` under ``headers`` as a text table with borders (``"psql"``, as Tune's
    ``tabulate`` prints it: numbers right-aligned) or an HTML table (``"html"``)."""
    cells = [[_cell(v) for v in row] for row in rows]
    if fmt == "html":
        head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
        body = "".join(
            "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in cells
        )
        return f"<table>\n<thead>\n<tr>{head}</tr>\n</thead>\n<tbody>\n{body}\n</tbody>\n</table>"
    numeric = [
        all(isinstance(row[i], int | float) or row[i] is None for row in rows) and bool(rows)
        for i in range(len(headers))
    ]
    widths = [max([len(h), *(len(row[i]) for row in cells)]) for i, h in enumerate(headers)]

    def line(values: Sequence[str]) -> str:
        padded = [
            v.rjust(w) if num else v.ljust(w)
            for v, w, num in zip(values, widths, numeric, strict=True)
        ]
        return "| " + " | ".join(padded) + " |"

    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    sep = "|" + "+".join("-" * (w + 2) for w in widths) + "|"
    return "\n".join([rule, line(headers), sep, *(line(row) for row in cells), rule])


class ReporterCallback(Callback):
    """How ``tune.run`` drives a reporter: after every step of the run (when ``verbose``
    is 1 or more) and once at the end, ``should_report`` then maybe ``report``."""

    def __init__(self, reporter: ProgressReporter, scheduler: Any = None) -> None:
        self.reporter = reporter
        self.scheduler = scheduler

    def _report(self, trials: list[Trial], done: bool) -> None:
        if not has_verbosity(Verbosity.V1_EXPERIMENT):
            return
        if self.reporter.should_report(trials, done=done):
            debug = getattr(self.scheduler, "debug_string", None)
            sys_info = [debug()] if callable(debug) else []
            self.reporter.report(trials, done, *sys_info)

    def on_step_end(self, iteration: int, trials: list[Trial], **info: Any) -> None:
        self._report(trials, done=False)

    def on_experiment_end(self, trials: list[Trial], **info: Any) -> None:
        self._report(trials, done=True)


def check_reporter(reporter: Any) -> ProgressReporter:
    """``reporter`` if it has ``should_report`` and ``report`` (a ``ProgressReporter``).

    Raises:
        TypeError: it lacks them.
    """
    if not all(callable(getattr(reporter, m, None)) for m in ("should_report", "report")):
        raise TypeError(
            "tune.run(progress_reporter=...) takes a tune.ProgressReporter (CLIReporter, "
            f"JupyterNotebookReporter, or a subclass with should_report and report), got "
            f"{reporter!r}"
        )
    return reporter
