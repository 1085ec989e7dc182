"""RLlib 1.13's `utils.replay_buffers` names: storage units, the prioritized, mix-in,
reservoir and simple buffers, the replay helpers and a user-written
`training_iteration()` built on them."""

from __future__ import annotations

import logging

import numpy as np
import pytest

from corral.agents.dqn import DQNTrainer
from corral.execution.common import NUM_AGENT_STEPS_SAMPLED, NUM_ENV_STEPS_SAMPLED
from corral.execution.rollout_ops import synchronous_parallel_sample
from corral.execution.train_ops import train_one_step
from corral.policy.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch
from corral.utils.replay_buffers import (
    BATCH_INDEXES,
    WEIGHTS,
    MultiAgentMixInReplayBuffer,
    MultiAgentPrioritizedReplayBuffer,
    MultiAgentReplayBuffer,
    PrioritizedReplayBuffer,
    ReplayBuffer,
    ReplayMode,
    ReservoirBuffer,
    SimpleReplayBuffer,
    StorageUnit,
)
from corral.utils.replay_buffers.multi_agent_replay_buffer import merge_dicts_with_warning
from corral.utils.replay_buffers.utils import (
    sample_min_n_steps_from_buffer,
    update_priorities_in_replay_buffer,
    validate_buffer_config,
    warn_replay_buffer_capacity,
)


def rows(start: int, n: int) -> SampleBatch:
    """`n` transitions whose `rewards` are their ids `start`, `start + 1`, ..."""
    ids = np.arange(start, start + n)
    return SampleBatch(
        {
            "obs": ids[:, None].astype(np.float32),
            "rewards": ids.astype(np.float32),
            "eps_id": ids // 1000,
            "t": ids % 1000,
            "infos": [{}] * n,
        }
    )


def episodes(lengths: list[int], first_id: int = 0, last_done: bool = True) -> SampleBatch:
    """Episodes of the given lengths, one after the other; the last one ends done only
    with `last_done`."""
    eps, t, dones = [], [], []
    for i, length in enumerate(lengths):
        eps += [first_id + i] * length
        t += list(range(length))
        done = [False] * length
        done[-1] = last_done or i < len(lengths) - 1
        dones += done
    return SampleBatch(
        {
            "obs": np.asarray(eps, np.float32)[:, None],
            "eps_id": np.asarray(eps),
            "t": np.asarray(t),
            "dones": np.asarray(dones),
        }
    )


# -- storage units ------------------------------------------------------------------


def test_storage_unit_names():
    assert StorageUnit("episodes") is StorageUnit.EPISODES
    assert StorageUnit.SEQUENCES == "sequences"
    with pytest.raises(ValueError, match="storage_unit"):
        ReplayBuffer(10, storage_unit="fragments-of-time")


def test_episodes_are_stored_whole_and_incomplete_ones_dropped():
    buf = ReplayBuffer(capacity=100, storage_unit="episodes", seed=0)
    slots = buf.add(episodes([3, 2, 4], last_done=False))
    assert slots.tolist() == [0, 1]  # the third episode never ended
    assert len(buf) == 2
    sample = buf.sample(10)
    # Ten whole episodes: every one starts at t=0 and ends done.
    starts = np.flatnonzero(sample["t"] == 0)
    assert len(starts) == 10
    assert sample["dones"].sum() == 10
    assert set(np.unique(sample["eps_id"]).tolist()) <= {0, 1}
    for start, end in zip(starts, [*starts[1:], sample.count]):
        assert sample["dones"][end - 1] and not sample["dones"][start : end - 1].any()
    with pytest.raises(ValueError, match="MultiAgentBatch"):
        buf.add(episodes([2]).as_multi_agent())


def test_episode_capacity_counts_timesteps_and_wraps():
    buf = ReplayBuffer(capacity=5, storage_unit="episodes", seed=0)
    buf.add(episodes([3, 3], first_id=0))  # 6 >= 5 timesteps: the next item wraps
    assert len(buf) == 2
    buf.add(episodes([2], first_id=7))
    stored = sorted(int(buf._read(np.asarray([i]))["eps_id"][0]) for i in range(len(buf)))
    assert stored == [1, 7]  # episode 0 was overwritten


