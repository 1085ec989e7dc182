"""AlphaStar's learner shards (RLlib 1.13's `DistributedLearners`), embedded.

RLlib 1.13 gives each learning policy of an AlphaStar league a Ray actor of its own (on
a GPU), grouped into "learner shards" that each share one `MixInMultiAgentReplayBuffer`
actor. corral keeps the shards' bookkeeping and runs them in the driver: a shard's
"policy actors" are the driver's own copies of its policies (the trainer's learner
thread trains them, in the driver process), and its replay buffer is a local
`MixInMultiAgentReplayBuffer`. The container decides which policies learn, holds at
most `max_num_policies_to_train` of them, and routes each sampled policy batch to the
buffer of its policy's shard.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from corral.execution.buffers.mixin_replay_buffer import MixInMultiAgentReplayBuffer
from corral.policy.policy import Policy
from corral.policy.sample_batch import MultiAgentBatch, SampleBatch


class DistributedLearners:
    """The learning policies of a league, in shards that each share a replay buffer.

    Args:
        config: the trainer's config (`num_gpus` sizes the shards, as in RLlib).
        max_num_policies_to_train: how many policies may ever learn at once.
        replay_actor_class: the replay buffer class of each shard (built with
            `replay_actor_args`), RLlib's `MixInMultiAgentReplayBuffer` by default.
        replay_actor_args: its constructor arguments (capacity, replay ratio).
        num_learner_shards: shards to reserve; None: min(`num_gpus` or the maximum,
            the maximum), RLlib's rule.
        policy_map: the driver's policies (where a shard finds each added policy).
        replay_seed: the trainer's seed; each shard's replay buffer then gets a seed of
            its own (`seed=` keyword), drawn from this seed and the shard's index, so
            the shards replay independent, reproducible streams. None: no seed passed.
    """

    def __init__(
        self,
        *,
        config: Mapping[str, Any],
        max_num_policies_to_train: int,
        replay_actor_class: Callable[..., Any] = MixInMultiAgentReplayBuffer,
        replay_actor_args: Sequence[Any] = (),
        num_learner_shards: int | None = None,
        policy_map: Mapping[str, Policy] | None = None,
        replay_seed: int | None = None,
    ) -> None:
        if max_num_policies_to_train < 1:
            raise ValueError(
                f"max_num_policies_to_train must be >= 1, got {max_num_policies_to_train}."
            )
        self.config = config
        self.num_gpus = config.get("num_gpus", 0) or 0
        self.max_num_policies_to_train = max_num_policies_to_train
        self.replay_actor_class = replay_actor_class
        self.replay_actor_args = list(replay_actor_args)
        self.policy_map = policy_map if policy_map is not None else {}
        self.replay_seed = replay_seed
        if num_learner_shards is None:
            num_learner_shards = min(
                int(math.ceil(self.num_gpus)) or max_num_policies_to_train,
                max_num_policies_to_train,
            )
        self.num_learner_shards = num_learner_shards
        self.num_policies_per_shard = math.ceil(max_num_policies_to_train / num_learner_shards)
        self.shards = [
            _Shard(self.num_policies_per_shard, self._replay_buffer_maker(index))
            for index in range(num_learner_shards)
        ]

    def shard_replay_seed(self, shard_index: int) -> int | None:
        """The seed of shard `shard_index`'s replay buffer (None without `replay_seed`)."""
        if self.replay_seed is None:
            return None
        state = np.random.SeedSequence([int(self.replay_seed), shard_index]).generate_state(1)
        return int(state[0])

    def _replay_buffer_maker(self, shard_index: int) -> Callable[[], Any]:
        def make() -> Any:
            seed = self.shard_replay_seed(shard_index)
            if seed is None:
                return self.replay_actor_class(*self.replay_actor_args)
            return self.replay_actor_class(*self.replay_actor_args, seed=seed)

        return make

    def add_policy(self, policy_id: str) -> Policy:
        """Lets `policy_id` (a policy of `policy_map`) learn, in the first shard with room.

        Returns:
            The policy (the shard's "policy actor").

        Raises:
            RuntimeError: every shard is full (`max_num_policies_to_train` learn).
            KeyError: `policy_map` has no such policy.
        """
        if policy_id not in self.policy_map:
            raise KeyError(f"No policy {policy_id!r} to learn (have {sorted(self.policy_map)}).")
        for shard in self.shards:
            if policy_id in shard.policy_ids:
                return self.policy_map[policy_id]
        for shard in self.shards:
            if len(shard) < shard.max_num_policies:
                shard.add(policy_id)
                return self.policy_map[policy_id]
        raise RuntimeError(
            f"All shards are full: {len(self)} policies learn (max_num_policies_to_train="
            f"{self.max_num_policies_to_train}); cannot let {policy_id!r} learn too."
        )

    def remove_policy(self, policy_id: str) -> None:
        """Stops `policy_id` learning (its replayed batches are dropped)."""
        for shard in self.shards:
            shard.remove(policy_id)

    def get_policy_actor(self, policy_id: str) -> Policy | None:
        """The learning policy `policy_id` (None if it does not learn)."""
        return self.get_replay_and_policy_actors(policy_id)[1]

    def get_replay_and_policy_actors(self, policy_id: str) -> tuple[Any, Policy | None]:
        """(its shard's replay buffer, the policy), or (None, None) if it does not learn."""
        for shard in self.shards:
            if policy_id in shard.policy_ids:
                return shard.replay_actor, self.policy_map[policy_id]
        return None, None

    def get_policy_id(self, policy_actor: Policy) -> str | None:
        """The id of a learning policy (None if it is none of them)."""
        for pid, policy, _ in self:
            if policy is policy_actor:
                return pid
        return None

    def get_replay_actors(self) -> list[Any]:
        """The replay buffers of the shards in use."""
        return [s.replay_actor for s in self.shards if s.replay_actor is not None]

    def add_batch(self, batch: SampleBatch | MultiAgentBatch) -> None:
        """Adds each learning policy's part of `batch` to its shard's replay buffer (the
        parts of frozen policies are dropped)."""
        batch = batch.as_multi_agent()
        for pid, policy_batch in batch.policy_batches.items():
            buffer = self.get_replay_and_policy_actors(pid)[0]
            if buffer is not None and policy_batch.count > 0:
                buffer.add_batch(MultiAgentBatch({pid: policy_batch}, policy_batch.count))

    def replay(self) -> dict[str, SampleBatch]:
        """Each learning policy's new batches mixed with replayed ones (policies with
        nothing new left out)."""
        out = {}
        for pid, _, buffer in self:
            mixed = buffer.replay(pid)
            if mixed is not None:
                out[pid] = mixed
        return out

    def stop(self) -> None:
        """Lets no policy learn any more and drops the replay buffers."""
        for shard in self.shards:
            shard.clear()

    def __len__(self) -> int:
        """How many policies learn."""
        return sum(len(s) for s in self.shards)

    def __iter__(self) -> Iterator[tuple[str, Policy, Any]]:
        """(policy id, policy, its shard's replay buffer) of each learning policy."""
        for shard in self.shards:
            for pid in shard.policy_ids:
                yield pid, self.policy_map[pid], shard.replay_actor


class _Shard:
    """Up to `max_num_policies` learning policies sharing one replay buffer (built with
    its first policy)."""

    def __init__(self, max_num_policies: int, make_replay_buffer: Callable[[], Any]) -> None:
        self.max_num_policies = max_num_policies
        self._make_replay_buffer = make_replay_buffer
        self.replay_actor: Any = None
        self.policy_ids: list[str] = []

    def add(self, policy_id: str) -> None:
        if self.replay_actor is None:
            self.replay_actor = self._make_replay_buffer()
        self.policy_ids.append(policy_id)

    def remove(self, policy_id: str) -> None:
        if policy_id in self.policy_ids:
            self.policy_ids.remove(policy_id)
            for held in ("replay_buffers", "last_added_batches"):
                getattr(self.replay_actor, held, {}).pop(policy_id, None)

    def clear(self) -> None:
        self.policy_ids = []
        self.replay_actor = None

    def __len__(self) -> int:
        return len(self.policy_ids)
