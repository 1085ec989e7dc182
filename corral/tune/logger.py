"""Result loggers: ``result.json``, ``progress.csv`` and TensorBoard events per trial.

Results hold numpy scalars and arrays, torch tensors, classes and functions
(inside ``config``); every logger here converts what it can and writes a
readable stand-in for the rest rather than crash mid-training. ``result.json`` and
``progress.csv`` are flushed as each result is written, so a crash loses at most the
iteration in flight; TensorBoard's writer flushes its events from its own thread within
``TBXLogger.FLUSH_SECS`` of their result.
"""

from __future__ import annotations

import csv
import importlib
import importlib.util
import json
import logging
import math
import os
import re
import tempfile
import types
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Any, NamedTuple

from corral.tune.callback import Callback
from corral.tune.result import (
    CONFIG,
    EXPR_PARAM_FILE,
    EXPR_PROGRESS_FILE,
    EXPR_RESULT_FILE,
    PID,
    TIME_TOTAL_S,
    TIMESTAMP,
    TIMESTEPS_TOTAL,
    TRAINING_ITERATION,
)

log = logging.getLogger(__name__)

_SCALARS = (str, bool, int, float)


def flatten_dict(d: Mapping[str, Any], delimiter: str = "/") -> dict[str, Any]:
    """Flatten nested mappings into one level, joining keys with ``delimiter``.

    ``{"info": {"learner": {"loss": 1}}}`` becomes ``{"info/learner/loss": 1}``,
    the column names of RLlib's ``progress.csv``. Non-mapping values (lists,
    arrays) are kept as they are; an empty nested mapping contributes no key.
    """
    flat: dict[str, Any] = {}
    for key, value in d.items():
        key = str(key)
        if isinstance(value, Mapping):
            for sub_key, sub_value in flatten_dict(value, delimiter).items():
                flat[f"{key}{delimiter}{sub_key}"] = sub_value
        else:
            flat[key] = value
    return flat


def qualified_name(obj: Any) -> str:
    """``module.QualName`` of a class or function: how configs name them in JSON."""
    module = getattr(obj, "__module__", None)
    name = getattr(obj, "__qualname__", None) or getattr(obj, "__name__", None) or repr(obj)
    return f"{module}.{name}" if module else str(name)


