import numpy as np
import pytest

from corral.policy.sample_batch import (
    DEFAULT_POLICY_ID,
    MultiAgentBatch,
    SampleBatch,
    concat_samples,
)


def make(n, start=0, eps=0):
    return SampleBatch(
        {
            SampleBatch.OBS: np.arange(start, start + n, dtype=np.float32).reshape(n, 1),
            SampleBatch.REWARDS: np.ones(n, np.float32),
            SampleBatch.EPS_ID: np.full(n, eps),
        }
    )


def test_count_slice_and_concat():
    a, b = make(3), make(2, start=3, eps=1)
    c = concat_samples([a, b])
    assert c.count == len(c) == 5
    assert c[SampleBatch.OBS][:, 0].tolist() == [0, 1, 2, 3, 4]
    assert c[1:3][SampleBatch.OBS][:, 0].tolist() == [1, 2]


def test_columns_must_have_equal_length():
    with pytest.raises(ValueError, match="differ in length"):
        SampleBatch({"obs": np.zeros(3), "rewards": np.zeros(2)})


def test_concat_rejects_different_columns():
    a = make(2)
    b = SampleBatch({"obs": np.zeros((2, 1), np.float32)})
    with pytest.raises(ValueError, match="different columns"):
        concat_samples([a, b])


def test_split_by_episode_keeps_order():
    batch = concat_samples([make(2, eps=5), make(3, start=2, eps=7), make(1, start=5, eps=5)])
    parts = batch.split_by_episode()
    assert [p.count for p in parts] == [2, 3, 1]
    assert [int(p[SampleBatch.EPS_ID][0]) for p in parts] == [5, 7, 5]


def test_shuffle_is_a_permutation():
    batch = make(50)
    shuffled = batch.shuffle(np.random.default_rng(0))
    assert sorted(shuffled[SampleBatch.OBS][:, 0].tolist()) == list(range(50))
    assert shuffled[SampleBatch.OBS][:, 0].tolist() != list(range(50))


def test_multi_agent_concat_counts_env_steps():
    ma = MultiAgentBatch({"p0": make(2), "p1": make(4)}, env_steps=4)
    both = concat_samples([ma, make(3).as_multi_agent()])
    assert both.env_steps() == 7
    assert both.agent_steps() == 9
    assert set(both.policy_batches) == {"p0", "p1", DEFAULT_POLICY_ID}


def test_wrap_as_needed():
    b = make(2)
    assert MultiAgentBatch.wrap_as_needed({DEFAULT_POLICY_ID: b}, 2) is b
    assert isinstance(MultiAgentBatch.wrap_as_needed({"x": b}, 2), MultiAgentBatch)