def test_sequences_are_stored_by_seq_lens_with_their_states():
    batch = SampleBatch(
        {
            "obs": np.arange(6, dtype=np.float32)[:, None],
            "state_in_0": np.asarray([[10.0], [20.0], [30.0]]),
            "seq_lens": np.asarray([2, 3, 1]),
        }
    )
    buf = ReplayBuffer(capacity=100, storage_unit=StorageUnit.SEQUENCES, seed=0)
    assert buf.add(batch).tolist() == [0, 1, 2]
    sample = buf.sample(8)
    assert len(sample["seq_lens"]) == 8 == len(sample["state_in_0"])
    assert sample.count == sample["seq_lens"].sum()
    # Each sequence starts with the row its state belongs to.
    first_obs = {10.0: 0.0, 20.0: 2.0, 30.0: 5.0}
    starts = np.cumsum(sample["seq_lens"]) - sample["seq_lens"]
    for state, start in zip(sample["state_in_0"][:, 0], starts):
        assert sample["obs"][start, 0] == first_obs[state]


def test_item_buffer_state_round_trip():
    buf = ReplayBuffer(capacity=20, storage_unit="episodes", seed=3)
    buf.add(episodes([3, 1, 4]))
    restored = ReplayBuffer(capacity=20, storage_unit="episodes", seed=9)
    restored.set_state(buf.get_state())
    assert len(restored) == 3
    for i in range(3):
        a, b = buf._read(np.asarray([i])), restored._read(np.asarray([i]))
        assert a.keys() == b.keys() and all(np.array_equal(a[k], b[k]) for k in a)
    np.testing.assert_array_equal(buf.sample(5)["obs"], restored.sample(5)["obs"])


def test_prioritized_episodes_repeat_weight_and_index_per_row():
    buf = PrioritizedReplayBuffer(capacity=50, alpha=1.0, seed=0, storage_unit="episodes")
    buf.add(episodes([3, 5]))
    buf.update_priorities(np.asarray([0, 1]), np.asarray([1e-6, 1.0]))
    sample = buf.sample(20, beta=1.0)
    assert len(sample[WEIGHTS]) == len(sample[BATCH_INDEXES]) == sample.count
    assert set(sample[BATCH_INDEXES].tolist()) == {1}  # episode 0 is almost never drawn
    assert sample.count == 20 * 5
    with pytest.raises(ValueError, match="weight"):
        buf.add(episodes([2]), priorities=np.ones(2))


# -- multi-agent buffers ------------------------------------------------------------


def test_multi_agent_buffer_takes_rllib_arguments():
    buf = MultiAgentReplayBuffer(
        capacity=100,
        storage_unit="timesteps",
        learning_starts=10,
        replay_batch_size=4,
        underlying_buffer_config={"type": "PrioritizedReplayBuffer", "alpha": 1.0, "beta": 0.5},
        _enable_replay_buffer_api=True,
    )
    buf.add(rows(0, 5))
    assert buf.sample(4).count == 0  # before learning_starts
    buf.add(rows(5, 5))
    assert buf.replay_mode is ReplayMode.INDEPENDENT
    assert isinstance(buf.replay_buffers[DEFAULT_POLICY_ID], PrioritizedReplayBuffer)
    sample = buf.replay().policy_batches[DEFAULT_POLICY_ID]
    assert sample.count == 4 and WEIGHTS in sample
    only = buf.sample(3, policy_id=DEFAULT_POLICY_ID)
    assert list(only.policy_batches) == [DEFAULT_POLICY_ID]
    with pytest.raises(ValueError, match="(?i)lockstep"):
        MultiAgentReplayBuffer(10, storage_unit="episodes", replay_mode="lockstep")


def test_merge_dicts_with_warning_lets_the_call_win(caplog):
    with caplog.at_level(logging.WARNING):
        merged = merge_dicts_with_warning({"beta": 0.4, "alpha": 1}, {"beta": 0.9})
    assert merged == {"beta": 0.9, "alpha": 1}
    assert "beta" in caplog.text


def test_prioritized_multi_agent_sampling_follows_updated_priorities():
    buf = MultiAgentPrioritizedReplayBuffer(
        capacity=100, learning_starts=0, prioritized_replay_alpha=1.0, seed=0
    )
    assert buf.prioritized_replay_alpha == 1.0
    buf.add(MultiAgentBatch({"a": rows(0, 10), "b": rows(100, 10)}, 10))
    sample = buf.sample(200, policy_id="a").policy_batches["a"]
    assert np.all(sample[WEIGHTS] == 1.0)  # equal priorities: uniform, weights 1
    uniform_share = np.mean(sample["rewards"] == 3.0)
    td = np.full(10, 1e-3)
    td[3] = 10.0
    buf.update_priorities({"a": (np.arange(10), td)})
    sample = buf.sample(500, policy_id="a").policy_batches["a"]
    assert np.mean(sample["rewards"] == 3.0) > 0.9 > uniform_share
    weights = sample[WEIGHTS]
    assert weights.max() == 1.0
    assert np.all(weights[sample["rewards"] == 3.0] < weights[sample["rewards"] != 3.0].min())
    # Policy b's priorities are untouched.
    b = buf.sample(500, policy_id="b").policy_batches["b"]
    assert np.mean(b["rewards"] == 103.0) < 0.3


