"""Replay buffers: ring storage, prioritized sampling, n-step returns, state."""

import numpy as np
import pytest

from corral.policy.sample_batch import MultiAgentBatch, SampleBatch
from corral.utils import checkpoints
from corral.utils.replay_buffers import (
    BATCH_INDEXES,
    N_STEP,
    WEIGHTS,
    MultiAgentReplayBuffer,
    PrioritizedReplayBuffer,
    ReplayBuffer,
    SumSegmentTree,
    adjust_nstep,
)


def rows(start, n, eps_id=0):
    ids = np.arange(start, start + n)
    return SampleBatch(
        {
            "obs": np.stack([ids, -ids], axis=1).astype(np.float32),
            "actions": ids % 2,
            "rewards": ids.astype(np.float32),
            "terminateds": np.zeros(n, bool),
            "eps_id": np.full(n, eps_id),
            "infos": [{}] * n,
        }
    )


def test_ring_buffer_overwrites_oldest_and_drops_infos():
    buf = ReplayBuffer(5, seed=0)
    buf.add_timesteps(rows(0, 3))
    buf.add_timesteps(rows(3, 4))
    assert len(buf) == 5
    sample = buf.sample(200)
    assert "infos" not in sample
    assert set(sample["rewards"].tolist()) == {2.0, 3.0, 4.0, 5.0, 6.0}
    np.testing.assert_array_equal(sample["obs"][:, 0], sample["rewards"])
    assert buf.stats()["num_added"] == 7


def test_batch_larger_than_capacity_keeps_the_last_rows():
    buf = ReplayBuffer(4, seed=0)
    buf.add_timesteps(rows(0, 10))
    assert sorted(set(buf.sample(100)["rewards"].tolist())) == [6.0, 7.0, 8.0, 9.0]


def test_add_rejects_other_columns_and_empty_sample():
    buf = ReplayBuffer(4)
    with pytest.raises(ValueError, match="empty"):
        buf.sample(1)
    buf.add_timesteps(rows(0, 2))
    bad = rows(0, 2)
    bad["extra"] = np.zeros(2)
    with pytest.raises(ValueError, match="columns"):
        buf.add_timesteps(bad)


def test_state_roundtrip_keeps_rows_order_and_rng(tmp_path):
    buf = ReplayBuffer(6, seed=3)
    for i in range(4):
        buf.add_timesteps(rows(3 * i, 3))
    checkpoints.write_array_state(str(tmp_path), "buf", buf.get_state())
    restored = ReplayBuffer(6, seed=99)
    restored.set_state(checkpoints.read_array_state(str(tmp_path), "buf"))
    assert len(restored) == 6
    a, b = buf.sample(50), restored.sample(50)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    # The next add overwrites the oldest row in both.
    buf.add_timesteps(rows(100, 1))
    restored.add_timesteps(rows(100, 1))
    assert sorted(buf.sample(200)["rewards"]) == sorted(restored.sample(200)["rewards"])


def test_sum_tree_prefix_search():
    tree = SumSegmentTree(4)
    tree[np.arange(4)] = np.array([1.0, 2.0, 3.0, 4.0])
    assert tree.sum() == 10.0
    found = tree.find_prefixsum_idx(np.array([0.0, 0.99, 1.0, 2.99, 3.0, 5.99, 6.0, 9.99]))
    np.testing.assert_array_equal(found, [0, 0, 1, 1, 2, 2, 3, 3])


def test_prioritized_sampling_frequencies_match_priorities():
    alpha = 0.7
    priorities = np.array([0.5, 1.0, 2.0, 4.0, 0.1, 3.0, 1.5])
    buf = PrioritizedReplayBuffer(8, alpha=alpha, seed=1)
    buf.add_timesteps(rows(0, len(priorities)), priorities=priorities)
    n = 40_000
    idx = buf.sample(n, beta=0.4)[BATCH_INDEXES]
    observed = np.bincount(idx, minlength=len(priorities))
    expected = n * priorities**alpha / np.sum(priorities**alpha)
    chi2 = float(np.sum((observed - expected) ** 2 / expected))
    # 6 degrees of freedom: P(chi2 > 22.46) = 0.001.
    assert chi2 < 22.46, (observed, expected)


def test_importance_weights_follow_schaul_et_al():
    alpha, beta = 0.6, 0.5
    priorities = np.array([1.0, 2.0, 4.0])
    buf = PrioritizedReplayBuffer(4, alpha=alpha, seed=1)
    buf.add_timesteps(rows(0, 3), priorities=priorities)
    sample = buf.sample(100, beta=beta)
    probs = priorities**alpha / np.sum(priorities**alpha)
    weights = (3 * probs) ** -beta
    weights /= weights.max()
    np.testing.assert_allclose(sample[WEIGHTS], weights[sample[BATCH_INDEXES]], rtol=1e-5)


