"""Observation filters: per-worker running statistics that are merged on the driver.

Each rollout worker owns one filter per policy (``observation_filter`` config key) and
applies it to every (preprocessed) observation it samples. A filter keeps two sets of
statistics: ``running_stats``, everything it knows (what it normalises with), and
``buffer``, only what it saw since the driver last collected it. The driver merges the
workers' buffers into its own filter (:meth:`Filter.apply_changes`) and pushes the merged
statistics back (:meth:`Filter.sync`), so every worker normalises the same way and no
observation is counted twice (:class:`FilterManager`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from corral.utils.keyword_aliases import keyword_aliases


class Filter:
    """Base class: maps an observation (or a batch of them) to a filtered one."""

    # Whether one instance may be called from several threads at once (RLlib 1.13's
    # flag; an async sampler needs it).
    is_concurrent: bool = False

    def __call__(self, obs: Any, update: bool = True) -> Any:
        raise NotImplementedError

    def apply_changes(self, other: Filter, with_buffer: bool = False) -> None:
        """Merge what ``other`` saw since its last flush into this filter."""
        raise NotImplementedError

    def copy(self) -> Filter:
        raise NotImplementedError

    def sync(self, other: Filter) -> None:
        """Take over ``other``'s statistics, in place (references to self stay valid)."""
        raise NotImplementedError

    def clear_buffer(self) -> None:
        """Forget the changes since the last flush (they were collected by the driver)."""
        if type(self).reset_buffer is not Filter.reset_buffer:
            self.reset_buffer()  # a filter written for RLlib 1.13 (its name)
            return
        raise NotImplementedError

    def reset_buffer(self) -> None:
        """RLlib 1.13's name of `clear_buffer`."""
        self.clear_buffer()

    def as_serializable(self) -> Filter:
        return self.copy()

    def get_state(self) -> dict[str, Any]:
        """A JSON-able dict (checkpoints store it in ``worker_state.json``)."""
        raise NotImplementedError

    def set_state(self, state: dict[str, Any]) -> None:
        raise NotImplementedError


class NoFilter(Filter):
    """The identity filter (``observation_filter: "NoFilter"``): the sampler skips it."""

    is_concurrent = True

    def __call__(self, obs: Any, update: bool = True) -> Any:
        return obs

    def apply_changes(self, other: Filter, with_buffer: bool = False) -> None:
        pass

    def copy(self) -> NoFilter:
        return self

    def sync(self, other: Filter) -> None:
        pass

    def clear_buffer(self) -> None:
        pass

    def get_state(self) -> dict[str, Any]:
        return {"type": "NoFilter"}

    def set_state(self, state: dict[str, Any]) -> None:
        pass


class RunningStat:
    """Count, mean and sum of squared deviations (``m2``) of a stream of arrays.

    Welford's update, generalised to merging whole batches or other ``RunningStat`` s
    (Chan, Golub & LeVeque 1979): merging is exact, so the driver's merge of several
    workers' statistics equals the statistics of all their observations together.

    As in RLlib 1.13, ``n``, ``mean``, ``var``, ``std`` and ``shape`` are read-only
    properties; the statistics change through `push`, `push_batch`, `update` and
    `set_state`.

    Args:
        shape: the shape of one observation (None: a scalar, ``()``).
    """

    def __init__(self, shape: Sequence[int] | None = ()) -> None:
        self._shape = tuple(int(s) for s in (shape or ()))
        self._n = 0
        self._mean = np.zeros(self._shape, np.float64)
        self._m2 = np.zeros(self._shape, np.float64)

    @property
    def n(self) -> int:
        """How many observations the statistics hold."""
        return self._n

    @property
    def mean(self) -> np.ndarray:
        """Their mean, of `shape` (zeros before the first)."""
        return self._mean

    @property
    def m2(self) -> np.ndarray:
        """Their sum of squared deviations from `mean` (RLlib 1.13's private ``_S``)."""
        return self._m2

    @property
    def shape(self) -> tuple[int, ...]:
        """The shape of one observation."""
        return self._shape

    def _merge(self, n: int, mean: np.ndarray, m2: np.ndarray) -> None:
        if n == 0:
            return
        total = self._n + n
        delta = mean - self._mean
        self._mean = self._mean + delta * (n / total)
        self._m2 = self._m2 + m2 + delta * delta * (self._n * n / total)
        self._n = total

    def push(self, x: np.ndarray) -> None:
        """Add one observation of `shape`.

        Raises:
            ValueError: `x` is not of `shape` (as RLlib 1.13's).
        """
        x = np.asarray(x, np.float64)
        if x.shape != self._shape:
            raise ValueError(
                f"RunningStat.push: an observation of shape {self._shape} was expected, got "
                f"one of shape {x.shape}: {x}."
            )
        self._merge(1, x, np.zeros_like(x))

    def push_batch(self, xs: np.ndarray) -> None:
        """Add a batch ``[B, *shape]`` in one vectorised merge."""
        xs = np.asarray(xs, np.float64)
        if len(xs) == 0:
            return
        mean = xs.mean(axis=0)
        self._merge(len(xs), mean, ((xs - mean) ** 2).sum(axis=0))

    def update(self, other: RunningStat) -> None:
        """Merge ``other``'s observations into this one."""
        self._merge(other.n, other.mean, other.m2)

    @property
    def var(self) -> np.ndarray:
        """Sample variance (``ddof=1``); while fewer than two observations arrived,
        ``mean ** 2`` (RLlib 1.13's: zeros before the first, the observation squared
        after it)."""
        if self._n < 2:
            return np.square(self._mean)
        return self._m2 / (self._n - 1)

    @property
    def std(self) -> np.ndarray:
        """``sqrt(var)``."""
        return np.sqrt(self.var)

    def copy(self) -> RunningStat:
        out = RunningStat(self._shape)
        out._n, out._mean, out._m2 = self._n, self._mean.copy(), self._m2.copy()
        return out

    def get_state(self) -> dict[str, Any]:
        return {"n": self._n, "mean": self._mean.tolist(), "m2": self._m2.tolist()}

    def set_state(self, state: dict[str, Any]) -> None:
        self._n = int(state["n"])
        self._mean = np.asarray(state["mean"], np.float64).reshape(self._shape)
        self._m2 = np.asarray(state["m2"], np.float64).reshape(self._shape)

    def __repr__(self) -> str:
        return (
            f"RunningStat(n={self._n}, mean_mean={np.mean(self._mean)}, "
            f"mean_std={np.mean(self.std)})"
        )


