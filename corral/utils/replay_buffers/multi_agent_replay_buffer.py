"""`MultiAgentReplayBuffer`: one (prioritized) replay buffer per policy id.

With `replay_sequence_length > 1`, each policy's rows are cut into
contiguous sequences of that length (within one trajectory, by `eps_id`;
the last sequence of a trajectory is zero-padded) and a sequence is the unit
that is stored, prioritised and sampled; a sample of `num_items` sequences
comes back flattened (`num_items * replay_sequence_length` rows) with a
`seq_lens` column giving each sequence's unpadded length.

`replay_mode="lockstep"` (RLlib's `multiagent.replay_mode`) replays all agent
transitions of one env step together: the rows of every policy are grouped
into env steps by (`eps_id`, `t`), as RLlib's `MultiAgentBatch.timeslices`
did, the capacity counts env steps, and a sample of `num_items` env steps
holds, for every policy, the rows of exactly those env steps. `t` is each
agent's own step counter, so agents that act at every step of the episode
(the usual case for lockstep envs) share one env step per `t`.

RLlib 1.13's other arguments: `storage_unit` "sequences" or "episodes" gives
each policy a buffer of such items; `underlying_buffer_config` builds the
policy buffers from a config (its keys are also passed to their `add` and
`sample` calls, as RLlib does); `learning_starts` makes `sample` return an
empty batch until that many env steps were added.
"""

from __future__ import annotations

import logging
from enum import Enum
from typing import Any

import numpy as np

from corral.policy.sample_batch import MultiAgentBatch, SampleBatch
from corral.utils.compression import is_compressed, pack_column, unpack_column
from corral.utils.deprecation import Deprecated, log_once
from corral.utils.from_config import from_config, lookup_type
from corral.utils.replay_buffers.prioritized_replay_buffer import (
    BATCH_INDEXES,
    WEIGHTS,
    PrioritizedReplayBuffer,
)
from corral.utils.replay_buffers.replay_buffer import ReplayBuffer, StorageUnit, storage_unit_of

logger = logging.getLogger(__name__)

_SEQ_LEN = "_seq_len"  # stored per sequence; returned as `seq_lens`

# The `add` methods of corral's buffers, which `add_timesteps` stands for row by row.
_OWN_ADDS = frozenset({ReplayBuffer.add, PrioritizedReplayBuffer.add})


class ReplayMode(str, Enum):
    """How a multi-agent buffer replays the policies' rows (RLlib 1.13's replay modes)."""

    INDEPENDENT = "independent"
    LOCKSTEP = "lockstep"


REPLAY_MODES = tuple(m.value for m in ReplayMode)


def merge_dicts_with_warning(args_on_init: dict, args_on_call: dict) -> dict:
    """The call arguments a buffer was built with, overridden by those of one call.

    Logs a warning (once per argument) for each argument the call overrides.

    Args:
        args_on_init: the standard arguments (`underlying_buffer_config`).
        args_on_call: this call's arguments.

    Returns:
        The merged arguments.
    """
    for name, value in args_on_call.items():
        if name in args_on_init and log_once(f"overwrite_argument_{name}"):
            logger.warning(
                "Replay buffer was built to call its underlying buffers with `%s=%s`, but "
                "was then called with `%s=%s`.",
                name,
                args_on_init[name],
                name,
                value,
            )
    return {**args_on_init, **args_on_call}


