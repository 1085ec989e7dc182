"""Row-by-row batch builders (RLlib 1.13's `evaluation.sample_batch_builder`).

corral's samplers write preallocated buffers instead; these builders are for user code
that assembles batches itself (offline data writers, custom samplers, tests).
"""

from __future__ import annotations

import collections
from typing import Any

import numpy as np

from corral.policy.sample_batch import MultiAgentBatch, SampleBatch


def to_float_array(values: list) -> np.ndarray:
    """`values` as an array, float64 narrowed to float32 (RLlib's column dtype)."""
    array = np.array(values)
    if array.dtype == np.float64:
        return array.astype(np.float32)  # RLlib keeps float columns as float32
    return array


class SampleBatchBuilder:
    """Collects values column by column, then builds a `SampleBatch`.

    `add_values(obs=..., actions=..., ...)` adds one row; `add_batch(batch)` a whole
    batch; `build_and_reset()` returns the batch and starts afresh. `count` is the rows
    added so far.
    """

    _next_unroll_id = 0  # disambiguates unrolls within a single episode

    def __init__(self) -> None:
        self.buffers: dict[str, list] = collections.defaultdict(list)
        self.count = 0

    def add_values(self, **values: Any) -> None:
        """Adds one row (one value per column)."""
        for key, value in values.items():
            self.buffers[key].append(value)
        self.count += 1

    def add_batch(self, batch: SampleBatch) -> None:
        """Adds every row of `batch`."""
        for key, column in batch.items():
            self.buffers[key].extend(column)
        self.count += batch.count

    def build_and_reset(self) -> SampleBatch:
        """The rows so far as a `SampleBatch` (with an `unroll_id` column); then empty."""
        batch = SampleBatch({k: to_float_array(v) for k, v in self.buffers.items()})
        if SampleBatch.UNROLL_ID not in batch:
            batch[SampleBatch.UNROLL_ID] = np.repeat(
                SampleBatchBuilder._next_unroll_id, batch.count
            )
            SampleBatchBuilder._next_unroll_id += 1
        self.buffers.clear()
        self.count = 0
        return batch


class MultiAgentSampleBatchBuilder:
    """Per-agent builders whose trajectories are postprocessed by their policies and
    grouped by policy into a `MultiAgentBatch`.

    Args:
        policy_map: policy id -> policy.
        clip_rewards: clip rewards to their sign before postprocessing.
        callbacks: `DefaultCallbacks` whose `on_postprocess_trajectory` runs per agent.
    """

    def __init__(self, policy_map: Any, clip_rewards: bool, callbacks: Any) -> None:
        self.policy_map = policy_map
        self.clip_rewards = clip_rewards
        self.policy_builders = {pid: SampleBatchBuilder() for pid in policy_map}
        self.agent_builders: dict[Any, SampleBatchBuilder] = {}
        self.agent_to_policy: dict[Any, str] = {}
        self.callbacks = callbacks
        self.count = 0  # env steps

    def total(self) -> int:
        """Agent steps collected (pending and postprocessed)."""
        return sum(b.count for b in self.agent_builders.values()) + sum(
            b.count for b in self.policy_builders.values()
        )

    def has_pending_agent_data(self) -> bool:
        """Whether some agent's rows are not postprocessed yet."""
        return bool(self.agent_builders)

    def add_values(self, agent_id: Any, policy_id: str, **values: Any) -> None:
        """Adds one row of `agent_id`, whose trajectory `policy_id` postprocesses."""
        if agent_id not in self.agent_builders:
            self.agent_builders[agent_id] = SampleBatchBuilder()
            self.agent_to_policy[agent_id] = policy_id
        self.agent_builders[agent_id].add_values(**values)

    def postprocess_batch_so_far(self, episode: Any = None) -> None:
        """Postprocesses every agent's pending rows with its policy (the others'
        trajectories as `other_agent_batches`: {agent_id: (policy, batch)})."""
        pre = {}
        for agent_id, builder in self.agent_builders.items():
            policy = self.policy_map[self.agent_to_policy[agent_id]]
            batch = builder.build_and_reset()
            if self.clip_rewards and SampleBatch.REWARDS in batch:
                batch[SampleBatch.REWARDS] = np.sign(batch[SampleBatch.REWARDS])
            pre[agent_id] = (policy, batch)
        for agent_id, (policy, batch) in pre.items():
            others = {a: pb for a, pb in pre.items() if a != agent_id}
            original = batch.copy()
            post = policy.postprocess_trajectory(batch, others, episode)
            if self.callbacks is not None:
                self.callbacks.on_postprocess_trajectory(
                    worker=getattr(episode, "worker", None),
                    episode=episode,
                    agent_id=agent_id,
                    policy_id=self.agent_to_policy[agent_id],
                    policies=self.policy_map,
                    postprocessed_batch=post,
                    original_batches={**pre, agent_id: (policy, original)},
                )
            self.policy_builders[self.agent_to_policy[agent_id]].add_batch(post)
        self.agent_builders.clear()
        self.agent_to_policy.clear()

    def check_missing_dones(self) -> None:
        """Checks, when the env says every agent is done (`"__all__"`), that each agent
        with pending rows got its last one: a done row (`dones`, or RLlib's newer
        `terminateds` / `truncateds`) last.

        Raises:
            ValueError: an agent's last pending row is not done.
        """
        for agent_id, builder in self.agent_builders.items():
            flags = [
                builder.buffers[key][-1]
                for key in (SampleBatch.DONES, SampleBatch.TERMINATEDS, SampleBatch.TRUNCATEDS)
                if builder.buffers.get(key)
            ]
            if not any(bool(flag) for flag in flags):
                raise ValueError(
                    "The environment terminated for all agents, but there is no last "
                    f"observation of agent {agent_id!r} (policy "
                    f"{self.agent_to_policy[agent_id]!r}): include the last observation of "
                    "each live agent when setting '__all__' done, or set no_done_at_end=True."
                )

    def build_and_reset(self, episode: Any = None) -> MultiAgentBatch:
        """Postprocesses what is pending and returns everything as a `MultiAgentBatch`."""
        self.postprocess_batch_so_far(episode)
        batches = {
            pid: builder.build_and_reset()
            for pid, builder in self.policy_builders.items()
            if builder.count > 0
        }
        count, self.count = self.count, 0
        return MultiAgentBatch(batches, count)


__all__ = ["MultiAgentSampleBatchBuilder", "SampleBatchBuilder", "to_float_array"]