def test_prioritized_multi_agent_buffer_waits_for_learning_starts_and_refuses_lockstep():
    buf = MultiAgentPrioritizedReplayBuffer(capacity=50, replay_mode="lockstep")
    assert buf.replay_mode is ReplayMode.INDEPENDENT
    buf.add(rows(0, 999))
    assert buf.sample(5).count == 0  # RLlib's default learning_starts: 1000
    buf.add(rows(999, 1))
    assert buf.sample(5).count == 5


def test_mixin_ratio_zero_returns_only_new_items():
    buf = MultiAgentMixInReplayBuffer(capacity=100, replay_ratio=0.0, seed=0)
    buf.add(rows(0, 5))
    sample = buf.sample(10).policy_batches[DEFAULT_POLICY_ID]
    assert sample["rewards"].tolist() == [0.0, 1.0, 2.0, 3.0, 4.0]
    assert buf.sample(10).count == 0  # nothing new since
    buf.add(rows(5, 12))
    first = buf.sample(10).policy_batches[DEFAULT_POLICY_ID]["rewards"].tolist()
    second = buf.sample(10).policy_batches[DEFAULT_POLICY_ID]["rewards"].tolist()
    assert first == list(range(5, 15)) and second == [15.0, 16.0]


def test_mixin_ratio_half_mixes_new_and_replayed_items():
    buf = MultiAgentMixInReplayBuffer(capacity=1000, replay_ratio=0.5, seed=0)
    buf.add(rows(0, 100))
    buf.sample(200)  # returns the 100 new rows (and 100 replayed ones)
    news, olds = 0, 0
    for step in range(20):
        first = 100 + 10 * step
        buf.add(rows(first, 10))
        sample = buf.sample(20).policy_batches[DEFAULT_POLICY_ID]
        ids = sample["rewards"]
        assert set(range(first, first + 10)) <= set(ids.tolist())  # every new row
        news += np.sum(ids >= first)
        olds += np.sum(ids < first)
        assert set(sample) >= {WEIGHTS, BATCH_INDEXES}
    assert abs(news / (news + olds) - 0.5) < 0.05
    assert MultiAgentMixInReplayBuffer(replay_ratio=1.0).replay_ratio == 1.0
    with pytest.raises(ValueError, match="ratio"):
        MultiAgentMixInReplayBuffer(replay_ratio=1.5)


def test_mixin_ratio_one_only_replays():
    buf = MultiAgentMixInReplayBuffer(capacity=100, replay_ratio=1.0, seed=0)
    buf.add(rows(0, 10))
    buf.add(rows(10, 1))
    sample = buf.sample(300).policy_batches[DEFAULT_POLICY_ID]
    assert sample.count == 300
    assert np.mean(sample["rewards"] == 10.0) < 0.2  # the newest row is not favoured


def test_mixin_state_round_trip_keeps_waiting_items():
    buf = MultiAgentMixInReplayBuffer(capacity=100, replay_ratio=0.0, seed=0)
    buf.add(rows(0, 4))
    restored = MultiAgentMixInReplayBuffer(capacity=100, replay_ratio=0.0, seed=0)
    restored.set_state(buf.get_state())
    sample = restored.sample(10).policy_batches[DEFAULT_POLICY_ID]
    assert sample["rewards"].tolist() == [0.0, 1.0, 2.0, 3.0]


# -- reservoir and simple buffers ----------------------------------------------------