class MultiAgentReplayBuffer:
    """Replay buffers keyed by policy id, created on the first add for that policy.

    Args:
        capacity: rows (or sequences, or items) per policy buffer, for all shards.
        storage_unit: "timesteps" (rows, or sequences of `replay_sequence_length`),
            "sequences" (by `seq_lens`) or "episodes" (whole episodes).
        num_shards: buffer shards in total; `capacity` and `learning_starts` are divided
            by it, as in RLlib.
        replay_batch_size: items `replay()` samples.
        learning_starts: env steps to add before `sample` returns rows (RLlib's default
            is 1000; corral's trainers wait for `learning_starts` themselves, so it is 0).
        replay_mode: "independent" (one buffer per policy, sampled independently) or
            "lockstep" (whole env steps stored and sampled together; capacity in env
            steps; rows need `eps_id` and `t` columns).
        replay_sequence_length: 1 for transitions; > 1 stores sequences (RNNs).
        replay_burn_in: must be 0 (burn-in overlap is not built).
        replay_zero_init_states: kept for RLlib's signature (sequences keep the
            recorded `state_in_*`).
        underlying_buffer_config: builds each policy's buffer (`type` and constructor
            arguments, RLlib's `from_config`), and gives the default arguments of its
            `add` and `sample` calls.
        prioritized: use `PrioritizedReplayBuffer`s (else uniform `ReplayBuffer`s).
        alpha: prioritisation exponent (`prioritized_replay_alpha`).
        beta: importance-sampling exponent used by `sample` (`prioritized_replay_beta`);
            the attribute may be changed between calls to anneal it.
        eps: added to |td_error| to get a priority (`prioritized_replay_eps`).
        seed: seed of the buffers' random generators (each policy gets its own stream).
        **kwargs: other keys of RLlib's `replay_buffer_config`; ignored.

    Raises:
        ValueError: an unknown `replay_mode` or `storage_unit`, or "lockstep" with
            prioritized replay, with `replay_sequence_length > 1` or with items.
        NotImplementedError: `replay_burn_in > 0`.
    """

    def __init__(
        self,
        capacity: int = 10000,
        storage_unit: str | StorageUnit = StorageUnit.TIMESTEPS,
        num_shards: int = 1,
        replay_batch_size: int = 1,
        learning_starts: int = 0,
        replay_mode: str | ReplayMode = ReplayMode.INDEPENDENT,
        replay_sequence_length: int = 1,
        replay_burn_in: int = 0,
        replay_zero_init_states: bool = True,
        underlying_buffer_config: dict | None = None,
        *,
        prioritized: bool = False,
        alpha: float = 0.6,
        beta: float = 0.4,
        eps: float = 1e-6,
        seed: int | None = None,
        **kwargs: Any,
    ) -> None:
        if replay_sequence_length < 1:
            raise ValueError(f"replay_sequence_length must be >= 1, got {replay_sequence_length}.")
        if replay_mode not in REPLAY_MODES:
            raise ValueError(
                f"multiagent.replay_mode must be one of {list(REPLAY_MODES)}, got {replay_mode!r}."
            )
        if replay_burn_in:
            raise NotImplementedError("MultiAgentReplayBuffer(replay_burn_in > 0) is not built.")
        self._storage_unit = storage_unit_of(storage_unit)
        lockstep = replay_mode == ReplayMode.LOCKSTEP
        if lockstep and prioritized:
            raise ValueError("Lockstep replay mode is not supported with prioritized replay.")
        if lockstep and replay_sequence_length > 1:
            raise ValueError(
                "Lockstep replay mode is not supported with replay_sequence_length > 1."
            )
        if lockstep and self._storage_unit is not StorageUnit.TIMESTEPS:
            raise ValueError(
                "Lockstep replay mode is not supported with storage unit "
                f"{self._storage_unit.value!r}."
            )
        self.replay_mode = ReplayMode(replay_mode)
        self.num_shards = int(num_shards)
        self.capacity = int(capacity) // self.num_shards
        self.replay_batch_size = int(replay_batch_size)
        self.replay_starts = int(learning_starts) // self.num_shards
        self.prioritized = bool(prioritized)
        self.alpha = float(alpha)
        self.beta = float(beta)
        self.eps = float(eps)
        # Items of their own (sequences, episodes) are never cut into fixed lengths.
        self.replay_sequence_length = (
            int(replay_sequence_length) if self._storage_unit is StorageUnit.TIMESTEPS else 1
        )
        self.replay_burn_in = int(replay_burn_in)
        self.replay_zero_init_states = bool(replay_zero_init_states)
        self.underlying_buffer_config = underlying_buffer_config
        self.underlying_buffer_call_args: dict = dict(underlying_buffer_config or {})
        self.seed = seed
        self.replay_buffers: dict[str, ReplayBuffer] = {}
        self._lockstep = LockstepReplayBuffer(self.capacity, seed) if lockstep else None
        self._num_added = 0

    @property
    def storage_unit(self) -> StorageUnit:
        """What one stored item of a policy buffer is."""
        return self._storage_unit

    def __len__(self) -> int:
        """Rows (or sequences) held, summed over the policies."""
        if self._lockstep is not None:
            return self._lockstep.num_rows()
        return sum(len(b) for b in self.replay_buffers.values())

    def _buffer(self, policy_id: str) -> ReplayBuffer:
        buf = self.replay_buffers.get(policy_id)
        if buf is None:
            seed = None if self.seed is None else self.seed + len(self.replay_buffers)
            if self.underlying_buffer_config is not None:
                buf = self._configured_buffer(seed)
            elif self.prioritized:
                buf = PrioritizedReplayBuffer(
                    self.capacity, alpha=self.alpha, seed=seed, storage_unit=self._storage_unit
                )
            else:
                buf = ReplayBuffer(self.capacity, storage_unit=self._storage_unit, seed=seed)
            self.replay_buffers[policy_id] = buf
        return buf

    def _configured_buffer(self, seed: int | None) -> Any:
        """A policy buffer built from `underlying_buffer_config` (RLlib's `from_config`;
        a type name is looked up among corral's buffers)."""
        config = dict(self.underlying_buffer_config or {})
        buffer_type = config.pop("type", ReplayBuffer)
        if isinstance(buffer_type, str):
            buffer_type = lookup_type(ReplayBuffer, buffer_type) or buffer_type
        arguments = {"capacity": self.capacity, "storage_unit": self._storage_unit, **config}
        if isinstance(buffer_type, type) and issubclass(buffer_type, ReplayBuffer):
            arguments.setdefault("seed", seed)
        return from_config(ReplayBuffer, {"type": buffer_type, **arguments})

    def add(self, batch: SampleBatch | MultiAgentBatch, **kwargs: Any) -> None:
        """Adds each policy's rows to that policy's buffer (`kwargs`: arguments of the
        policy buffers' `add`, over those of `underlying_buffer_config`).

        In a prioritized buffer, a policy batch's `weights` column (as worker-side
        prioritization's postprocessing writes it) gives its rows' initial priorities,
        as in RLlib 1.13; rows without one get the largest priority so far."""
        ma_batch = batch.as_multi_agent()
        self._num_added += ma_batch.env_steps()
        if self._lockstep is not None:
            self._lockstep.add(ma_batch)
            return
        if kwargs or self.underlying_buffer_call_args:
            kwargs = merge_dicts_with_warning(self.underlying_buffer_call_args, kwargs)
        for pid, policy_batch in ma_batch.policy_batches.items():
            if policy_batch.count > 0:
                self._add_to_policy_buffer(pid, policy_batch, kwargs)

    def _add_to_policy_buffer(
        self, policy_id: str, batch: SampleBatch, kwargs: dict
    ) -> np.ndarray | None:
        """Stores one policy's rows; returns the indices of the rows (sequences, items)
        stored (None from a buffer of another class)."""
        if self.replay_sequence_length > 1:
            batch = _to_sequences(batch, self.replay_sequence_length)
        buf = self._buffer(policy_id)
        if (
            WEIGHTS in batch
            and isinstance(buf, PrioritizedReplayBuffer)
            and self.replay_sequence_length == 1
        ):
            batch, kwargs = _initial_priorities(
                policy_id, batch, kwargs, self._storage_unit is StorageUnit.TIMESTEPS
            )
        timesteps = self._storage_unit is StorageUnit.TIMESTEPS
        if type(buf).add in _OWN_ADDS:
            # Each row (sequence) an item, as RLlib adds timesteps: in one write.
            return buf.add_timesteps(batch, **kwargs) if timesteps else buf.add(batch, **kwargs)
        # Another `add` (`underlying_buffer_config`) gets timesteps one by one, as in RLlib.
        slices = batch.timeslices(1) if timesteps else [batch]
        for time_slice in slices:
            buf.add(time_slice, **kwargs)
        return None

    def sample(
        self,
        num_items: int,
        policy_id: str | None = None,
        *,
        policy_ids: list[str] | None = None,
        **kwargs: Any,
    ) -> MultiAgentBatch:
        """`num_items` rows (or sequences, or items) from each policy's buffer, counted as
        the sum of the policies' counts (RLlib 1.13); in lockstep mode, `num_items` env
        steps with the rows of every policy at those steps.

        Args:
            num_items: rows (items) per policy.
            policy_id: only this policy's (RLlib's argument).
            policy_ids: only these policies'.
            **kwargs: arguments of the policy buffers' `sample` (`beta`, ...).

        Returns:
            The sample; empty before `learning_starts` env steps were added.

        Raises:
            ValueError: `policy_id` in lockstep mode.
        """
        if self._num_added < self.replay_starts:
            return MultiAgentBatch({}, 0)
        if policy_id is not None:
            if self._lockstep is not None:
                raise ValueError("`policy_id` specifier not allowed in `lockstep` mode!")
            policy_ids = [policy_id]
        if self._lockstep is not None:
            return self._lockstep.sample(num_items, policy_ids)
        if kwargs or self.underlying_buffer_call_args:
            kwargs = merge_dicts_with_warning(self.underlying_buffer_call_args, kwargs)
        out = {}
        for pid in policy_ids or list(self.replay_buffers):
            buf = self.replay_buffers.get(pid)
            if buf is None or len(buf) == 0:
                continue
            out[pid] = self._from_stored(self._sample_stored(buf, num_items, kwargs))
        # (Its env steps are those of the policies' samples together, as in RLlib 1.13.)
        return MultiAgentBatch(out, sum(b.count for b in out.values()))

    def _sample_stored(self, buf: Any, num_items: int, kwargs: dict) -> Any:
        """`num_items` items of one policy buffer, as stored (sequences: [B, T, ...])."""
        if isinstance(buf, PrioritizedReplayBuffer):
            if kwargs:
                return buf.sample(num_items, **{"beta": self.beta, **kwargs})
            return buf.sample(num_items, beta=self.beta)
        return buf.sample(num_items, **kwargs)

    def _from_stored(self, sample: SampleBatch) -> SampleBatch:
        """Stored sequences as rows (with `seq_lens`); other samples as they are. (The
        stored items tell: a state saved with `replay_sequence_length > 1` restores
        sequences into a buffer built with another length, as RLlib 1.13's items do.)"""
        if isinstance(sample, SampleBatch) and _SEQ_LEN in sample:
            return _from_sequences(sample)
        return sample

    @Deprecated(old="MultiAgentReplayBuffer.add_batch()", new="add()", error=False)
    def add_batch(self, batch: SampleBatch | MultiAgentBatch, **kwargs: Any) -> None:
        self.add(batch, **kwargs)

    @Deprecated(old="MultiAgentReplayBuffer.replay()", new="sample()", error=False)
    def replay(self, num_items: int | None = None, **kwargs: Any) -> MultiAgentBatch:
        """`sample(num_items)`, by default `replay_batch_size` items."""
        return self.sample(self.replay_batch_size if num_items is None else num_items, **kwargs)

    def update_priorities(self, prio_dict: dict[str, tuple[np.ndarray, np.ndarray]]) -> None:
        """Sets priorities |td_error| + eps for each policy's sampled indexes.

        With sequences, pass one index per sequence (`batch_indexes` of its
        first row) and one TD error per row; a sequence gets its mean |td|.
        """
        for pid, (idxes, td_errors) in prio_dict.items():
            buf = self.replay_buffers.get(pid)
            if not isinstance(buf, PrioritizedReplayBuffer):
                continue
            idxes = np.asarray(idxes).reshape(-1)
            # (A new float64 array: the TD errors given are not written to.)
            priorities = np.abs(np.asarray(td_errors).reshape(-1), dtype=np.float64)
            if self.replay_sequence_length > 1 and len(priorities) != len(idxes):
                idxes = idxes[:: self.replay_sequence_length]
                priorities = priorities.reshape(len(idxes), -1).mean(axis=1)
            priorities += self.eps
            buf.update_priorities(idxes, priorities)

    def stats(self, debug: bool = False) -> dict[str, Any]:
        if self._lockstep is not None:
            return {"num_added": self._num_added, "lockstep": self._lockstep.stats()}
        return {
            "num_added": self._num_added,
            "policies": {pid: b.stats() for pid, b in self.replay_buffers.items()},
        }

    def get_state(self) -> dict[str, Any]:
        if self._lockstep is not None:
            return {
                "num_added": self._num_added,
                "beta": self.beta,
                "lockstep": self._lockstep.get_state(),
            }
        return {
            "num_added": self._num_added,
            "beta": self.beta,
            "buffers": {pid: b.get_state() for pid, b in self.replay_buffers.items()},
        }

    def set_state(self, state: dict[str, Any]) -> None:
        if ("lockstep" in state) != (self._lockstep is not None):
            saved = "lockstep" if "lockstep" in state else "independent"
            raise ValueError(
                f"Replay buffer state was saved in {saved!r} replay mode, but this buffer "
                f"uses {self.replay_mode.value!r}."
            )
        if self._lockstep is not None:
            self._lockstep.set_state(state["lockstep"])
            self._num_added = int(state.get("num_added", 0))
            self.beta = float(state.get("beta", self.beta))
            return
        self.replay_buffers = {}
        for pid, buf_state in state["buffers"].items():
            self._buffer(pid).set_state(buf_state)
        self._num_added = int(state.get("num_added", 0))
        self.beta = float(state.get("beta", self.beta))