class MeanStdFilter(Filter):
    """Normalises observations to zero mean and unit variance with running statistics.

    ``y = clip((x - mean) / (std + 1e-8), -clip, clip)``. With ``update=True`` (sampling)
    the observation is added to the statistics first, as RLlib 1.x did; acting outside of
    sampling (``Trainer.compute_single_action``) passes ``update=False``.

    Args:
        shape: shape of one observation; calls with one more leading axis are batches.
        demean: subtract the running mean.
        destd: divide by the running standard deviation.
        clip: clip the result to ``[-clip, clip]`` (None: no clipping).
    """

    def __init__(
        self,
        shape: Sequence[int],
        demean: bool = True,
        destd: bool = True,
        clip: float | None = 10.0,
    ) -> None:
        self.shape = tuple(int(s) for s in shape)
        self.demean = demean
        self.destd = destd
        self.clip = clip
        self.running_stats = RunningStat(self.shape)
        self.buffer = RunningStat(self.shape)

    @property
    def rs(self) -> RunningStat:
        """RLlib 1.13's name of `running_stats`."""
        return self.running_stats

    def __call__(self, obs: Any, update: bool = True) -> np.ndarray:
        x = np.asarray(obs, np.float64)
        batched = x.ndim == len(self.shape) + 1
        if not batched and x.shape != self.shape:
            raise ValueError(
                f"MeanStdFilter of shape {self.shape} got an observation of shape {x.shape}."
            )
        if update:
            if batched:
                self.running_stats.push_batch(x)
                self.buffer.push_batch(x)
            else:
                self.running_stats.push(x)
                self.buffer.push(x)
        if self.demean:
            x = x - self.running_stats.mean
        if self.destd:
            x = x / (self.running_stats.std + 1e-8)
        if self.clip is not None:
            x = np.clip(x, -self.clip, self.clip)
        return x.astype(np.float32)

    def apply_changes(self, other: Filter, with_buffer: bool = False) -> None:
        if not isinstance(other, MeanStdFilter):
            raise TypeError(f"Cannot merge a {type(other).__name__} into a MeanStdFilter.")
        self.running_stats.update(other.buffer)
        if with_buffer:
            self.buffer = other.buffer.copy()

    def copy(self) -> MeanStdFilter:
        out = MeanStdFilter(self.shape, self.demean, self.destd, self.clip)
        out.sync(self)
        return out

    def sync(self, other: Filter) -> None:
        if not isinstance(other, MeanStdFilter):
            raise TypeError(f"Cannot sync a MeanStdFilter from a {type(other).__name__}.")
        self.demean, self.destd, self.clip = other.demean, other.destd, other.clip
        self.running_stats = other.running_stats.copy()
        self.buffer = other.buffer.copy()

    def clear_buffer(self) -> None:
        self.buffer = RunningStat(self.shape)

    def get_state(self) -> dict[str, Any]:
        return {
            "type": "MeanStdFilter",
            "shape": list(self.shape),
            "demean": self.demean,
            "destd": self.destd,
            "clip": self.clip,
            "running_stats": self.running_stats.get_state(),
            "buffer": self.buffer.get_state(),
        }

    def set_state(self, state: dict[str, Any]) -> None:
        if state.get("type") != "MeanStdFilter" or tuple(state["shape"]) != self.shape:
            raise ValueError(
                f"Cannot restore a MeanStdFilter of shape {self.shape} from filter state "
                f"type={state.get('type')!r} shape={state.get('shape')!r}."
            )
        self.demean, self.destd, self.clip = state["demean"], state["destd"], state["clip"]
        self.running_stats.set_state(state["running_stats"])
        self.buffer.set_state(state["buffer"])

    def __repr__(self) -> str:
        return f"MeanStdFilter(shape={self.shape}, n={self.running_stats.n})"


