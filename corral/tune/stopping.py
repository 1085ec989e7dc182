"""Stop criteria of a trial: the one rule ``tune.run`` and ``corral train`` apply.

A criterion ``{key: threshold}`` is met once ``result[key] >= threshold``; nested keys
are named by their path joined by "/" (``"evaluation/episode_reward_mean"``), as in
``progress.csv``. A trial stops when any criterion is met or a result says ``done``.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Callable, Mapping
from typing import Any, TypeGuard

from corral.tune.logger import flatten_dict
from corral.tune.result import CONFIG, DONE, RESULT_SECTIONS

# ``stop(trial_id, result) -> bool``, the callable form ``tune.run(stop=...)`` takes.
StopFn = Callable[[str, dict], bool]


def lookup_result(result: Mapping, key: str, default: Any = None) -> Any:
    """``result[key]``, ``key`` being a "/"-joined path into nested dicts; ``default`` if absent.

    A key present as it is (a flattened result, as read back from ``progress.csv``)
    is found too. Any nested mapping can be read this way (config paths as well).
    """
    if key in result:
        return result[key]
    value: Any = result
    for part in key.split("/"):
        if not isinstance(value, Mapping) or part not in value:
            return default
        value = value[part]
    return value


def is_number(value: Any) -> TypeGuard[float]:
    """A real number that is not NaN: what a criterion or a "best" can compare."""
    return isinstance(value, int | float) and not isinstance(value, bool) and not math.isnan(value)


def met_criterion(stop: Mapping[str, float], result: Mapping) -> tuple[str, float] | None:
    """The first criterion of ``stop`` that ``result`` meets, as (key, value); None if none.

    A missing value, None or NaN meets nothing (a NaN mean return before the first
    episode ends must not stop a run).

    Raises:
        ValueError: a key the result does not have, outside the sections results
            fill only in some iterations (``evaluation/...``, ``info/...``, see
            ``RESULT_SECTIONS``): most likely a typo; the message names close matches.
            Or a value that is not a number.
    """
    for key, threshold in stop.items():
        value = lookup_result(result, key)
        if value is None:
            _check_may_be_missing(key, result)
            continue
        if isinstance(value, bool):
            value = int(value)
        if not isinstance(value, int | float):
            raise ValueError(
                f"Stop criterion {key!r}: the result's value {value!r} is not a number"
            )
        if not math.isnan(value) and value >= threshold:
            return key, value
    return None


def _check_may_be_missing(key: str, result: Mapping) -> None:
    head, _, rest = str(key).partition("/")
    if head in RESULT_SECTIONS and rest:
        return  # e.g. no evaluation this iteration, or no learner stats yet
    flat = flatten_dict({k: v for k, v in result.items() if k != CONFIG})
    close = difflib.get_close_matches(str(key), list(flat), n=3)
    raise ValueError(
        f"Stop criterion {key!r} is not a key of the training result"
        + (f"; did you mean {close}?" if close else f"; keys: {sorted(flat)}")
    )


def should_stop(stop: Mapping[str, float], result: Mapping) -> bool:
    """Whether a trial stops after ``result``: it is ``done`` or meets a criterion of ``stop``."""
    return bool(result.get(DONE)) or met_criterion(stop, result) is not None


def stop_condition(stop: Mapping[str, Any] | StopFn | None) -> StopFn:
    """``tune.run``'s ``stop`` argument as a ``StopFn`` (None: never; ``done`` still ends)."""
    if stop is None:
        return lambda trial_id, result: False
    if isinstance(stop, Mapping):
        criteria = dict(stop)
        return lambda trial_id, result: met_criterion(criteria, result) is not None
    if callable(stop):
        return stop
    raise TypeError(f"stop must be a dict, a callable or None, got {stop!r}")


def metric_value(result: Mapping, metric: str) -> float | None:
    """``result``'s value of ``metric`` (nested keys joined by "/") as a finite float, or None.

    What ranks checkpoints (``checkpoint_score_attr``) and trials (``get_best_trial``).
    """
    value = lookup_result({k: v for k, v in result.items() if k != CONFIG}, metric)
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None