def _initial_priorities(
    policy_id: str, batch: SampleBatch, kwargs: dict, per_row: bool
) -> tuple[SampleBatch, dict]:
    """RLlib 1.13's rule for a prioritized buffer: the `weights` column of an added batch
    (worker-side prioritization's |TD error| + eps) gives its rows' initial priorities
    (an item's: their mean), instead of the largest priority so far. The column itself is
    not stored (a sample writes the importance weights there). Priorities the call passes
    (`priorities`, `weight`) win over the column.

    Returns:
        The batch without the column, and the policy buffer's `add` arguments.

    Raises:
        ValueError: a priority that is not finite and > 0.
    """
    priorities = np.asarray(batch[WEIGHTS], dtype=np.float64).reshape(-1)
    rows = SampleBatch({k: v for k, v in batch.items() if k != WEIGHTS})
    if "priorities" in kwargs or "weight" in kwargs or len(priorities) == 0:
        return rows, kwargs
    # (Two reductions check them all: a NaN makes the minimum NaN, which is not > 0.)
    lowest, highest = float(priorities.min()), float(priorities.max())
    if not (lowest > 0 and np.isfinite(highest)):
        raise ValueError(
            f"The `{WEIGHTS}` column of policy {policy_id!r}'s batch gives its initial "
            f"priorities; they must be finite and > 0, got min {lowest}, max {highest}."
        )
    if per_row:
        return rows, {**kwargs, "priorities": priorities}
    return rows, {**kwargs, "weight": float(priorities.mean())}


