"""`Stats`: one metric's logged values plus the rule that reduces them.

A learner pushes a value per minibatch and reduces once per training
iteration; the reduced result is itself a `Stats`, so results of several
learners (or several iterations) can be merged and reduced again without
anyone having to know how each metric is meant to be combined.
"""

from __future__ import annotations

import math
import numbers
import sys
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

ALLOWED_REDUCE = ("mean", "min", "max", "sum", None)

DEFAULT_EMA_COEFF = 0.01


def _mean(values: Sequence[Any]) -> float:
    # NaNs propagate on purpose: a NaN loss should be seen, not averaged away.
    return sum(values) / len(values) if values else math.nan


def _min(values: Sequence[Any]) -> Any:
    return min(values) if values else math.nan


def _max(values: Sequence[Any]) -> Any:
    return max(values) if values else math.nan


def _sum(values: Sequence[Any]) -> Any:
    return sum(values)


# How parallel components' values combine: one value per component, each
# component weighted equally (learners train on equally sized shards).
_COMBINE: dict[str, Callable[[Sequence[Any]], Any]] = {
    "mean": _mean,
    "min": _min,
    "max": _max,
    "sum": _sum,
}


def _ema(values: Sequence[Any], coeff: float) -> float:
    if not values:
        return math.nan
    it = iter(values)
    result = float(next(it))
    for value in it:
        result = (1.0 - coeff) * result + coeff * value
    return result


def _torch_tensor_type() -> type | None:
    # Only look torch up if someone already imported it: no tensor can exist
    # otherwise, and importing torch here would slow down every import.
    torch = sys.modules.get("torch")
    return None if torch is None else torch.Tensor


def _is_tensor(value: Any) -> bool:
    tensor_type = _torch_tensor_type()
    return tensor_type is not None and isinstance(value, tensor_type)


def _validate_window(window: int | float | None) -> int | None:
    if window is None or window == math.inf:
        return None
    if isinstance(window, bool) or not isinstance(window, numbers.Integral) or window < 1:
        raise ValueError(f"window must be a positive int, None or float('inf'), got {window!r}")
    return int(window)