def test_new_rows_get_max_priority_and_updates_apply():
    buf = PrioritizedReplayBuffer(4, alpha=1.0, seed=0)
    buf.add_timesteps(rows(0, 2))
    buf.update_priorities(np.array([0, 1]), np.array([1e-6, 5.0]))
    buf.add_timesteps(rows(2, 1))  # priority 5.0 (the max so far)
    idx = buf.sample(10_000)[BATCH_INDEXES]
    counts = np.bincount(idx, minlength=3)
    assert counts[0] < 5 and abs(counts[1] - counts[2]) < 600
    with pytest.raises(ValueError, match="> 0"):
        buf.update_priorities(np.array([0]), np.array([0.0]))
    for bad in (np.nan, np.inf):  # among valid ones: the whole update is refused
        with pytest.raises(ValueError, match="finite"):
            buf.update_priorities(np.array([0, 1, 2]), np.array([1.0, bad, 2.0]))
    with pytest.raises(IndexError, match=r"\[0, 3\)"):
        buf.update_priorities(np.array([1, 3]), np.array([1.0, 1.0]))  # row 3 is not filled
    assert buf._max_priority == 5.0


def test_prioritized_state_roundtrip(tmp_path):
    buf = PrioritizedReplayBuffer(4, alpha=0.6, seed=0)
    buf.add_timesteps(rows(0, 6), priorities=np.arange(1.0, 7.0))
    checkpoints.write_array_state(str(tmp_path), "p", buf.get_state())
    restored = PrioritizedReplayBuffer(4, alpha=0.6, seed=5)
    restored.set_state(checkpoints.read_array_state(str(tmp_path), "p"))
    a, b = buf.sample(64), restored.sample(64)
    np.testing.assert_array_equal(a["rewards"], b["rewards"])
    np.testing.assert_allclose(a[WEIGHTS], b[WEIGHTS], rtol=1e-6)


def test_nstep_matches_hand_computation():
    gamma = 0.9
    batch = SampleBatch(
        {
            "obs": np.arange(6, dtype=np.float32),
            "new_obs": np.arange(1, 7, dtype=np.float32),
            "rewards": np.array([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], np.float32),
            # Episode 7 ends terminated at row 2; episode 8 is cut by the fragment end.
            "terminateds": np.array([0, 0, 1, 0, 0, 0], bool),
            "truncateds": np.zeros(6, bool),
            "eps_id": np.array([7, 7, 7, 8, 8, 8]),
        }
    )
    adjust_nstep(3, gamma, batch)
    expected_rewards = [
        1 + 0.9 * 2 + 0.81 * 3,
        2 + 0.9 * 3,
        3,
        4 + 0.9 * 5 + 0.81 * 6,
        5 + 0.9 * 6,
        6,
    ]
    np.testing.assert_allclose(batch["rewards"], expected_rewards, rtol=1e-6)
    np.testing.assert_array_equal(batch["new_obs"], [3, 3, 3, 6, 6, 6])
    np.testing.assert_array_equal(batch["terminateds"], [1, 1, 1, 0, 0, 0])
    np.testing.assert_array_equal(batch[N_STEP], [3, 2, 1, 3, 2, 1])


def test_nstep_one_is_identity():
    batch = rows(0, 4)
    batch["new_obs"] = batch["obs"] + 1
    before = batch.copy()
    adjust_nstep(1, 0.99, batch)
    for k in ("rewards", "new_obs", "terminateds"):
        np.testing.assert_array_equal(batch[k], before[k])


def test_multi_agent_buffer_per_policy_and_priorities(tmp_path):
    buf = MultiAgentReplayBuffer(16, prioritized=True, alpha=1.0, beta=0.4, eps=0.5, seed=0)
    buf.add(MultiAgentBatch({"a": rows(0, 4), "b": rows(10, 2)}, 4))
    buf.add(rows(20, 3))  # a SampleBatch goes to the default policy
    assert set(buf.replay_buffers) == {"a", "b", "default_policy"}
    sample = buf.sample(8)
    assert set(sample.policy_batches) == {"a", "b", "default_policy"}
    assert all(b.count == 8 for b in sample.policy_batches.values())
    a = sample.policy_batches["a"]
    buf.update_priorities({"a": (a[BATCH_INDEXES], np.zeros(8))})  # -> priority eps
    checkpoints.write_array_state(str(tmp_path), "ma", buf.get_state())
    restored = MultiAgentReplayBuffer(16, prioritized=True, alpha=1.0, seed=0)
    restored.set_state(checkpoints.read_array_state(str(tmp_path), "ma"))
    assert {k: len(v) for k, v in restored.replay_buffers.items()} == {
        "a": 4,
        "b": 2,
        "default_policy": 3,
    }