class _RowRing:
    """The rows of one policy in lockstep mode, addressed by absolute row number.

    Row `r` (the r-th row ever added) sits at position `r % capacity`; rows
    before `first_live` belong to evicted env steps. When more rows are live
    than fit (several agents map to the policy), the storage doubles.
    """

    def __init__(self, capacity: int) -> None:
        self.capacity = max(1, int(capacity))
        self.columns: dict[str, np.ndarray] = {}
        self.added = 0
        self.first_live = 0

    def add(self, columns: dict[str, np.ndarray], n: int) -> None:
        if n == 0:
            return
        if not self.columns:
            self.columns = {
                k: np.zeros((self.capacity, *v.shape[1:]), v.dtype) for k, v in columns.items()
            }
        elif columns.keys() != self.columns.keys():
            raise ValueError(
                f"MultiAgentReplayBuffer.add got columns {sorted(columns)}, but the buffer "
                f"stores {sorted(self.columns)} for this policy."
            )
        live = self.added + n - self.first_live
        if live > self.capacity:
            self._grow(max(2 * self.capacity, live))
        positions = (self.added + np.arange(n)) % self.capacity
        for k, v in columns.items():
            self.columns[k][positions] = v
        self.added += n

    def _grow(self, capacity: int) -> None:
        live = np.arange(self.first_live, self.added)
        grown = {}
        for k, v in self.columns.items():
            column = np.zeros((capacity, *v.shape[1:]), v.dtype)
            column[live % capacity] = v[live % self.capacity]
            grown[k] = column
        self.columns, self.capacity = grown, capacity

    def take(self, rows: np.ndarray) -> SampleBatch:
        positions = rows % self.capacity
        # Columns stored LZ4-packed (`compress_observations`) are unpacked for the learner.
        return SampleBatch({k: unpack_column(v[positions]) for k, v in self.columns.items()})

    def live_columns(self) -> dict[str, np.ndarray]:
        """The live rows, oldest first (packed columns unpacked)."""
        positions = np.arange(self.first_live, self.added) % self.capacity
        return {
            k: np.ascontiguousarray(unpack_column(v[positions])) for k, v in self.columns.items()
        }

    def compressed_columns(self) -> list[str]:
        return [k for k, v in self.columns.items() if is_compressed(v)]


