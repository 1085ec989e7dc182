"""AlphaStar's learner shards, embedded: sizes as RLlib 1.13 computes them, at most
`max_num_policies_to_train` learning policies, batches routed to their shard's buffer."""

from __future__ import annotations

import numpy as np
import pytest

from corral.agents.alpha_star.distributed_learners import DistributedLearners
from corral.policy.sample_batch import MultiAgentBatch, SampleBatch

POLICIES = {pid: object() for pid in ("a", "b", "c", "frozen")}


def _learners(max_policies: int = 3, num_gpus: float = 0, **kwargs) -> DistributedLearners:
    return DistributedLearners(
        config={"num_gpus": num_gpus},
        max_num_policies_to_train=max_policies,
        replay_actor_args=[4, 0.0],
        policy_map=POLICIES,
        **kwargs,
    )


@pytest.mark.parametrize(
    ("num_gpus", "max_policies", "shards", "per_shard"),
    [(0, 3, 3, 1), (2, 3, 2, 2), (4, 2, 2, 1), (1, 3, 1, 3)],
)
def test_shards_follow_rllibs_rule(num_gpus, max_policies, shards, per_shard):
    learners = _learners(max_policies, num_gpus)
    assert learners.num_learner_shards == shards
    assert learners.num_policies_per_shard == per_shard


def test_policies_fill_shards_until_full():
    learners = _learners(2, num_gpus=1)
    assert learners.add_policy("a") is POLICIES["a"]
    learners.add_policy("b")
    learners.add_policy("b")  # already learning: no new place
    assert len(learners) == 2
    with pytest.raises(RuntimeError, match="All shards are full"):
        learners.add_policy("c")
    buffer, policy = learners.get_replay_and_policy_actors("a")
    assert policy is POLICIES["a"] and buffer is learners.get_replay_and_policy_actors("b")[0]
    assert learners.get_policy_id(POLICIES["b"]) == "b"
    learners.remove_policy("a")
    assert learners.get_policy_actor("a") is None
    learners.add_policy("c")
    assert [pid for pid, _, _ in learners] == ["b", "c"]
    with pytest.raises(KeyError):
        learners.add_policy("unknown")


def test_batches_of_learning_policies_only_are_kept_and_replayed():
    learners = _learners()
    learners.add_policy("a")
    learners.add_policy("b")
    rows = {p: SampleBatch({"obs": np.zeros(n, np.float32)}) for p, n in (("a", 2), ("frozen", 3))}
    learners.add_batch(MultiAgentBatch(rows, 5))
    assert {pid: b.count for pid, b in learners.replay().items()} == {"a": 2}
    assert learners.replay() == {}
    assert len(learners.get_replay_actors()) == 2
    learners.stop()
    assert len(learners) == 0


def test_each_shard_replays_its_own_reproducible_stream():
    def draws(learners: DistributedLearners) -> list[list[float]]:
        for pid in ("a", "b", "c"):
            learners.add_policy(pid)
        return [[buffer._rng.random() for _ in range(3)] for buffer in learners.get_replay_actors()]

    first = draws(_learners(replay_seed=7))
    assert len(first) == 3
    assert len({tuple(d) for d in first}) == 3  # no two shards draw the same stream
    assert draws(_learners(replay_seed=7)) == first  # the same seed: the same streams
    assert draws(_learners(replay_seed=8)) != first