def test_reservoir_keeps_a_uniform_sample_of_all_rows():
    buf = ReservoirBuffer(capacity=1000, seed=0)
    total = 20000
    for start in range(0, total, 50):
        buf.add_timesteps(rows(start, 50))
    assert len(buf) == 1000
    kept = buf._columns["rewards"]
    assert len(np.unique(kept)) == 1000
    # Deciles of the history: about 100 kept rows each (chi-square, 9 dof, p = 0.001).
    counts = np.bincount((kept // (total // 10)).astype(int), minlength=10)
    chi2 = np.sum((counts - 100.0) ** 2 / 100.0)
    assert chi2 < 27.9, counts
    # A ring buffer would hold only the last 1000 rows.
    fifo = ReplayBuffer(1000, seed=0)
    for start in range(0, total, 50):
        fifo.add_timesteps(rows(start, 50))
    assert fifo._columns["rewards"].min() == total - 1000
    assert buf.stats()["num_add_calls"] == total


def test_timesteps_buffer_keeps_each_added_batch_as_one_item():
    buf = ReplayBuffer(capacity=10, seed=0)
    for i in range(3):
        buf.add(rows(10 * i, 4))
    # Three items of four timesteps: 12 >= 10 timesteps wrapped the next slot to 0.
    assert len(buf) == 3
    stats = buf.stats()
    assert stats["added_count"] == 12 and stats["num_entries"] == 3
    assert stats["added_count_wrapped"] == 0 and stats["eviction_started"]
    sample = buf.sample(2)
    assert sample.count == 8 and buf.stats()["sampled_count"] == 8
    # Each item comes back whole: four consecutive ids.
    for start in (0, 4):
        ids = sample["rewards"][start : start + 4]
        assert ids[0] % 10 == 0 and np.array_equal(ids, ids[0] + np.arange(4))
    buf.add(rows(100, 4))  # overwrites slot 0, the first batch
    assert len(buf) == 3
    assert 0.0 not in buf.sample(200)["rewards"]
    restored = ReplayBuffer(capacity=10, seed=0)
    restored.add(rows(0, 1))
    restored.set_state(buf.get_state())
    assert len(restored) == 3 and restored.stats()["added_count"] == 16
    assert sorted(set(restored.sample(300)["rewards"][::4])) == [10.0, 20.0, 100.0]


def test_one_row_items_then_a_larger_batch_keep_their_slots():
    buf = PrioritizedReplayBuffer(capacity=4, alpha=1.0, seed=0)
    buf.add(rows(0, 1), weight=1e-9)
    buf.add(rows(1, 1), weight=1.0)
    buf.add(rows(2, 3), weight=1.0)  # one item of three rows after two one-row items
    assert len(buf) == 3 and buf.stats()["added_count"] == 5
    sample = buf.sample(300, beta=0.5)
    assert 0.0 not in sample["rewards"]
    # The three-row item repeats its weight and slot on each of its rows.
    assert set(sample[BATCH_INDEXES].tolist()) == {1, 2}
    assert np.count_nonzero(sample[BATCH_INDEXES] == 2) % 3 == 0
    with pytest.raises(ValueError, match="add_timesteps"):
        buf.add(rows(5, 2), priorities=[1.0, 2.0])


def test_timesteps_buffer_stores_multi_agent_batches():
    buf = PrioritizedReplayBuffer(capacity=100, alpha=0.5, seed=0)
    for i in range(2):
        buf.add(MultiAgentBatch({"a": rows(10 * i, 2), "b": rows(10 * i + 5, 2)}, 2))
    assert len(buf) == 2 and buf.stats()["added_count"] == 4
    sample = buf.sample(3, beta=0.5)
    assert isinstance(sample, MultiAgentBatch) and sample.count == 6
    assert sample.policy_batches["a"].count == 6
    restored = PrioritizedReplayBuffer(capacity=100, alpha=0.5, seed=0)
    restored.set_state(buf.get_state())
    assert len(restored) == 2
    assert set(restored.sample(50).policy_batches["b"]["rewards"].tolist()) == {5, 6, 15, 16}


def test_multi_agent_buffer_stores_timesteps_and_counts_the_policies_samples():
    buf = MultiAgentReplayBuffer(capacity=10, seed=0)
    buf.add(MultiAgentBatch({"a": rows(0, 3), "b": rows(10, 2)}, 3))
    assert len(buf) == 5  # one item per timestep of each policy
    sample = buf.sample(4)
    assert sample.policy_batches["a"].count == 4 == sample.policy_batches["b"].count
    assert sample.count == 8  # RLlib 1.13: the sum of the policies' samples


def test_sequences_state_restores_into_a_buffer_of_another_sequence_length():
    buf = MultiAgentPrioritizedReplayBuffer(
        capacity=15, replay_sequence_length=2, learning_starts=0, prioritized_replay_alpha=1.0
    )
    for i in range(5):
        buf.add(rows(1000 * i, 2))  # one episode of two steps: one sequence each
    assert len(buf) == 5
    restored = MultiAgentPrioritizedReplayBuffer(capacity=15, learning_starts=0)
    restored.set_state(buf.get_state())
    sample = restored.sample(3).policy_batches[DEFAULT_POLICY_ID]
    assert sample.count == 6 and sample["obs"].shape == (6, 1)
    np.testing.assert_array_equal(sample[SampleBatch.SEQ_LENS], [2, 2, 2])


def test_reservoir_of_two_row_batches_samples_whole_batches():
    buf = ReservoirBuffer(capacity=100, seed=0)
    for i in range(1000):
        buf.add(rows(2 * i, 2))
    # Items fill it while it holds fewer than 100 timesteps (RLlib 1.13's rule).
    assert len(buf) == 49
    sample = buf.sample(500)
    assert sample.count == 1000
    np.testing.assert_array_equal(sample["rewards"][1::2], sample["rewards"][::2] + 1)
    # A uniform sample of all 2000 ids (a ring would hold only the last ~100).
    assert 700 < sample["rewards"].mean() < 1300


def test_reservoir_of_episodes_keeps_early_and_late_ones():
    buf = ReservoirBuffer(capacity=40, storage_unit="episodes", seed=1)
    for i in range(2000):
        buf.add(episodes([2], first_id=i))
    ids = np.asarray([int(item["eps_id"][0]) for item in buf._items or []])
    assert len(ids) == 19
    assert ids.min() < 1000 < ids.max()


def test_simple_replay_buffer_replays_whole_batches():
    buf = SimpleReplayBuffer(capacity=2, seed=0)
    for i in range(3):
        buf.add(rows(10 * i, 3))
    assert len(buf) == 2
    seen = {float(buf.sample(1)["rewards"][0]) for _ in range(50)}
    assert seen == {10.0, 20.0}  # the first batch made room for the third
    assert buf.sample(100).count == 3


# -- helpers ------------------------------------------------------------------------


def test_sample_min_n_steps_from_buffer():
    buf = ReplayBuffer(capacity=100, storage_unit="episodes", seed=0)
    buf.add(episodes([3, 4, 5]))
    batch = sample_min_n_steps_from_buffer(buf, min_steps=10, count_by_agent_steps=False)
    assert batch is not None and batch.count >= 10
    ma = MultiAgentPrioritizedReplayBuffer(capacity=100, learning_starts=50)
    ma.add(rows(0, 10))
    assert sample_min_n_steps_from_buffer(ma, 5, count_by_agent_steps=True) is None


def test_update_priorities_in_replay_buffer_reads_td_errors():
    buf = MultiAgentPrioritizedReplayBuffer(
        capacity=100, learning_starts=0, prioritized_replay_alpha=1.0, seed=0
    )
    buf.add(rows(0, 10))
    train_batch = buf.sample(64)
    indexes = train_batch.policy_batches[DEFAULT_POLICY_ID][BATCH_INDEXES]
    td = np.where(indexes == indexes[0], 50.0, 1e-4)
    results = {DEFAULT_POLICY_ID: {"learner_stats": {"td_error": td}}}
    update_priorities_in_replay_buffer(buf, {}, train_batch, results)
    policy_buffer = buf.replay_buffers[DEFAULT_POLICY_ID]
    assert policy_buffer.stats()["max_priority"] == pytest.approx(50.0 + 1e-6)
    sample = buf.sample(400).policy_batches[DEFAULT_POLICY_ID]
    assert np.mean(sample[BATCH_INDEXES] == indexes[0]) > 0.9
    # A uniform buffer is left alone, and results without TD errors are skipped.
    update_priorities_in_replay_buffer(MultiAgentReplayBuffer(10), {}, train_batch, results)
    update_priorities_in_replay_buffer(buf, {}, train_batch, {DEFAULT_POLICY_ID: {}})


def test_validate_buffer_config_moves_rllib_1_13_keys():
    config = {
        "buffer_size": 5000,
        "prioritized_replay": True,
        "prioritized_replay_alpha": 0.5,
        "learning_starts": 100,
        "train_batch_size": 32,
        "multiagent": {"replay_mode": "independent"},
        "replay_buffer_config": {
            "type": "MultiAgentPrioritizedReplayBuffer",
            "_enable_replay_buffer_api": True,
        },
    }
    validate_buffer_config(config)
    buffer_config = config["replay_buffer_config"]
    assert buffer_config["type"] == "corral.utils.replay_buffers.MultiAgentPrioritizedReplayBuffer"
    assert buffer_config["capacity"] == 5000
    assert buffer_config["prioritized_replay_alpha"] == 0.5
    assert buffer_config["learning_starts"] == 100
    assert buffer_config["replay_batch_size"] == 32
    assert "prioritized_replay" not in buffer_config
    from corral.utils.from_config import from_config

    buf = from_config(ReplayBuffer, buffer_config)
    assert isinstance(buf, MultiAgentPrioritizedReplayBuffer)
    assert buf.capacity == 5000 and buf.replay_starts == 100 and buf.alpha == 0.5

    legacy = {"train_batch_size": 8, "replay_buffer_config": {"type": "MultiAgentReplayBuffer"}}
    validate_buffer_config(legacy)
    assert legacy["replay_buffer_config"]["type"] == "corral.execution.MultiAgentReplayBuffer"
    assert legacy["replay_buffer_config"]["prioritized_replay_alpha"] == 0.0

    lockstep = {
        "multiagent": {"replay_mode": "lockstep"},
        "replay_buffer_config": {
            "type": "MultiAgentPrioritizedReplayBuffer",
            "_enable_replay_buffer_api": True,
        },
    }
    with pytest.raises(ValueError, match="lockstep"):
        validate_buffer_config(lockstep)
    with pytest.raises(ValueError, match="type"):
        validate_buffer_config({"replay_buffer_config": {}})


def test_warn_replay_buffer_capacity_refuses_more_than_the_memory(monkeypatch):
    from corral.utils import deprecation

    monkeypatch.setattr(deprecation, "_logged_keys", set())
    with pytest.raises(ValueError, match="Estimated max memory"):
        warn_replay_buffer_capacity(item=rows(0, 10), capacity=1e15)


# -- a user's training_iteration -----------------------------------------------------


class PrioritizedDQN(DQNTrainer):
    """RLlib 1.13-style `training_iteration()` with its own prioritized buffer."""

    def setup(self, config):
        super().setup(config)
        self.prio_buffer = MultiAgentPrioritizedReplayBuffer(
            capacity=1000, learning_starts=64, seed=0
        )
        self.trained_rows = 0

    def training_iteration(self):
        new_batch = synchronous_parallel_sample(worker_set=self.workers, concat=True)
        self._counters[NUM_ENV_STEPS_SAMPLED] += new_batch.env_steps()
        self._counters[NUM_AGENT_STEPS_SAMPLED] += new_batch.agent_steps()
        self.prio_buffer.add(new_batch)
        train_batch = self.prio_buffer.sample(self.config["train_batch_size"])
        if train_batch.count == 0:
            return {}
        train_results = train_one_step(self, train_batch)
        update_priorities_in_replay_buffer(
            self.prio_buffer, self.config, train_batch, train_results
        )
        self.trained_rows += train_batch.count
        self.workers.sync_weights(global_vars={"timestep": self._counters[NUM_ENV_STEPS_SAMPLED]})
        return train_results


def test_user_training_iteration_with_prioritized_buffer():
    trainer = PrioritizedDQN(
        config={
            "env": "CartPole-v1",
            "num_workers": 0,
            "rollout_fragment_length": 32,
            "train_batch_size": 32,
            "min_iter_time_s": 0,
            "min_sample_timesteps_per_reporting": 0,
            "framework": "torch",
        }
    )
    updates = []
    update = trainer.prio_buffer.update_priorities
    trainer.prio_buffer.update_priorities = lambda prio_dict: (
        updates.append(prio_dict),
        update(prio_dict),
    )
    try:
        for _ in range(3):
            result = trainer.train()
        assert trainer.trained_rows > 0
        # train_one_step's results carry the replayed rows' TD errors (RLlib 1.13's
        # `td_error` fetch): every trained batch updated its rows' priorities.
        assert len(updates) == 2  # (the first iteration samples 32 < learning_starts)
        indexes, td_errors = updates[-1][DEFAULT_POLICY_ID]
        assert len(indexes) == len(td_errors) == 32
        assert np.all(np.isfinite(td_errors)) and np.any(td_errors != td_errors[0])
        assert "default_policy" in result["info"]["learner"]
        stats = trainer.prio_buffer.stats()["policies"][DEFAULT_POLICY_ID]
        assert stats["num_added"] == result["timesteps_total"]
    finally:
        trainer.stop()
