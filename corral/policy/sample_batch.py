"""Batches of experience: a dict of numpy columns, one row per (agent) step.

`SampleBatch` is what a rollout worker produces and what a learner trains
on. Columns use RLlib's names (see the class constants). A `MultiAgentBatch`
maps policy ids to `SampleBatch`es and remembers how many env steps made it.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

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
    # Whether a model call is for training (RLlib 1.13's `SampleBatch.is_training`;
    # e.g. batch-norm layers switch mode on it).
    is_training = False

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        for key, value in self.items():
            if not isinstance(value, np.ndarray) and key != self.INFOS:
                super().__setitem__(key, np.asarray(value))
        self._check_lengths()

    def _check_lengths(self) -> None:
        lengths = {k: len(v) for k, v in self.items() if k != self.SEQ_LENS}
        if len(set(lengths.values())) > 1:
            raise ValueError(f"SampleBatch columns differ in length: {lengths}")

    @property
    def count(self) -> int:
        """Number of rows (steps) in this batch."""
        for key, value in self.items():
            if key != self.SEQ_LENS:
                return len(value)
        return 0

    def __len__(self) -> int:  # type: ignore[override]
        return self.count

    def env_steps(self) -> int:
        return self.count

    def agent_steps(self) -> int:
        return self.count

    def __setitem__(self, key: str, value: Any) -> None:
        if not isinstance(value, np.ndarray) and key != self.INFOS:
            value = np.asarray(value)
        super().__setitem__(key, value)

    def copy(self, shallow: bool = False) -> SampleBatch:  # type: ignore[override]
        if shallow:
            return SampleBatch(dict(self))
        return SampleBatch({k: (list(v) if k == self.INFOS else v.copy()) for k, v in self.items()})

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, slice):
            return self.slice(key.start or 0, key.stop if key.stop is not None else self.count)
        return super().__getitem__(key)

    def slice(self, start: int, end: int) -> SampleBatch:
        """Rows `start` to `end` (views, not copies)."""
        return SampleBatch({k: v[start:end] for k, v in self.items() if k != self.SEQ_LENS})

    def take(self, indices: np.ndarray) -> SampleBatch:
        """Rows at `indices` (a copy)."""
        out = {}
        for k, v in self.items():
            if k == self.SEQ_LENS:
                continue
            out[k] = [v[i] for i in indices] if k == self.INFOS else v[indices]
        return SampleBatch(out)

    def shuffle(self, rng: np.random.Generator | None = None) -> SampleBatch:
        """Returns the rows in a random order."""
        rng = rng or np.random.default_rng()
        return self.take(rng.permutation(self.count))

    def columns(self, keys: Iterable[str]) -> list[np.ndarray]:
        return [self[k] for k in keys]

    def rows(self) -> Iterator[dict[str, Any]]:
        for i in range(self.count):
            yield {k: v[i] for k, v in self.items() if k != self.SEQ_LENS}

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
        return sum(v.nbytes for k, v in self.items() if isinstance(v, np.ndarray))

    def __repr__(self) -> str:
        cols = ", ".join(f"{k}: {getattr(v, 'shape', len(v))}" for k, v in self.items())
        return f"SampleBatch({self.count}: {cols})"

    @staticmethod
    def concat_samples(samples: Sequence[SampleBatch | MultiAgentBatch]) -> Any:
        return concat_samples(samples)


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
            out[k] = np.concatenate([s[k] for s in samples])
    return SampleBatch(out)
