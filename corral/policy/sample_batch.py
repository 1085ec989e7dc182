"""Batches of experience: a dict of numpy columns, one row per (agent) step.

`SampleBatch` is what a rollout worker produces and what a learner trains
on. Columns use RLlib's names (see the class constants). A `MultiAgentBatch`
maps policy ids to `SampleBatch`es and remembers how many env steps made it.

A column may also be nested, as RLlib's: a dict or tuple of equally long arrays (the
`actions` of a Tuple/Dict action space under `_disable_action_flattening`). Every
row-wise operation (slicing, taking, concatenating, padding, copying, moving to a
device) applies to each of its leaves.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from operator import itemgetter
from typing import Any

import numpy as np

from corral.utils.keyword_aliases import keyword_aliases

DEFAULT_POLICY_ID = "default_policy"


class SampleBatch(dict):
    """A dict of equally long numpy columns (rows are time steps).

    Rows of one trajectory are contiguous and in time order; a batch may hold
    several trajectories (told apart by `eps_id` and `dones`).
    """

    OBS = "obs"
    # RLlib 1.x's older name of `OBS`.
    CUR_OBS = "obs"
    NEXT_OBS = "new_obs"
    ACTIONS = "actions"
    REWARDS = "rewards"
    PREV_ACTIONS = "prev_actions"
    PREV_REWARDS = "prev_rewards"
    TERMINATEDS = "terminateds"
    TRUNCATEDS = "truncateds"
    DONES = "dones"
    INFOS = "infos"
    EPS_ID = "eps_id"
    ENV_ID = "env_id"
    AGENT_INDEX = "agent_index"
    UNROLL_ID = "unroll_id"
    T = "t"
    ACTION_LOGP = "action_logp"
    ACTION_PROB = "action_prob"
    ACTION_DIST_INPUTS = "action_dist_inputs"
    VF_PREDS = "vf_preds"
    VALUES_BOOTSTRAPPED = "values_bootstrapped"
    SEQ_LENS = "seq_lens"

    # Columns written by postprocessing (GAE and friends).
    ADVANTAGES = "advantages"
    VALUE_TARGETS = "value_targets"
    # The observations' embeddings (the RE3 exploration writes them).
    OBS_EMBEDS = "obs_embeds"
    # Whether a model call is for training (RLlib 1.13's `SampleBatch.is_training`;
    # e.g. batch-norm layers switch mode on it).
    is_training = False
    # Set by `rnn_sequencing.pad_batch_to_sequences_of_same_size`: the rows are padded
    # sequences of `max_seq_len` rows each.
    zero_padded = False
    max_seq_len: int | None = None

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for key, value in self.items():
            if not isinstance(value, np.ndarray) and key != self.INFOS:
                super().__setitem__(key, _as_column(value))
        self._check_lengths()

    def _per_row(self, key: str) -> bool:
        """Whether column `key` has one entry per row: all but `seq_lens` and, in a batch
        of sequences (with `seq_lens`), the `state_in_*` columns (one per sequence)."""
        if key == self.SEQ_LENS:
            return False
        return not (key.startswith("state_in_") and self.SEQ_LENS in self)

    def _check_lengths(self) -> None:
        if self.SEQ_LENS in self:
            lengths = {k: _rows(v) for k, v in self.items() if self._per_row(k)}
        else:  # (the common case, built on every sampled step: no per-column call)
            lengths = {k: len(v) if type(v) is np.ndarray else _rows(v) for k, v in self.items()}
        if len(set(lengths.values())) > 1:
            raise ValueError(f"SampleBatch columns differ in length: {lengths}")

    @property
    def count(self) -> int:
        """Number of rows (steps) in this batch."""
        if self.SEQ_LENS not in self:  # (the common case, read on every sampled step)
            for value in self.values():
                return len(value) if type(value) is np.ndarray else _rows(value)
            return 0
        for key, value in self.items():
            if self._per_row(key):
                return _rows(value)
        return 0

    def __len__(self) -> int:  # type: ignore[override]
        return self.count

    def env_steps(self) -> int:
        return self.count

    def agent_steps(self) -> int:
        return self.count

    def __setitem__(self, key: str, value: Any) -> None:
        if not isinstance(value, np.ndarray) and key != self.INFOS:
            value = _as_column(value)
        super().__setitem__(key, value)

    def copy(self, shallow: bool = False) -> SampleBatch:  # type: ignore[override]
        if shallow:
            return SampleBatch(dict(self))
        return SampleBatch(
            {
                k: (list(v) if k == self.INFOS else map_column(lambda a: a.copy(), v))
                for k, v in self.items()
            }
        )

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, slice):
            return self.slice(key.start or 0, key.stop if key.stop is not None else self.count)
        if self._get_interceptor is None:
            return super().__getitem__(key)
        return self._get_interceptor(super().__getitem__(key))

    # Set by `set_get_interceptor`: applied to each column read with `batch[key]`.
    _get_interceptor: Callable[[Any], Any] | None = None

    def set_get_interceptor(self, fn: Callable[[Any], Any] | None) -> None:
        """Applies `fn` to every column read with `batch[key]` from now on (RLlib's way
        to hand a loss torch tensors, e.g. `convert_to_torch_tensor`); None removes it."""
        self._get_interceptor = fn

    def to_device(self, device: Any, framework: str = "torch") -> SampleBatch:
        """Makes every numeric column a torch tensor on `device`, in place; returns the
        batch. (`infos` and other object columns stay as they are.)"""
        if framework != "torch":
            raise NotImplementedError(
                f"SampleBatch.to_device(framework={framework!r}): corral runs on torch only."
            )
        import torch

        def to_tensor(value: Any) -> Any:
            if isinstance(value, np.ndarray) and value.dtype != object:
                return torch.as_tensor(value, device=device)
            return value

        for key, value in list(self.items()):
            if key != self.INFOS:
                dict.__setitem__(self, key, map_column(to_tensor, value))
        return self

    def get_single_step_input_dict(
        self, view_requirements: Mapping[str, Any], index: int | str = "last"
    ) -> SampleBatch:
        """A one-row input dict for a model call, built by `view_requirements` (view
        column -> `ViewRequirement`, e.g. `policy.model.view_requirements`).

        `index="last"` gives the step after the batch's last one (what bootstrapping
        the value of a cut trajectory needs): `obs` is the last `new_obs`, a view of
        `actions` / `rewards` / `state_out_<i>` shifted by -1 (`prev_actions`,
        `prev_rewards`, `state_in_<i>`) their last row, and a range of frames ends at the
        next observation (zeros before the batch's first row). An int `index` gives
        that row's own views (`batch[view_col][index]`).
        """
        out: dict[str, Any] = {}
        for view_col, req in view_requirements.items():
            if not getattr(req, "used_for_compute_actions", True):
                continue
            if index != "last":
                if view_col in self:
                    row = itemgetter(slice(int(index), (int(index) + 1) or None))
                    out[view_col] = map_column(row, self[view_col])
                continue
            data_col = req.data_col or view_col
            if data_col == self.PREV_ACTIONS:
                data_col = self.ACTIONS
            elif data_col == self.PREV_REWARDS:
                data_col = self.REWARDS
            shifts = np.atleast_1d(getattr(req, "shift_arr", req.shift))
            if len(shifts) > 1:  # a range of frames relative to the next step
                window = self._next_step_window(data_col, shifts)
                if window is not None:
                    out[view_col] = window
                continue
            if data_col == self.OBS:
                data_col = self.NEXT_OBS
            if data_col in self:
                out[view_col] = map_column(lambda a: a[-1:], self[data_col])
        out[self.SEQ_LENS] = np.ones(1, np.int32)
        return SampleBatch(out)

    def _next_step_window(self, data_col: str, shifts: np.ndarray) -> np.ndarray | None:
        """`data_col`'s rows at the next step's index plus `shifts` (one window, zeros
        outside the batch); the next observation is the last `new_obs`."""
        if data_col not in self:
            return None
        column = np.asarray(self[data_col])
        if data_col == self.OBS and self.NEXT_OBS in self:
            column = np.concatenate([column, np.asarray(self[self.NEXT_OBS])[-1:]])
            now = len(column) - 1
        else:
            now = len(column)
        rows = now + shifts.astype(np.int64)
        inside = (rows >= 0) & (rows < len(column))
        window = np.zeros((len(rows), *column.shape[1:]), column.dtype)
        window[inside] = column[rows[inside]]
        return window[None]

    def slice(
        self,
        start: int,
        end: int,
        state_start: int | None = None,
        state_end: int | None = None,
    ) -> SampleBatch:
        """Rows `start` to `end` (views, not copies).

        `state_start` / `state_end` (RLlib 1.13's, for a batch of sequences): the
        sequences `state_start` to `state_end` whose rows these are; the slice then
        keeps their `state_in_*` rows and `seq_lens` (the last one cut to the rows
        taken). Without them, a batch of sequences (`seq_lens`, one `state_in_*` row per
        sequence) is cut at the sequences the rows lie in, as RLlib 1.13 worked them
        out: the first and last one shortened to the rows taken. In a batch without
        `seq_lens`, or one whose `state_in_*` columns have a row per step, `seq_lens`
        is dropped.

        Raises:
            ValueError: only one of `state_start` and `state_end` is given, or the
                sequences hold fewer rows than the slice.
        """
        if state_start is None and state_end is None and self.SEQ_LENS in self:
            return self._slice_sequences(start, end)
        by_sequence = (state_start is not None or state_end is not None) and self.SEQ_LENS in self
        data = {
            k: v[start:end] if type(v) is np.ndarray else map_column(lambda a: a[start:end], v)
            for k, v in self.items()
            if k != self.SEQ_LENS and not (by_sequence and k.startswith("state_in_"))
        }
        if not by_sequence:
            return SampleBatch(data)
        if state_start is None or state_end is None:
            raise ValueError(f"slice(state_start={state_start}, state_end={state_end}): give both.")
        for key, value in self.items():
            if key.startswith("state_in_"):
                data[key] = value[state_start:state_end]
        seq_lens = np.array(self[self.SEQ_LENS][state_start:state_end])
        rows = len(range(self.count)[start:end])
        held = int(seq_lens.sum())
        if held < rows:
            raise ValueError(
                f"slice({start}, {end}, {state_start}, {state_end}): sequences "
                f"{state_start} to {state_end} hold {held} rows, the slice {rows}."
            )
        if len(seq_lens):
            seq_lens[-1] -= held - rows
        data[self.SEQ_LENS] = seq_lens
        return SampleBatch(data)

    def _slice_sequences(self, start: int, end: int) -> SampleBatch:
        """`slice(start, end)` of a batch with `seq_lens` and no sequence bounds given."""
        seq_lens = np.asarray(self[self.SEQ_LENS])
        states = [k for k in self if k.startswith("state_in_")]
        start, end, _ = slice(start, end).indices(self.count)
        if not len(seq_lens) or any(len(self[k]) != len(seq_lens) for k in states):
            data = {k: map_column(lambda a: a[start:end], v) for k, v in self.items()}
            data.pop(self.SEQ_LENS)
            return SampleBatch(data)
        ends = np.cumsum(seq_lens)
        first = int(np.searchsorted(ends, start, side="right"))
        last = int(np.searchsorted(ends, end, side="left")) if end > start else first - 1
        cut = np.array(seq_lens[first : last + 1])
        if len(cut):
            cut[-1] -= int(ends[last]) - end
            cut[0] -= start - (int(ends[first - 1]) if first else 0)
        data = {
            k: map_column(lambda a: a[start:end], v)
            for k, v in self.items()
            if k != self.SEQ_LENS and k not in states
        }
        for key in states:
            data[key] = self[key][first : last + 1]
        data[self.SEQ_LENS] = cut
        return SampleBatch(data)

    def take(self, indices: np.ndarray) -> SampleBatch:
        """Rows at `indices` (a copy)."""
        out = {}
        for k, v in self.items():
            if k == self.SEQ_LENS:
                continue
            if k == self.INFOS:
                out[k] = [v[i] for i in indices]
            else:
                out[k] = map_column(lambda a: a[indices], v)
        return SampleBatch(out)

    def shuffle(self, rng: np.random.Generator | None = None) -> SampleBatch:
        """Returns the rows in a random order."""
        rng = rng or np.random.default_rng()
        return self.take(rng.permutation(self.count))

    def columns(self, keys: Iterable[str]) -> list[np.ndarray]:
        return [self[k] for k in keys]

    def rows(self) -> Iterator[dict[str, Any]]:
        for i in range(self.count):
            yield {
                k: v[i] if k == self.INFOS else map_column(itemgetter(i), v)
                for k, v in self.items()
                if k != self.SEQ_LENS
            }

    def split_by_episode(self) -> list[SampleBatch]:
        """Splits into one batch per contiguous trajectory (by `eps_id`)."""
        eps = self[self.EPS_ID]
        if len(eps) == 0:
            return []
        cuts = np.flatnonzero(eps[1:] != eps[:-1]) + 1
        bounds = [0, *cuts.tolist(), len(eps)]
        return [self.slice(a, b) for a, b in zip(bounds[:-1], bounds[1:])]

    def as_multi_agent(self) -> MultiAgentBatch:
        return MultiAgentBatch({DEFAULT_POLICY_ID: self}, self.count)

    def size_bytes(self) -> int:
        return sum(
            leaf.nbytes
            for k, v in self.items()
            if k != self.INFOS
            for leaf in column_leaves(v)
            if isinstance(leaf, np.ndarray)
        )

    def __repr__(self) -> str:
        def shape(value: Any) -> Any:
            return getattr(value, "shape", None) or len(value)

        cols = ", ".join(
            f"{k}: {shape(v) if k == self.INFOS else map_column(shape, v)}" for k, v in self.items()
        )
        return f"SampleBatch({self.count}: {cols})"

    @staticmethod
    def concat_samples(samples: Sequence[SampleBatch | MultiAgentBatch]) -> Any:
        return concat_samples(samples)

    def concat(self, other: SampleBatch) -> SampleBatch:
        """This batch's rows, then `other`'s (a new batch)."""
        return _concat_single([self, other])

    def timeslices(
        self, size: int | None = None, num_slices: int | None = None, k: int | None = None
    ) -> list[SampleBatch]:
        """Consecutive slices of `size` rows (`k`: RLlib's older name; the last slice may
        be shorter), or `num_slices` slices of near-equal length."""
        size = size if size is not None else k
        if (size is None) == (num_slices is None):
            raise ValueError("timeslices takes either size (or k) or num_slices, and not both.")
        if num_slices is not None:
            if num_slices < 1:
                raise ValueError(f"num_slices must be >= 1, got {num_slices}")
            bounds = np.linspace(0, self.count, num_slices + 1).round().astype(int)
            return [self.slice(int(a), int(b)) for a, b in zip(bounds[:-1], bounds[1:])]
        assert size is not None
        if size < 1:
            raise ValueError(f"timeslices size must be >= 1, got {size}")
        return [self.slice(i, min(i + size, self.count)) for i in range(0, self.count, size)]

    @keyword_aliases(exclude_states="exclude_states_and_seq_lens")
    def right_zero_pad(
        self, max_seq_len: int, exclude_states_and_seq_lens: bool = True
    ) -> SampleBatch:
        """Pads each sequence (`seq_lens`) with zero rows to `max_seq_len`, in place;
        sets `zero_padded` and `max_seq_len` (RLlib 1.13's flags).

        `seq_lens` stays as it is; the `state_in_*` columns too unless
        `exclude_states_and_seq_lens` (RLlib 1.13's `exclude_states`) is False.

        Raises:
            ValueError: the batch has no `seq_lens`, or a sequence is longer than
                `max_seq_len`.
        """
        if self.SEQ_LENS not in self:
            raise ValueError("right_zero_pad needs a batch with `seq_lens` (sequences).")
        seq_lens = np.asarray(self[self.SEQ_LENS], dtype=np.int64)
        if len(seq_lens) and int(seq_lens.max()) > max_seq_len:
            raise ValueError(
                f"A sequence of {int(seq_lens.max())} rows does not fit max_seq_len={max_seq_len}"
            )
        starts = np.concatenate([[0], np.cumsum(seq_lens)[:-1]]).astype(np.int64)
        rows = np.concatenate(
            [np.arange(n) + i * max_seq_len for i, n in enumerate(seq_lens.tolist())]
            or [np.zeros(0, np.int64)]
        )
        source = np.concatenate(
            [np.arange(n) + s for s, n in zip(starts.tolist(), seq_lens.tolist())]
            or [np.zeros(0, np.int64)]
        )
        padded_len = len(seq_lens) * max_seq_len
        for key, value in list(self.items()):
            if key == self.SEQ_LENS or (
                exclude_states_and_seq_lens and key.startswith("state_in_")
            ):
                continue
            if key == self.INFOS:
                infos: list[Any] = [{} for _ in range(padded_len)]
                for r, src in zip(rows.tolist(), source.tolist()):
                    infos[r] = value[src]
                super().__setitem__(key, infos)
                continue

            def pad(column: np.ndarray) -> np.ndarray:
                out = np.zeros((padded_len, *column.shape[1:]), dtype=column.dtype)
                out[rows] = column[source]
                return out

            super().__setitem__(key, map_column(pad, value))
        self.zero_padded = True
        self.max_seq_len = max_seq_len
        return self

    def zero_pad(self, max_seq_len: int, exclude_states: bool = True) -> SampleBatch:
        """RLlib 1.13's older name of `right_zero_pad` (`exclude_states`: leave the
        `state_in_*` columns as they are)."""
        return self.right_zero_pad(max_seq_len, exclude_states)

    def compress(
        self, bulk: bool = False, columns: Iterable[str] = ("obs", "new_obs")
    ) -> SampleBatch:
        """Packs `columns` (LZ4, RLlib's `compress_observations`) in place."""
        from corral.utils.compression import compress_batch

        return compress_batch(self, tuple(columns))

    def decompress_if_needed(self, columns: Iterable[str] = ("obs", "new_obs")) -> SampleBatch:
        """Unpacks the packed ones of `columns` in place."""
        from corral.utils.compression import decompress_batch

        return decompress_batch(self, tuple(columns))

    def set_training(self, training: bool = True) -> None:
        """Marks this batch as a training batch (`is_training`) or not."""
        self.is_training = training


class MultiAgentBatch:
    """Policy id -> `SampleBatch`, plus the number of env steps they came from."""

    def __init__(self, policy_batches: dict[str, SampleBatch], env_steps: int) -> None:
        self.policy_batches = policy_batches
        self.count = env_steps

    def env_steps(self) -> int:
        return self.count

    def agent_steps(self) -> int:
        return sum(b.count for b in self.policy_batches.values())

    def __len__(self) -> int:
        return self.count

    def copy(self) -> MultiAgentBatch:
        return MultiAgentBatch({k: v.copy() for k, v in self.policy_batches.items()}, self.count)

    def size_bytes(self) -> int:
        return sum(b.size_bytes() for b in self.policy_batches.values())

    def as_multi_agent(self) -> MultiAgentBatch:
        return self

    @staticmethod
    def concat_samples(samples: Sequence[MultiAgentBatch]) -> MultiAgentBatch:
        """One batch of all policies' rows of `samples`, in order (`concat_samples`)."""
        return concat_samples(samples)

    def timeslices(self, k: int) -> list[MultiAgentBatch]:
        """Batches of `k` env steps each, every agent's rows of those steps together (RLlib's
        "lockstep" slicing). Env steps are told apart by `eps_id` and `t`, in that order, so
        a slice may hold steps of several episodes.

        Raises:
            ValueError: `k < 1`, or a policy batch lacks `eps_id` or `t`.
        """
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise ValueError(f"timeslices takes k >= 1 env steps, got {k!r}")
        steps = []
        for pid, batch in self.policy_batches.items():
            missing = {SampleBatch.EPS_ID, SampleBatch.T} - set(batch)
            if missing:
                raise ValueError(f"timeslices needs columns {sorted(missing)} in policy {pid!r}")
            agents = batch.get(SampleBatch.AGENT_INDEX, np.zeros(batch.count, np.int64))
            for row, (eps, t, agent) in enumerate(
                zip(
                    batch[SampleBatch.EPS_ID].tolist(),
                    batch[SampleBatch.T].tolist(),
                    agents.tolist(),
                )
            ):
                steps.append(((eps, t), agent, pid, row))
        steps.sort(key=lambda step: (step[0], step[1]))
        slices: list[dict[str, list[int]]] = []
        sizes: list[int] = []
        last_step = None
        for env_step, _, pid, row in steps:
            if env_step != last_step:
                last_step = env_step
                if not sizes or sizes[-1] == k:
                    slices.append({})
                    sizes.append(0)
                sizes[-1] += 1
            slices[-1].setdefault(pid, []).append(row)
        return [
            MultiAgentBatch(
                {
                    pid: self.policy_batches[pid].take(np.array(rows))
                    for pid, rows in rows_of.items()
                },
                size,
            )
            for rows_of, size in zip(slices, sizes)
        ]

    def compress(
        self, bulk: bool = False, columns: Iterable[str] = ("obs", "new_obs")
    ) -> MultiAgentBatch:
        """Packs `columns` of every policy batch in place."""
        for batch in self.policy_batches.values():
            batch.compress(bulk, columns)
        return self

    def decompress_if_needed(self, columns: Iterable[str] = ("obs", "new_obs")) -> MultiAgentBatch:
        """Unpacks the packed ones of `columns` of every policy batch in place."""
        for batch in self.policy_batches.values():
            batch.decompress_if_needed(columns)
        return self

    @staticmethod
    def wrap_as_needed(
        policy_batches: dict[str, SampleBatch], env_steps: int
    ) -> SampleBatch | MultiAgentBatch:
        """A plain `SampleBatch` when only the default policy is present."""
        if len(policy_batches) == 1 and DEFAULT_POLICY_ID in policy_batches:
            return policy_batches[DEFAULT_POLICY_ID]
        return MultiAgentBatch(policy_batches, env_steps)

    def __repr__(self) -> str:
        return f"MultiAgentBatch(env_steps={self.count}, policies={self.policy_batches!r})"


def concat_samples(samples: Sequence[SampleBatch | MultiAgentBatch]) -> Any:
    """Concatenates batches row-wise; multi-agent batches per policy id."""
    samples = [s for s in samples if s.count > 0] or list(samples[:1])
    if not samples:
        return SampleBatch()
    if any(isinstance(s, MultiAgentBatch) for s in samples):
        per_policy: dict[str, list[SampleBatch]] = {}
        env_steps = 0
        for s in samples:
            ma = s.as_multi_agent()
            env_steps += ma.count
            for pid, b in ma.policy_batches.items():
                per_policy.setdefault(pid, []).append(b)
        return MultiAgentBatch(
            {pid: _concat_single(bs) for pid, bs in per_policy.items()}, env_steps
        )
    return _concat_single(samples)  # type: ignore[arg-type]


def _concat_single(samples: Sequence[SampleBatch]) -> SampleBatch:
    if len(samples) == 1:
        return samples[0]
    keys = samples[0].keys()
    for s in samples[1:]:
        if s.keys() != keys:
            raise ValueError(
                f"Cannot concatenate SampleBatches with different columns: "
                f"{sorted(keys)} vs {sorted(s.keys())}"
            )
    out: dict[str, Any] = {}
    for k in keys:
        if k == SampleBatch.INFOS:
            out[k] = [i for s in samples for i in s[k]]
        else:
            columns = [s[k] for s in samples]
            if type(columns[0]) is np.ndarray:
                out[k] = np.concatenate(columns)
            else:
                out[k] = map_columns(lambda *parts: np.concatenate(parts), columns)
    return SampleBatch(out)


def _is_struct(value: Any) -> bool:
    """Whether a column value is nested: a dict, or a tuple of arrays / tensors (with a
    row axis) / nested values (RLlib's nested columns; a tuple of scalars is one flat
    column)."""
    if isinstance(value, dict):
        return True
    return (
        isinstance(value, tuple)
        and len(value) > 0
        and all(isinstance(v, dict | tuple) or getattr(v, "ndim", 0) >= 1 for v in value)
    )


def map_column(fn: Callable[[Any], Any], value: Any) -> Any:
    """`fn` applied to a column: to each leaf of a nested one (same structure out)."""
    if isinstance(value, dict):
        return {k: map_column(fn, v) for k, v in value.items()}
    if _is_struct(value):
        return tuple(map_column(fn, v) for v in value)
    return fn(value)


def map_columns(fn: Callable[..., Any], values: Sequence[Any]) -> Any:
    """`fn` applied leaf by leaf to several columns of the same structure."""
    first = values[0]
    if isinstance(first, dict):
        return {k: map_columns(fn, [v[k] for v in values]) for k in first}
    if _is_struct(first):
        return tuple(map_columns(fn, [v[i] for v in values]) for i in range(len(first)))
    return fn(*values)


def column_leaves(value: Any) -> list[Any]:
    """The arrays of a column: itself, or the leaves of a nested one (in order)."""
    if isinstance(value, dict):
        return [leaf for v in value.values() for leaf in column_leaves(v)]
    if _is_struct(value):
        return [leaf for v in value for leaf in column_leaves(v)]
    return [value]


# How `leaf_columns` names the leaves of a nested column: "actions::pick",
# "actions::move::#0" (a tuple position).
LEAF_SEP = "::"


def leaf_columns(columns: Mapping[str, Any]) -> dict[str, Any]:
    """`columns` with each nested column replaced by one column per leaf, named by its
    path (see `LEAF_SEP`): what a column store (a replay buffer) keeps; `nested_columns`
    rebuilds them."""
    out: dict[str, Any] = {}
    for key, value in columns.items():
        if key == SampleBatch.INFOS or not _is_struct(value):
            out[key] = value
        else:
            _put_leaves(out, key, value)
    return out


def _put_leaves(out: dict[str, Any], path: str, value: Any) -> None:
    if isinstance(value, dict):
        for k, v in value.items():
            _put_leaves(out, f"{path}{LEAF_SEP}{k}", v)
    elif _is_struct(value):
        for i, v in enumerate(value):
            _put_leaves(out, f"{path}{LEAF_SEP}#{i}", v)
    else:
        out[path] = value


def nested_columns(columns: Mapping[str, Any]) -> dict[str, Any]:
    """The inverse of `leaf_columns`: leaf columns gathered back into nested ones."""
    out: dict[str, Any] = {}
    for key, value in columns.items():
        if LEAF_SEP not in key:
            out[key] = value
            continue
        head, *path = key.split(LEAF_SEP)
        node = out.setdefault(head, {})
        for part in path[:-1]:
            node = node.setdefault(part, {})
        node[path[-1]] = value
    return {k: _tuples_of(v) for k, v in out.items()}


def _tuples_of(value: Any) -> Any:
    """Nodes whose keys are "#0", "#1", ... back into tuples (see `leaf_columns`)."""
    if not isinstance(value, dict):
        return value
    items = {k: _tuples_of(v) for k, v in value.items()}
    if items and all(k.startswith("#") and k[1:].isdigit() for k in items):
        return tuple(items[f"#{i}"] for i in range(len(items)))
    return items


def with_flat_columns(batch: SampleBatch) -> SampleBatch:
    """`batch` with each nested column as flat float32 rows (its leaves' values side by
    side, in order: `corral.utils.spaces.flatten_action_rows`'s layout), as output files
    store `_disable_action_flattening`'s actions; `batch` itself when none is nested."""
    nested = [k for k, v in batch.items() if k != SampleBatch.INFOS and _is_struct(v)]
    if not nested:
        return batch
    out = batch.copy(shallow=True)
    for key in nested:
        leaves = column_leaves(batch[key])
        n = len(leaves[0])
        out[key] = np.concatenate([np.asarray(x, np.float32).reshape(n, -1) for x in leaves], -1)
    return out


def _rows(value: Any) -> int:
    """The number of rows of a column (of a nested one: of its first leaf)."""
    if isinstance(value, dict | tuple) and _is_struct(value):
        leaves = column_leaves(value)
        return len(leaves[0]) if leaves else 0
    return len(value)


def _as_column(value: Any) -> Any:
    """A column as numpy: an array, or a nested column of arrays."""
    return map_column(lambda v: v if isinstance(v, np.ndarray) else np.asarray(v), value)