class LockstepReplayBuffer:
    """Whole env steps of all policies in a ring of `capacity` env steps (uniform replay).

    Each stored env step records, per policy, where its rows start (an absolute
    row number of that policy's `_RowRing`) and how many there are (0 when no
    agent of the policy acted). Sampling draws env steps and gathers, for each
    policy, the rows of exactly those steps, in the order drawn.
    """

    def __init__(self, capacity: int, seed: int | None = None) -> None:
        if int(capacity) < 1:
            raise ValueError(f"Replay buffer capacity must be >= 1, got {capacity}.")
        self.capacity = int(capacity)
        self._rng = np.random.default_rng(seed)
        self._rings: dict[str, _RowRing] = {}
        self._starts: dict[str, np.ndarray] = {}
        self._counts: dict[str, np.ndarray] = {}
        self._next = 0  # slot written by the next env step
        self._size = 0
        self._num_added = 0
        self._num_sampled = 0

    def __len__(self) -> int:
        """Env steps held."""
        return self._size

    def num_rows(self) -> int:
        return sum(ring.added - ring.first_live for ring in self._rings.values())

    def _policy(self, policy_id: str) -> _RowRing:
        ring = self._rings.get(policy_id)
        if ring is None:
            ring = self._rings[policy_id] = _RowRing(self.capacity)
            self._starts[policy_id] = np.zeros(self.capacity, np.int64)
            self._counts[policy_id] = np.zeros(self.capacity, np.int64)
        return ring

    def add(self, batch: MultiAgentBatch) -> None:
        """Groups the rows of every policy into env steps and stores those steps."""
        per_policy = {
            pid: {k: np.asarray(v) for k, v in b.items() if k not in _LOCKSTEP_SKIPPED}
            for pid, b in batch.policy_batches.items()
            if b.count > 0
        }
        if not per_policy:
            return
        step_of_row, num_steps = _env_steps(per_policy)
        first_step = max(0, num_steps - self.capacity)  # more steps than fit: keep the last
        num_new = num_steps - first_step
        new_starts: dict[str, np.ndarray] = {}
        new_counts: dict[str, np.ndarray] = {}
        new_rows: dict[str, dict[str, np.ndarray]] = {}
        for pid in per_policy:
            self._policy(pid)
        for pid, ring in self._rings.items():
            counts = np.zeros(num_new, np.int64)
            if pid in per_policy:
                steps = step_of_row[pid]
                keep = steps >= first_step
                order = np.argsort(steps[keep], kind="stable")
                new_rows[pid] = {k: v[keep][order] for k, v in per_policy[pid].items()}
                counts = np.bincount(steps[keep] - first_step, minlength=num_new)
            new_counts[pid] = counts
            new_starts[pid] = ring.added + np.cumsum(counts) - counts
        slots = (self._next + np.arange(num_new)) % self.capacity
        size = min(self._size + num_new, self.capacity)
        next_slot = (self._next + num_new) % self.capacity
        oldest = (next_slot - size) % self.capacity
        # Where the oldest env step kept after this add is: an old slot or a new step.
        oldest_new = int(np.flatnonzero(slots == oldest)[0]) if oldest in slots else None
        for pid, ring in self._rings.items():
            if oldest_new is None:
                ring.first_live = int(self._starts[pid][oldest])
            else:
                ring.first_live = int(new_starts[pid][oldest_new])
            if pid in new_rows:
                ring.add(new_rows[pid], int(new_counts[pid].sum()))
            self._starts[pid][slots] = new_starts[pid]
            self._counts[pid][slots] = new_counts[pid]
        self._next, self._size = next_slot, size
        self._num_added += num_steps

    def sample(self, num_items: int, policy_ids: list[str] | None = None) -> MultiAgentBatch:
        """`num_items` env steps drawn uniformly with replacement (the same draws for
        every policy); a policy none of whose agents acted at them is left out."""
        if self._size == 0:
            raise ValueError("Cannot sample from an empty replay buffer; add() rows first.")
        oldest = (self._next - self._size) % self.capacity
        slots = (oldest + self._rng.integers(0, self._size, size=num_items)) % self.capacity
        self._num_sampled += num_items
        out = {}
        for pid in policy_ids or list(self._rings):
            if pid not in self._rings:
                continue
            counts = self._counts[pid][slots]
            total = int(counts.sum())
            if total == 0:
                continue
            offsets = np.cumsum(counts) - counts
            rows = np.repeat(self._starts[pid][slots] - offsets, counts) + np.arange(total)
            out[pid] = self._rings[pid].take(rows)
        return MultiAgentBatch(out, num_items)

    def stats(self) -> dict[str, Any]:
        return {
            "capacity": self.capacity,
            "size": self._size,
            "num_added": self._num_added,
            "num_sampled": self._num_sampled,
            "rows": {pid: ring.added - ring.first_live for pid, ring in self._rings.items()},
        }

    def get_state(self) -> dict[str, Any]:
        """numpy arrays (live rows and per-step row counts, oldest first) and numbers."""
        slots = (self._next - self._size + np.arange(self._size)) % self.capacity
        return {
            "capacity": self.capacity,
            "num_added": self._num_added,
            "num_sampled": self._num_sampled,
            "rng": self._rng.bit_generator.state,
            "policies": {
                pid: {
                    "counts": np.ascontiguousarray(self._counts[pid][slots]),
                    "columns": ring.live_columns(),
                    "compressed_columns": ring.compressed_columns(),
                }
                for pid, ring in self._rings.items()
            },
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self._rings, self._starts, self._counts = {}, {}, {}
        policies = state.get("policies") or {}
        sizes = {len(np.asarray(p["counts"])) for p in policies.values()}
        size = sizes.pop() if sizes else 0
        if sizes or size > self.capacity:
            raise ValueError(
                f"Lockstep replay state holds {sorted({size, *sizes})} env steps per policy; "
                f"expected one count for at most {self.capacity} (the capacity)."
            )
        for pid, policy_state in policies.items():
            counts = np.asarray(policy_state["counts"], np.int64)
            packed = set(policy_state.get("compressed_columns") or ())
            columns = {
                k: pack_column(v) if k in packed else np.asarray(v)
                for k, v in (policy_state.get("columns") or {}).items()
            }
            num_rows = int(counts.sum())
            ring = self._policy(pid)
            ring.capacity = max(ring.capacity, num_rows)
            ring.add(columns, num_rows)
            self._counts[pid][:size] = counts
            self._starts[pid][:size] = np.cumsum(counts) - counts
        self._next, self._size = size % self.capacity, size
        self._num_added = int(state.get("num_added", size))
        self._num_sampled = int(state.get("num_sampled", 0))
        if state.get("rng"):
            self._rng.bit_generator.state = state["rng"]


# Columns never stored in lockstep mode (as in `ReplayBuffer`).
_LOCKSTEP_SKIPPED = (SampleBatch.INFOS, SampleBatch.SEQ_LENS)


def _env_steps(per_policy: dict[str, dict[str, np.ndarray]]) -> tuple[dict[str, np.ndarray], int]:
    """Each row's env-step number (steps sorted by (eps_id, t)), per policy; and the
    number of distinct env steps."""
    keys = []
    for pid, columns in per_policy.items():
        missing = [c for c in (SampleBatch.EPS_ID, SampleBatch.T) if c not in columns]
        if missing:
            raise ValueError(
                f"Lockstep replay groups rows into env steps by 'eps_id' and 't', but the "
                f"batch of policy {pid!r} has no {missing} column."
            )
        keys.append(
            np.stack(
                [
                    np.asarray(columns[SampleBatch.EPS_ID], np.int64).reshape(-1),
                    np.asarray(columns[SampleBatch.T], np.int64).reshape(-1),
                ],
                axis=1,
            )
        )
    unique, inverse = np.unique(np.concatenate(keys), axis=0, return_inverse=True)
    inverse = inverse.reshape(-1)
    out, start = {}, 0
    for pid, k in zip(per_policy, keys):
        out[pid] = inverse[start : start + len(k)]
        start += len(k)
    return out, len(unique)


def _to_sequences(batch: SampleBatch, length: int) -> SampleBatch:
    """Rows -> sequences: columns become [num_seqs, length, ...], zero-padded."""
    starts: list[int] = []
    lens: list[int] = []
    for trajectory_start, trajectory_end in _trajectory_bounds(batch):
        for s in range(trajectory_start, trajectory_end, length):
            starts.append(s)
            lens.append(min(length, trajectory_end - s))
    offsets = np.arange(length)
    rows = np.asarray(starts)[:, None] + offsets[None, :]
    valid = offsets[None, :] < np.asarray(lens)[:, None]
    rows = np.where(valid, rows, 0)
    out = {}
    for k, v in batch.items():
        if k in (SampleBatch.INFOS, SampleBatch.SEQ_LENS):
            continue
        seq = v[rows]
        seq[~valid] = 0
        out[k] = seq
    out[_SEQ_LEN] = np.asarray(lens, dtype=np.int32)
    return SampleBatch(out)


def _from_sequences(sample: SampleBatch) -> SampleBatch:
    seq_lens = sample.pop(_SEQ_LEN)
    num_seqs = len(seq_lens)
    per_seq = (BATCH_INDEXES, WEIGHTS)
    out = SampleBatch(
        {k: v.reshape(-1, *v.shape[2:]) for k, v in sample.items() if k not in per_seq}
    )
    length = out.count // max(num_seqs, 1)
    for k in per_seq:
        if k in sample:
            out[k] = np.repeat(sample[k], length)
    out[SampleBatch.SEQ_LENS] = seq_lens
    return out


def _trajectory_bounds(batch: SampleBatch) -> list[tuple[int, int]]:
    if SampleBatch.EPS_ID not in batch:
        return [(0, batch.count)]
    eps = batch[SampleBatch.EPS_ID]
    cuts = np.flatnonzero(eps[1:] != eps[:-1]) + 1
    bounds = [0, *cuts.tolist(), len(eps)]
    return list(zip(bounds[:-1], bounds[1:]))


def __getattr__(name: str) -> Any:
    # RLlib 1.13's `ReplayActor`: `MultiAgentReplayBuffer` as a Ray actor class, made on
    # first use (Ray is the `ray` extra: without it, an ImportError saying so).
    if name == "ReplayActor":
        from corral.utils.actors import replay_actor_class

        return replay_actor_class(MultiAgentReplayBuffer)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