class ConcurrentMeanStdFilter(MeanStdFilter):
    """A `MeanStdFilter` that several threads may call and merge at once (RLlib 1.13's):
    each call, merge and copy holds one lock. (A worker's sampler calls its filters from
    one thread; this is for a filter shared with threads of your own.)"""

    is_concurrent = True

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._lock = threading.RLock()

    def __call__(self, obs: Any, update: bool = True) -> np.ndarray:
        with self._lock:
            return super().__call__(obs, update)

    def apply_changes(self, other: Filter, with_buffer: bool = False) -> None:
        with self._lock:
            super().apply_changes(other, with_buffer)

    def copy(self) -> ConcurrentMeanStdFilter:
        with self._lock:
            out = ConcurrentMeanStdFilter(self.shape, self.demean, self.destd, self.clip)
            out.sync(self)
            return out

    def sync(self, other: Filter) -> None:
        with self._lock:
            super().sync(other)

    def clear_buffer(self) -> None:
        with self._lock:
            super().clear_buffer()

    def __getstate__(self) -> dict[str, Any]:
        # The lock stays behind when the filter travels to another process.
        return {k: v for k, v in self.__dict__.items() if k != "_lock"}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._lock = threading.RLock()

    def __repr__(self) -> str:
        return f"ConcurrentMeanStdFilter(shape={self.shape}, n={self.running_stats.n})"


def get_filter(filter_config: str | Callable[[tuple], Filter], shape: Sequence[int]) -> Filter:
    """Build the filter named by the ``observation_filter`` config for observations of
    ``shape``: ``"NoFilter"``, ``"MeanStdFilter"``, ``"ConcurrentMeanStdFilter"`` (its
    thread-safe form), or a callable ``fn(shape) -> Filter``."""
    if filter_config == "NoFilter":
        return NoFilter()
    if filter_config == "MeanStdFilter":
        return MeanStdFilter(shape, clip=None)
    if filter_config == "ConcurrentMeanStdFilter":
        return ConcurrentMeanStdFilter(shape, clip=None)
    if callable(filter_config):
        return filter_config(tuple(shape))
    raise ValueError(
        f"Unknown observation_filter {filter_config!r}: expected 'NoFilter', "
        "'MeanStdFilter', 'ConcurrentMeanStdFilter' or a callable shape -> Filter."
    )


class FilterManager:
    """Keeps the filters of a set of workers in step (called by the Trainer after each
    ``train()``)."""

    @staticmethod
    @keyword_aliases(remotes="remote_workers")
    def synchronize(
        local_filters: dict[str, Filter],
        remote_workers: Iterable[Any],
        update_remote: bool = True,
        timeout: float | None = None,
    ) -> None:
        """Merge every remote worker's new statistics into ``local_filters``; then, with
        ``update_remote``, push the merged filters back to every remote worker.

        Args:
            local_filters: the driver's filters by policy id, updated in place.
            remote_workers: worker handles with ``.call(method, ...) -> Future``
                (RLlib 1.13's name: ``remotes``).
        """
        from corral.evaluation.backend import wait_all

        remote_workers = list(remote_workers)
        if not remote_workers:
            return
        deltas = wait_all(
            [w.call("get_filters", flush_after=True) for w in remote_workers], timeout
        )
        for remote in deltas:
            for pid, remote_filter in remote.items():
                if pid in local_filters:
                    local_filters[pid].apply_changes(remote_filter, with_buffer=False)
        if update_remote:
            merged = {pid: f.as_serializable() for pid, f in local_filters.items()}
            wait_all([w.call("sync_filters", merged) for w in remote_workers], timeout)


__all__ = [
    "Filter",
    "FilterManager",
    "MeanStdFilter",
    "NoFilter",
    "RunningStat",
    "get_filter",
]