def to_jsonable(value: Any) -> Any:
    """A JSON-serialisable copy of ``value``, converting rather than failing.

    numpy/torch scalars and arrays become numbers and lists (via ``tolist``),
    classes and functions their qualified name, anything else its ``repr``.
    NaN and inf floats are kept (``json`` writes them as ``NaN``/``Infinity``,
    as Ray's result files do).
    """
    if value is None or isinstance(value, _SCALARS):
        return value
    if isinstance(value, Mapping):
        return {k if isinstance(k, str) else str(k): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [to_jsonable(v) for v in value]
    if isinstance(value, type | types.FunctionType | types.BuiltinFunctionType):
        return qualified_name(value)
    tolist = getattr(value, "tolist", None)
    if callable(tolist):
        try:
            return to_jsonable(tolist())
        except Exception:  # an exotic array type: fall back to its repr below
            log.debug("tolist() failed on %r", type(value), exc_info=True)
    return repr(value)


def _as_scalar(value: Any) -> Any:
    """``value`` as a python scalar, or ``None`` when it is not one (lists, arrays, dicts)."""
    if isinstance(value, _SCALARS):
        return value
    # numpy scalars and 0-d numpy/torch arrays carry ``ndim == 0``.
    if getattr(value, "ndim", None) == 0 and callable(getattr(value, "item", None)):
        item = value.item()
        return item if isinstance(item, _SCALARS) else None
    return None


def _write_json_atomically(path: str, obj: Any) -> None:
    directory = os.path.dirname(path)
    fd, tmp_path = tempfile.mkstemp(prefix=".tmp-", suffix=".json", dir=directory)
    try:
        with os.fdopen(fd, "w") as f:
            json.dump(to_jsonable(obj), f, indent=2, sort_keys=True)
        os.replace(tmp_path, path)
    except BaseException:
        os.unlink(tmp_path)
        raise


class Logger:
    """Base class of result loggers: one instance writes one trial's ``logdir``.

    Subclasses override ``_init`` (setup, as in Ray) and ``on_result``.

    Args:
        config: the trial's config, recorded by loggers that keep it.
        logdir: directory to write into; created if missing.
        trial: the trial this logger belongs to, if run by ``tune.run``.
    """

    def __init__(self, config: dict, logdir: str, trial: Any = None) -> None:
        self.config = config
        self.logdir = logdir
        self.trial = trial
        os.makedirs(logdir, exist_ok=True)
        self._init()

    def _init(self) -> None:
        """Subclass setup hook, called at the end of ``__init__``."""

    def on_result(self, result: dict) -> None:
        """Record one training result."""
        raise NotImplementedError

    def update_config(self, config: dict) -> None:
        """Replace the recorded config (e.g. once defaults are merged in)."""
        self.config = config

    def flush(self) -> None:
        """Push buffered output to disk."""

    def close(self) -> None:
        """Release files; the logger is not used afterwards."""


class JsonLogger(Logger):
    """One JSON line per result in ``result.json``; the config goes to ``params.json``."""

    def _init(self) -> None:
        self.update_config(self.config)
        # Open for the logger's lifetime; close() releases it.
        self._file = open(os.path.join(self.logdir, EXPR_RESULT_FILE), "a")  # noqa: SIM115

    def on_result(self, result: dict) -> None:
        self._file.write(json.dumps(to_jsonable(result)) + "\n")
        self._file.flush()

    def update_config(self, config: dict) -> None:
        # Written via a temporary file and a rename: a crash never leaves half a params.json.
        self.config = config
        _write_json_atomically(os.path.join(self.logdir, EXPR_PARAM_FILE), config)

    def flush(self) -> None:
        if not self._file.closed:
            self._file.flush()

    def close(self) -> None:
        self._file.close()


def read_json_results(path: str) -> Iterator[dict[str, Any]]:
    """The results ``JsonLogger`` wrote to ``path`` (a ``result.json``), without their config.

    A line after the first that is not JSON is skipped: a run killed mid-write leaves
    its last line cut, and what came before it is still worth reading.

    Raises:
        ValueError: the first line is not JSON (naming ``path:1``): not a result file.
    """
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                result = json.loads(line)
            except json.JSONDecodeError:
                if number > 1:
                    continue
                raise ValueError(f"{path}:{number} is not JSON") from None
            if isinstance(result, dict):
                result.pop(CONFIG, None)
                yield result


class CSVLogger(Logger):
    """Writes each result as a row of ``progress.csv``, nested keys flattened with "/".

    The columns are those of the first row (or the header of an existing
    ``progress.csv`` being appended to); a key that first appears in a later
    result (evaluation results, a custom metric) becomes a new column: the file
    is rewritten once with the wider header, earlier rows holding empty cells
    there. ``config`` is left out, and values that are not scalars (lists,
    arrays such as ``hist_stats``) are skipped: CSV cells hold one value.
    """

    def _init(self) -> None:
        self._path = os.path.join(self.logdir, EXPR_PROGRESS_FILE)
        self._fieldnames = _existing_header(self._path)
        # Open for the logger's lifetime; close() releases it.
        self._file = open(self._path, "a", newline="")  # noqa: SIM115
        self._writer: csv.DictWriter | None = None

    def on_result(self, result: dict) -> None:
        row = _csv_row(result)
        if self._writer is None:
            self._start(row)
        assert self._writer is not None
        new = [k for k in row if k not in self._writer.fieldnames]
        if new:
            self._widen(new)
        self._writer.writerow(row)
        self._file.flush()

    def _start(self, first_row: dict[str, Any]) -> None:
        fieldnames = self._fieldnames or list(first_row)
        self._writer = csv.DictWriter(self._file, fieldnames=fieldnames, restval="")
        if not self._fieldnames:
            self._writer.writeheader()

    def _widen(self, new_keys: list[str]) -> None:
        """Rewrites the file with `new_keys` as extra columns (atomically, by a rename)."""
        assert self._writer is not None
        fieldnames = [*self._writer.fieldnames, *new_keys]
        self._file.close()
        with open(self._path, newline="") as f:
            rows = list(csv.DictReader(f))
        tmp = f"{self._path}.tmp"
        with open(tmp, "w", newline="") as f:
            writer = csv.DictWriter(f, fieldnames=fieldnames, restval="")
            writer.writeheader()
            writer.writerows(rows)
        os.replace(tmp, self._path)
        self._file = open(self._path, "a", newline="")  # noqa: SIM115
        self._writer = csv.DictWriter(self._file, fieldnames=fieldnames, restval="")

    def flush(self) -> None:
        if not self._file.closed:
            self._file.flush()

    def close(self) -> None:
        self._file.close()


def _existing_header(path: str) -> list[str]:
    """The header of a ``progress.csv`` being continued, so appended rows line up with it."""
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return next(csv.reader(f), [])


def _csv_row(result: Mapping[str, Any]) -> dict[str, Any]:
    flat = flatten_dict({k: v for k, v in result.items() if k != CONFIG})
    row = {}
    for key, value in flat.items():
        scalar = _as_scalar(value)
        if scalar is not None or value is None:
            row[key] = scalar
    return row


class TBXLogger(Logger):
    """TensorBoard scalars (and histograms of list values) for each result.

    Uses ``tensorboardX`` (the ``tensorboard`` extra) if importable, else
    ``torch.utils.tensorboard`` if the ``tensorboard`` package is installed;
    with neither it does nothing. Tags are RLlib's, ``ray/tune/<flattened key>``,
    so dashboards built for RLlib runs still find their curves. The step is
    ``timesteps_total`` when known, else ``training_iteration``.

    A result is one event: a single ``Summary`` holding all its values (what
    ``add_scalar`` per value would write as one event each; TensorBoard reads
    both alike): about a quarter of the time per result
    (``benchmarks/result_logging.py``).
    """

    # Bookkeeping keys: constant or monotone, plotting them only adds noise.
    _SKIPPED = (CONFIG, PID, TIMESTAMP, TIME_TOTAL_S, TRAINING_ITERATION)

    FLUSH_SECS = 1
    """The writer's own thread flushes new events to disk this often (a flush fsyncs the
    file: 1-6 ms here, paid off the training thread; flushing after every result cost a
    short PPO iteration up to a tenth of its time). `flush()` and `close()` flush at once."""

    def _init(self) -> None:
        self._api = tensorboard_api()
        self._writer = (
            self._api.writer_class(self.logdir, flush_secs=self.FLUSH_SECS) if self._api else None
        )
        # The writer's histogram bucket edges (a list of ~1,500 floats) as one array, made
        # once: `np.histogram` would convert the list on every histogram (about 40 % of
        # its time here), giving the same counts.
        self._bins: Any = None
        if self._writer is not None:
            import numpy as np

            self._bins = np.asarray(self._writer.default_bins, dtype=np.float64)

    def on_result(self, result: dict) -> None:
        if self._writer is None or self._api is None:
            return
        step = result.get(TIMESTEPS_TOTAL) or result.get(TRAINING_ITERATION, 0)
        values = flatten_dict({k: v for k, v in result.items() if k not in self._SKIPPED})
        summary = self._api.summary_class()
        for key, value in values.items():
            self._add(summary, f"ray/tune/{key}", value)
        if summary.value:
            # One event, through the file writer `add_scalar` itself writes with.
            self._writer._get_file_writer().add_summary(summary, global_step=step)

    def _add(self, summary: Any, tag: str, value: Any) -> None:
        assert self._api is not None and self._writer is not None
        tag = clean_tag(tag)
        scalar = _as_scalar(value)
        if isinstance(scalar, int | float) and not isinstance(scalar, bool):
            if math.isfinite(scalar):
                summary.value.add(tag=tag, simple_value=float(scalar))
        elif scalar is None and _is_nonempty_sequence(value):
            import numpy as np

            try:
                array = np.asarray(value, dtype=np.float64)
            except (TypeError, ValueError):
                return  # ragged or non-numeric: nothing sensible to plot
            array = array[np.isfinite(array)]
            if array.size:
                histogram = self._api.histogram(tag, array, self._bins)
                summary.value.extend(histogram.value)

    def flush(self) -> None:
        if self._writer is not None:
            self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()
            self._writer = None


# The characters a TensorBoard tag may not hold (tensorboardX's and TensorFlow's rule for
# `add_scalar` tags: they become `_`).
_INVALID_TAG_CHARACTERS = re.compile(r"[^-/\w.]")


def clean_tag(tag: str) -> str:
    """``tag`` as ``add_scalar`` would write it: invalid characters as ``_``, no leading ``/``."""
    return _INVALID_TAG_CHARACTERS.sub("_", tag).lstrip("/")


def _is_nonempty_sequence(value: Any) -> bool:
    if isinstance(value, list | tuple):
        return len(value) > 0
    return getattr(value, "ndim", 0) >= 1


class TensorBoardApi(NamedTuple):
    """What ``TBXLogger`` writes with: one TensorBoard writer library's pieces."""

    writer_class: type
    """``SummaryWriter``."""
    summary_class: type
    """The ``Summary`` protocol buffer its events hold."""
    histogram: Callable[..., Any]
    """``summary.histogram(tag, values, bins)``: a ``Summary`` with one histogram."""


# (package probed, SummaryWriter's module, summary builders' module, Summary proto's module)
_TENSORBOARD_LIBRARIES = (
    ("tensorboardX", "tensorboardX", "tensorboardX.summary", "tensorboardX.proto.summary_pb2"),
    (
        "tensorboard",
        "torch.utils.tensorboard",
        "torch.utils.tensorboard.summary",
        "tensorboard.compat.proto.summary_pb2",
    ),
)


def tensorboard_api() -> TensorBoardApi | None:
    """The TensorBoard writer library available here (tensorboardX first), or ``None``.

    ``find_spec`` first: probing must not import torch when TensorBoard is not
    installed at all.
    """
    for package, writer_module, summary_module, proto_module in _TENSORBOARD_LIBRARIES:
        if importlib.util.find_spec(package) is None:
            continue
        try:
            return TensorBoardApi(
                writer_class=importlib.import_module(writer_module).SummaryWriter,
                summary_class=importlib.import_module(proto_module).Summary,
                histogram=importlib.import_module(summary_module).histogram,
            )
        except (ImportError, AttributeError):
            log.debug("%s is installed but failed to import", writer_module, exc_info=True)
    log.debug("No TensorBoard writer (install corral[tensorboard]); TBXLogger is skipped")
    return None


DEFAULT_LOGGERS: tuple[type[Logger], ...] = (JsonLogger, CSVLogger, TBXLogger)


class UnifiedLogger(Logger):
    """Fans every call out to several loggers (by default JSON, CSV and TensorBoard).

    Args:
        loggers: logger classes to use; ``None`` means ``DEFAULT_LOGGERS``.
            ``TBXLogger`` is left out when no TensorBoard writer is installed.
    """

    def __init__(
        self,
        config: dict,
        logdir: str,
        trial: Any = None,
        loggers: Iterable[type[Logger]] | None = None,
    ) -> None:
        self._logger_classes = list(DEFAULT_LOGGERS if loggers is None else loggers)
        super().__init__(config, logdir, trial)

    def _init(self) -> None:
        classes = self._logger_classes
        if TBXLogger in classes and tensorboard_api() is None:
            classes = [cls for cls in classes if cls is not TBXLogger]
        self.loggers = [cls(self.config, self.logdir, self.trial) for cls in classes]

    def on_result(self, result: dict) -> None:
        for logger in self.loggers:
            logger.on_result(result)

    def update_config(self, config: dict) -> None:
        self.config = config
        for logger in self.loggers:
            logger.update_config(config)

    def flush(self) -> None:
        for logger in self.loggers:
            logger.flush()

    def close(self) -> None:
        for logger in self.loggers:
            logger.close()


class NoopLogger(Logger):
    """Writes nothing (Tune's name), e.g. ``logger_config={"type": NoopLogger}``."""

    def on_result(self, result: dict) -> None:
        pass


def logger_from_config(logger_config: Mapping[str, Any], logdir: str) -> Logger:
    """The logger RLlib 1.13's ``logger_config={"type": ..., "logdir": ..., **options}`` asks for.

    ``type`` is a ``Logger`` subclass or its dotted path (the user's own config:
    a checkpoint's saved config never names one, see
    ``corral.utils.checkpoint_config``); ``logdir`` defaults to the trial's
    folder; the other entries are the logger's options, handed over as its
    ``config``. A ``UnifiedLogger`` also takes ``loggers`` (classes), e.g. to
    keep the files and add Weights & Biases:
    ``{"type": UnifiedLogger, "loggers": [JsonLogger, CSVLogger, WandbLogger], "project": "x"}``.
    """
    options = dict(logger_config)
    kind = options.pop("type")
    logdir = options.pop("logdir", logdir)
    cls = _logger_class(kind)
    if issubclass(cls, UnifiedLogger):
        loggers = options.pop("loggers", None)
        return cls(options, logdir, loggers=[_logger_class(k) for k in loggers or DEFAULT_LOGGERS])
    return cls(options, logdir)


def _logger_class(kind: Any) -> type[Logger]:
    cls = kind
    if isinstance(kind, str):
        module_name, _, name = kind.rpartition(".")
        try:
            cls = getattr(importlib.import_module(module_name), name)
        except (ImportError, AttributeError, ValueError) as e:
            raise ValueError(
                f"logger_config.type {kind!r} cannot be imported ({e}); expected a Logger "
                "subclass or its dotted path"
            ) from None
    if not (isinstance(cls, type) and issubclass(cls, Logger)):
        raise TypeError(f"logger_config.type must be a Logger subclass, got {kind!r}")
    return cls


def pretty_print(result: Mapping[str, Any]) -> str:
    """A train result as readable YAML (Tune's `pretty_print`): `config` and `hist_stats`
    are left out, values that are not plain data are shown as text."""
    import yaml

    shown = {k: v for k, v in result.items() if k not in ("config", "hist_stats")}
    return yaml.safe_dump(to_jsonable(shown), default_flow_style=False, sort_keys=True)


# -- Tune 1.13's logger callbacks ----------------------------------------------------


class LoggerCallback(Callback):
    """Tune 1.13's base of logging callbacks (`tune.run(callbacks=[...])`): the trial
    events as `log_trial_start(trial)`, `log_trial_restore(trial)`,
    `log_trial_save(trial)`, `log_trial_result(iteration, trial, result)` and
    `log_trial_end(trial, failed)`, which subclasses override."""

    def log_trial_start(self, trial: Any) -> None:
        """A trial starts."""

    def log_trial_restore(self, trial: Any) -> None:
        """A trial was restored from a checkpoint."""

    def log_trial_save(self, trial: Any) -> None:
        """A trial saved a checkpoint."""

    def log_trial_result(self, iteration: int, trial: Any, result: dict) -> None:
        """A trial reported `result`."""

    def log_trial_end(self, trial: Any, failed: bool = False) -> None:
        """A trial ended (`failed`: with an error)."""

    def on_trial_start(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.log_trial_start(trial)

    def on_trial_restore(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.log_trial_restore(trial)

    def on_trial_save(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.log_trial_save(trial)

    def on_trial_result(
        self, iteration: int, trials: list, trial: Any, result: dict, **info: Any
    ) -> None:
        self.log_trial_result(iteration, trial, result)

    def on_trial_complete(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.log_trial_end(trial, failed=False)

    def on_trial_error(self, iteration: int, trials: list, trial: Any, **info: Any) -> None:
        self.log_trial_end(trial, failed=True)


class LegacyLoggerCallback(LoggerCallback):
    """Tune 1.13's callback of per-trial `Logger` classes: each class is instantiated
    once per trial (`cls(trial.config, trial.logdir, trial)`) and gets the trial's
    results (`on_result`); it is flushed and closed when the trial ends.

    Args:
        logger_classes: the `Logger` subclasses to run for every trial (one class alone
            is taken too, as RLlib 1.13's custom_logger example passes it).
    """

    def __init__(self, logger_classes: Iterable[type[Logger]] | type[Logger]) -> None:
        if isinstance(logger_classes, type):
            logger_classes = [logger_classes]
        self.logger_classes = list(logger_classes)
        for cls in self.logger_classes:
            if not (isinstance(cls, type) and issubclass(cls, Logger)):
                raise TypeError(f"LegacyLoggerCallback takes Logger subclasses, got {cls!r}.")
        self._trial_loggers: dict[Any, list[Logger]] = {}

    def _loggers_of(self, trial: Any) -> list[Logger]:
        loggers = self._trial_loggers.get(trial)
        if loggers is None:
            loggers = [cls(trial.config, trial.logdir, trial) for cls in self.logger_classes]
            self._trial_loggers[trial] = loggers
        return loggers

    def log_trial_start(self, trial: Any) -> None:
        for logger_ in self._loggers_of(trial):
            logger_.update_config(trial.config)

    def log_trial_result(self, iteration: int, trial: Any, result: dict) -> None:
        for logger_ in self._loggers_of(trial):
            logger_.on_result(result)

    def log_trial_end(self, trial: Any, failed: bool = False) -> None:
        for logger_ in self._trial_loggers.pop(trial, []):
            logger_.flush()
            logger_.close()


class JsonLoggerCallback(LegacyLoggerCallback):
    """Tune 1.13's callback form of `JsonLogger` (`result.json`, `params.json`)."""

    def __init__(self) -> None:
        super().__init__([JsonLogger])


class CSVLoggerCallback(LegacyLoggerCallback):
    """Tune 1.13's callback form of `CSVLogger` (`progress.csv`)."""

    def __init__(self) -> None:
        super().__init__([CSVLogger])


class TBXLoggerCallback(LegacyLoggerCallback):
    """Tune 1.13's callback form of `TBXLogger` (TensorBoard event files)."""

    def __init__(self) -> None:
        super().__init__([TBXLogger])