def test_sequences_are_stored_and_sampled_as_units():
    buf = MultiAgentReplayBuffer(8, replay_sequence_length=2, seed=0)
    batch = rows(0, 5)
    batch["eps_id"] = np.array([1, 1, 1, 2, 2])
    buf.add(batch)
    sample = buf.sample(20).policy_batches["default_policy"]
    assert sample.count == 40
    assert set(sample["seq_lens"].tolist()) <= {1, 2}
    pairs = sample["rewards"].reshape(20, 2)
    for (first, second), n in zip(pairs, sample["seq_lens"]):
        # Sequences [0, 1], [2, pad], [3, 4]: contiguous within an episode.
        assert (first, second) in {(0.0, 1.0), (2.0, 0.0), (3.0, 4.0)}
        assert n == (1 if first == 2.0 else 2)


# -- lockstep replay ------------------------------------------------------------------


def agent_rows(eps_id, steps, agent_index=0):
    """One agent's rows at env steps `steps` of episode `eps_id`; reward = 100 * eps + t."""
    t = np.asarray(steps)
    return SampleBatch(
        {
            "obs": np.stack([t, np.full(len(t), agent_index)], axis=1).astype(np.float32),
            "rewards": (100 * eps_id + t).astype(np.float32),
            "eps_id": np.full(len(t), eps_id),
            "t": t,
            "infos": [{}] * len(t),
        }
    )


def episode(eps_id):
    """Policy "a": one agent at steps 0-5; policy "b": two agents at steps 0-3, stored
    agent after agent (not in time order), as the sampler hands them out."""
    b = SampleBatch.concat_samples(
        [agent_rows(eps_id, range(4), 0), agent_rows(eps_id, range(4), 1)]
    )
    return MultiAgentBatch({"a": agent_rows(eps_id, range(6)), "b": b}, 6)


def step_keys(batch):
    return list(zip(batch["eps_id"].tolist(), batch["t"].tolist()))


def test_lockstep_samples_the_same_env_steps_for_every_policy(tmp_path):
    buf = MultiAgentReplayBuffer(8, replay_mode="lockstep", seed=0)
    buf.add(episode(1))
    assert len(buf) == 6 + 8
    sample = buf.sample(100)
    assert sample.env_steps() == 100
    a, b = sample.policy_batches["a"], sample.policy_batches["b"]
    assert "infos" not in a
    drawn = step_keys(a)  # "a" acts at every step: one row per drawn env step
    assert len(drawn) == 100 and len(set(drawn)) == 6
    # "b" has both agents' rows of exactly the drawn steps at which it acted, in order.
    assert step_keys(b) == [k for k in drawn if k[1] <= 3 for _ in range(2)]
    assert b["obs"][:, 1].tolist() == [0.0, 1.0] * (b.count // 2)
    np.testing.assert_array_equal(b["rewards"], 100 + b["obs"][:, 0])

    # 12 env steps in a ring of 8: the oldest 4 (all of episode 1's "b" rows) go.
    buf.add(episode(2))
    assert len(buf._lockstep) == 8 and len(buf) == 8 + 8
    sample = buf.sample(200)
    assert set(step_keys(sample.policy_batches["a"])) == {(1, 4), (1, 5)} | {
        (2, t) for t in range(6)
    }
    assert {k[0] for k in step_keys(sample.policy_batches["b"])} == {2}

    checkpoints.write_array_state(str(tmp_path), "lockstep", buf.get_state())
    restored = MultiAgentReplayBuffer(8, replay_mode="lockstep", seed=5)
    restored.set_state(checkpoints.read_array_state(str(tmp_path), "lockstep"))
    for pid in ("a", "b"):
        expected, got = buf.sample(50), restored.sample(50)
        for k in ("obs", "rewards", "eps_id", "t"):
            np.testing.assert_array_equal(
                expected.policy_batches[pid][k], got.policy_batches[pid][k]
            )


def test_lockstep_rejects_prioritized_replay_and_rows_without_steps():
    with pytest.raises(ValueError, match="Lockstep replay mode is not supported with prio"):
        MultiAgentReplayBuffer(8, prioritized=True, replay_mode="lockstep")
    with pytest.raises(ValueError, match="replay_mode"):
        MultiAgentReplayBuffer(8, replay_mode="sideways")
    buf = MultiAgentReplayBuffer(8, replay_mode="lockstep")
    with pytest.raises(ValueError, match="'t'"):
        buf.add(rows(0, 3))
    with pytest.raises(ValueError, match="independent"):
        buf.set_state(MultiAgentReplayBuffer(8).get_state())
