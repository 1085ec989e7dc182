"""`MetricsLogger`: a tree of `Stats` addressed by (nested) keys.

Learners log per minibatch and hand `reduce()`'s result (a nested dict with
`Stats` leaves) to whoever collects them; a collector merges several such
results with `aggregate()`. Leaves are kept in a flat dict keyed by the path
tuple so that `log_value` (called a few times per minibatch) is one dict
lookup and one append.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any, overload

from corral.utils.metrics.stats import Stats

Key = str | tuple[str, ...]
Path = tuple[str, ...]

_NOT_GIVEN: Any = object()


def _as_path(key: Key) -> Path:
    if isinstance(key, str):
        return (key,)
    path = tuple(key)
    if not path or not all(isinstance(part, str) for part in path):
        raise ValueError(f"a metrics key is a str or a non-empty tuple of str, got {key!r}")
    return path


def _leaves(tree: Mapping[str, Any], prefix: Path = ()) -> Iterator[tuple[Path, Any]]:
    """Yield (path, leaf) for every non-mapping value in a nested mapping."""
    for name, value in tree.items():
        path = (*prefix, name)
        if isinstance(value, Mapping):
            yield from _leaves(value, path)
        else:
            yield path, value


def _nest(items: Iterable[tuple[Path, Any]]) -> dict[str, Any]:
    """Build a nested dict from (path, value) pairs."""
    tree: dict[str, Any] = {}
    for path, value in items:
        node = tree
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return tree


def stats_to_values(tree: Any) -> Any:
    """Turn a nested dict with `Stats` leaves into the same nesting of plain values.

    Used to put learner results (from `MetricsLogger.reduce()`) into a result
    dict that must be printable and JSON-serialisable. Non-Stats leaves are
    returned as they are.

    Args:
        tree: A Stats, or a (nested) mapping whose leaves may be Stats.
    """
    if isinstance(tree, Stats):
        return tree.peek()
    if isinstance(tree, Mapping):
        return {name: stats_to_values(value) for name, value in tree.items()}
    return tree


class MetricsLogger:
    """Collects metric values under nested keys and reduces them on demand.

    Keys are a str (one level) or a tuple of str (a path, e.g.
    ("default_policy", "total_loss")). A path is either a leaf (holding a
    Stats) or a group of leaves, never both.
    """

    def __init__(self) -> None:
        self._stats: dict[Path, Stats] = {}
        # Every proper prefix of a leaf path: O(1) "is this a group?" checks.
        self._groups: set[Path] = set()

    # ------------------------------------------------------------------ logging

    def log_value(
        self,
        key: Key,
        value: Any,
        reduce: str | None = "mean",
        window: int | float | None = None,
        ema_coeff: float | None = None,
        clear_on_reduce: bool = False,
    ) -> None:
        """Push one value under `key`, creating the Stats on first use.

        The reduction settings only take effect when the key is new; later
        calls push into the existing Stats and their settings are ignored.

        Args:
            key: A str or a tuple of str (nested path).
            value: The value to push (number, numpy scalar, one-element
                tensor), or a Stats whose values are appended.
            reduce: "mean", "min", "max", "sum" or None (keep a list).
            window: Reduce over only the most recent `window` values.
            ema_coeff: EMA coefficient for reduce="mean" without a window.
            clear_on_reduce: Empty the Stats whenever it is reduced.
        """
        # A tuple key that is already a leaf is its own path (the common case: a learner
        # logs the same keys every minibatch); anything else is checked and normalised.
        stats = self._stats.get(key) if type(key) is tuple else None
        if stats is None:
            path = (key,) if type(key) is str else _as_path(key)
            stats = self._stats.get(path)
        if stats is None:
            stats = Stats(
                reduce=reduce, window=window, ema_coeff=ema_coeff, clear_on_reduce=clear_on_reduce
            )
            self._add(path, stats)
        if isinstance(value, Stats):
            stats.extend(value)
        else:
            stats.push(value)

    def log_dict(
        self,
        values: Mapping[str, Any],
        key: Key | None = None,
        reduce: str | None = "mean",
        window: int | float | None = None,
        ema_coeff: float | None = None,
        clear_on_reduce: bool = False,
    ) -> None:
        """Log every leaf of a (nested) dict, each under its own path.

        Args:
            values: The (nested) dict; its leaves are logged with `log_value`.
            key: Optional key prefix to log the dict under.
            reduce: Reduction for keys that are new (see `log_value`).
            window: Window for keys that are new.
            ema_coeff: EMA coefficient for keys that are new.
            clear_on_reduce: clear_on_reduce for keys that are new.
        """
        prefix = () if key is None else _as_path(key)
        for path, value in _leaves(values, prefix):
            self.log_value(path, value, reduce, window, ema_coeff, clear_on_reduce)

    def _add(self, path: Path, stats: Stats) -> None:
        if path in self._groups:
            raise KeyError(f"metrics key {path} already holds nested keys, it can't be a leaf")
        for end in range(1, len(path)):
            if path[:end] in self._stats:
                raise KeyError(f"metrics key {path[:end]} is a leaf, it can't hold {path}")
        self._stats[path] = stats
        self._groups.update(path[:end] for end in range(1, len(path)))

    # ------------------------------------------------------------------ reading

    def _select(self, key: Key | None) -> tuple[Path, list[tuple[Path, Stats]]] | None:
        """Leaves under `key` as (path relative to key, Stats); None if key is unknown."""
        if key is None:
            return (), list(self._stats.items())
        path = _as_path(key)
        if path in self._stats:
            return path, [((), self._stats[path])]
        if path not in self._groups:
            return None
        n = len(path)
        return path, [(p[n:], s) for p, s in self._stats.items() if p[:n] == path]

    def __contains__(self, key: Key) -> bool:
        path = _as_path(key)
        return path in self._stats or path in self._groups

    def peek(self, key: Key | None = None, default: Any = _NOT_GIVEN) -> Any:
        """The reduced value(s) without changing any state.

        Args:
            key: A leaf key (gives its value), a group key (gives a nested
                dict of values below it), or None (all metrics).
            default: Returned if `key` is unknown; without it a KeyError is raised.
        """
        selected = self._select(key)
        if selected is None:
            if default is _NOT_GIVEN:
                raise KeyError(key)
            return default
        _, leaves = selected
        if len(leaves) == 1 and leaves[0][0] == ():
            return leaves[0][1].peek()
        return _nest((p, s.peek()) for p, s in leaves)

    @overload
    def reduce(self, key: None = None) -> dict[str, Any]: ...

    @overload
    def reduce(self, key: Key) -> dict[str, Any] | Stats: ...

    def reduce(self, key: Key | None = None) -> dict[str, Any] | Stats:
        """Reduce the metrics under `key` and return the results as Stats.

        Each leaf is reduced (see `Stats.reduce`, which may clear it); the
        returned Stats are new objects, safe to hand to another logger's
        `aggregate` or to reduce again.

        Args:
            key: A leaf key (returns its reduced Stats), a group key (nested
                dict below it), or None (all metrics). Unknown keys raise KeyError.
        """
        selected = self._select(key)
        if selected is None:
            raise KeyError(key)
        _, leaves = selected
        if len(leaves) == 1 and leaves[0][0] == ():
            return leaves[0][1].reduce()
        return _nest((p, s.reduce()) for p, s in leaves)

    # ------------------------------------------------------------------ merging

    def aggregate(self, stats_dicts: Iterable[Mapping[str, Any]], key: Key | None = None) -> None:
        """Merge results of parallel components (e.g. several learners) into this logger.

        Per leaf path, the Stats of all dicts that have it are combined with
        `Stats.merge` (means averaged, sums added, ...); the combined value
        is then pushed into this logger's Stats at that path, or becomes it
        when the path is new. `peek()`/`reduce()` then give combined values.

        Args:
            stats_dicts: Nested dicts with Stats leaves, as returned by
                `reduce()` of each component.
            key: Optional key prefix to merge the results under.
        """
        prefix = () if key is None else _as_path(key)
        grouped: dict[Path, list[Stats]] = {}
        for tree in stats_dicts:
            for path, leaf in _leaves(tree, prefix):
                if not isinstance(leaf, Stats):
                    raise TypeError(
                        f"aggregate needs Stats leaves, got {type(leaf).__name__} at {path}"
                    )
                grouped.setdefault(path, []).append(leaf)
        for path, parallel in grouped.items():
            merged = Stats.merge(parallel)
            existing = self._stats.get(path)
            if existing is None:
                self._add(path, merged)
            else:
                existing.extend(merged)

    # ------------------------------------------------------------------ state

    def reset(self) -> None:
        """Forget all metrics."""
        self._stats.clear()
        self._groups.clear()

    def get_state(self) -> dict[str, Any]:
        """A JSON-serialisable dict of all metrics (for checkpoints)."""
        return {
            "stats": [
                {"key": list(path), "state": stats.get_state()}
                for path, stats in self._stats.items()
            ]
        }

    def set_state(self, state: Mapping[str, Any]) -> None:
        """Replace all metrics with those in `state`.

        Args:
            state: The dict `get_state()` returned (possibly through JSON).
        """
        self.reset()
        for entry in state.get("stats", []):
            self._add(tuple(entry["key"]), Stats.from_state(entry["state"]))