class Stats:
    """The values logged under one metric key and how to reduce them.

    Reductions: "mean", "min", "max", "sum" produce one number; None keeps
    every value and `peek()`/`reduce()` give the list.

    Window semantics differ on purpose between None and inf for "mean":
    `window=None` means an exponential moving average (RLlib's default,
    smoothing across iterations), `window=float("inf")` means the plain mean
    of all values held (pair it with `clear_on_reduce=True` to get an exact
    per-iteration mean; without clearing, every value ever logged is kept).
    """

    __slots__ = ("_reduce", "_window", "_ema_coeff", "_clear_on_reduce", "_values", "_n_tensors")

    # Mutable and compared by value: must not be used as a dict key.
    __hash__ = None  # type: ignore[assignment]

    def __init__(
        self,
        init_value: Any = None,
        reduce: str | None = "mean",
        window: int | float | None = None,
        ema_coeff: float | None = None,
        clear_on_reduce: bool = False,
    ) -> None:
        """Create a Stats, optionally holding one first value.

        Args:
            init_value: First value to hold (None: start empty).
            reduce: How to reduce the values: "mean", "min", "max", "sum",
                or None to keep all values and report them as a list.
            window: Only the most recent `window` values are kept and
                reduced. None or float("inf") keeps all (see the class
                docstring for how the two differ for "mean").
            ema_coeff: Weight of each new value in an exponential moving
                average; only for reduce="mean" without a finite window.
                Defaults to 0.01 when reduce="mean" and window is None.
            clear_on_reduce: Empty this Stats on every `reduce()`, so each
                reduction only covers values logged since the last one.
        """
        if reduce not in ALLOWED_REDUCE:
            raise ValueError(f"reduce must be one of {list(ALLOWED_REDUCE)}, got {reduce!r}")
        window_is_none = window is None
        window = _validate_window(window)
        if ema_coeff is not None:
            if reduce != "mean":
                raise ValueError(f"ema_coeff needs reduce='mean', got reduce={reduce!r}")
            if window is not None:
                raise ValueError("ema_coeff and a finite window exclude each other")
            if not 0.0 < ema_coeff <= 1.0:
                raise ValueError(f"ema_coeff must be in (0, 1], got {ema_coeff!r}")
        elif reduce == "mean" and window_is_none:
            ema_coeff = DEFAULT_EMA_COEFF
        self._reduce = reduce
        self._window = window
        self._ema_coeff = None if ema_coeff is None else float(ema_coeff)
        self._clear_on_reduce = bool(clear_on_reduce)
        self._values: deque[Any] = deque(maxlen=window)
        self._n_tensors = 0
        if init_value is not None:
            self.push(init_value)

    # ------------------------------------------------------------------ settings

    @property
    def reduce_method(self) -> str | None:
        """The reduction ("mean", "min", "max", "sum" or None)."""
        return self._reduce

    @property
    def window(self) -> int | None:
        """The window size; None when all values are kept."""
        return self._window

    @property
    def ema_coeff(self) -> float | None:
        """The EMA coefficient; None when "mean" is a plain mean or reduce isn't "mean"."""
        return self._ema_coeff

    @property
    def clear_on_reduce(self) -> bool:
        """Whether `reduce()` empties this Stats."""
        return self._clear_on_reduce

    def _empty_like(self) -> Stats:
        """A Stats with this one's settings and no values."""
        new = Stats.__new__(Stats)
        new._reduce = self._reduce
        new._window = self._window
        new._ema_coeff = self._ema_coeff
        new._clear_on_reduce = self._clear_on_reduce
        new._values = deque(maxlen=self._window)
        new._n_tensors = 0
        return new

    # ------------------------------------------------------------------ values

    def push(self, value: Any) -> None:
        """Add one value.

        Args:
            value: A python number, numpy scalar / one-element array, or a
                one-element torch tensor. Tensors are kept (detached) and only
                copied to the host when the values are read, so pushing per
                minibatch does not force a GPU sync. With reduce=None any
                object is accepted.
        """
        cls = type(value)
        if cls is not float and cls is not int:
            value = self._convert(value)
        self._values.append(value)

    def _convert(self, value: Any) -> Any:
        if isinstance(value, np.generic | np.ndarray):
            if value.size == 1:
                return value.item()
            if self._reduce is None:
                return value
            raise ValueError(f"Stats with reduce={self._reduce!r} needs scalars, got {value!r}")
        if _is_tensor(value):
            if value.numel() != 1:
                if self._reduce is None:
                    return value.detach()
                raise ValueError(
                    f"Stats with reduce={self._reduce!r} needs one-element tensors, "
                    f"got shape {tuple(value.shape)}"
                )
            self._n_tensors += 1
            return value.detach()
        if isinstance(value, Stats):
            raise TypeError("push a number, not a Stats (use merge_in_parallel to combine Stats)")
        if isinstance(value, numbers.Real) or self._reduce is None:
            return value
        raise TypeError(
            f"Stats with reduce={self._reduce!r} needs numbers, got {type(value).__name__}"
        )

    def _materialize(self) -> deque[Any]:
        """Turn held scalar tensors into python numbers, in one host copy if possible."""
        if not self._n_tensors:
            return self._values
        import torch

        positions = [
            i for i, v in enumerate(self._values) if isinstance(v, torch.Tensor) and v.numel() == 1
        ]
        tensors = [self._values[i].reshape(()) for i in positions]
        try:
            numbers_ = torch.stack(tensors).tolist()
        except (RuntimeError, TypeError):  # mixed devices or dtypes
            numbers_ = [t.item() for t in tensors]
        for i, number in zip(positions, numbers_):
            self._values[i] = number
        self._n_tensors = 0
        return self._values

    def values(self) -> list[Any]:
        """The values currently held, oldest first (tensors turned into numbers)."""
        return list(self._materialize())

    def __len__(self) -> int:
        return len(self._values)

    # ------------------------------------------------------------------ reduction

    def _reduced(self) -> Any:
        values = self._materialize()
        if self._reduce is None:
            return list(values)
        if self._ema_coeff is not None:
            return _ema(values, self._ema_coeff)
        return _COMBINE[self._reduce](values)

    def peek(self) -> Any:
        """The reduced value, leaving the held values untouched.

        Empty: nan for mean/min/max, 0 for sum, [] for reduce=None.
        """
        return self._reduced()

    def reduce(self) -> Stats:
        """Reduce the held values and return the result as a new Stats.

        Afterwards this Stats holds only what future reductions need: nothing
        if `clear_on_reduce`, else the window's values (finite window), all
        values (plain unbounded mean, reduce=None), or the one reduced value
        (EMA, sum, min, max: exact to continue from).
        """
        reduced = self._reduced()
        result = self._empty_like()
        if self._reduce is None:
            result._values.extend(reduced)
        elif self._values:
            result._values.append(reduced)
        if self._clear_on_reduce:
            self._values.clear()
        elif self._collapses():
            self._values.clear()
            if result._values:
                self._values.append(reduced)
        return result

    def _collapses(self) -> bool:
        """Whether the reduced value can stand in for all held values."""
        if self._window is not None or self._reduce is None:
            return False
        return self._reduce != "mean" or self._ema_coeff is not None

    # ------------------------------------------------------------------ merging

    @classmethod
    def merge(cls, stats: Iterable[Stats]) -> Stats:
        """Combine Stats of parallel components into a new Stats (inputs untouched).

        Each non-empty input contributes its reduced value: means are averaged
        with equal weight, sums added, min/max taken; reduce=None lists are
        concatenated. The result has the first input's settings.

        Args:
            stats: The Stats to combine; all must use the same reduction.
        """
        stats = list(stats)
        if not stats:
            raise ValueError("Stats.merge needs at least one Stats")
        first = stats[0]
        for other in stats[1:]:
            if other._reduce != first._reduce:
                raise ValueError(
                    f"cannot merge Stats with reduce={first._reduce!r} and {other._reduce!r}"
                )
        result = first._empty_like()
        if first._reduce is None:
            for other in stats:
                result._values.extend(other._materialize())
        else:
            peeks = [other._reduced() for other in stats if other._values]
            if peeks:
                result._values.append(_COMBINE[first._reduce](peeks))
        return result

    def merge_in_parallel(self, *others: Stats) -> None:
        """Replace this Stats' values with the combination of itself and `others`.

        Args:
            others: Stats of parallel components to combine with this one
                (see `merge` for how values combine); they are not changed.
        """
        merged = Stats.merge([self, *others])
        self._values = merged._values
        self._n_tensors = 0

    def extend(self, other: Stats) -> None:
        """Push all values of `other` (e.g. a reduced result) into this Stats, oldest first.

        Args:
            other: The Stats whose values follow this one's in time.
        """
        self._values.extend(other._materialize())

    # ------------------------------------------------------------------ conversions

    def __float__(self) -> float:
        return float(self._reduced())

    def __int__(self) -> int:
        return int(self._reduced())

    def __format__(self, format_spec: str) -> str:
        return format(self._reduced(), format_spec)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Stats):
            return self._reduced() == other._reduced()
        try:
            return self._reduced() == other
        except TypeError:
            return NotImplemented

    def __repr__(self) -> str:
        settings = f"reduce={self._reduce!r}, window={self._window}"
        if self._ema_coeff is not None:
            settings += f", ema_coeff={self._ema_coeff}"
        if self._clear_on_reduce:
            settings += ", clear_on_reduce=True"
        return f"Stats({self._reduced()!r}; len={len(self)}, {settings})"

    # ------------------------------------------------------------------ checkpointing

    def get_state(self) -> dict[str, Any]:
        """A JSON-serialisable dict holding settings and values (for checkpoints)."""
        return {
            "reduce": self._reduce,
            "window": self._window,
            "ema_coeff": self._ema_coeff,
            "clear_on_reduce": self._clear_on_reduce,
            "values": list(self._materialize()),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> Stats:
        """Rebuild a Stats from `get_state()`'s output.

        Args:
            state: The dict `get_state()` returned (possibly through JSON).
        """
        window = state.get("window")
        stats = cls(
            reduce=state.get("reduce", "mean"),
            # The state stores the resolved settings: an absent window is
            # "keep all", and ema_coeff is already filled in when wanted.
            window=math.inf if window is None else window,
            ema_coeff=state.get("ema_coeff"),
            clear_on_reduce=state.get("clear_on_reduce", False),
        )
        stats._values.extend(state.get("values", []))
        return stats
