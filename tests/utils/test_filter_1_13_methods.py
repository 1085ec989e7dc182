"""RLlib 1.13's filter API: `is_concurrent`, `reset_buffer` (and `rs`), `RunningStat`'s
properties."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

from corral.utils.filter import (
    ConcurrentMeanStdFilter,
    Filter,
    MeanStdFilter,
    NoFilter,
    RunningStat,
)


def test_is_concurrent():
    assert MeanStdFilter((2,)).is_concurrent is False
    assert ConcurrentMeanStdFilter((2,)).is_concurrent is True
    assert NoFilter().is_concurrent is True


def test_reset_buffer_forgets_the_unflushed_changes_only():
    f = MeanStdFilter((2,))
    f(np.array([1.0, 2.0]))
    f(np.array([3.0, 4.0]))
    assert f.buffer.n == 2 and f.rs is f.running_stats
    f.reset_buffer()
    assert f.buffer.n == 0 and f.running_stats.n == 2


def test_a_filter_written_for_1_13_implements_reset_buffer_only():
    class Counting(Filter):
        resets = 0

        def reset_buffer(self):
            self.resets += 1

    f = Counting()
    f.clear_buffer()  # what corral's workers call
    assert f.resets == 1


def test_running_stat_properties_are_rllib_1_13_s():
    for name in ("n", "mean", "var", "std", "shape"):
        assert isinstance(inspect.getattr_static(RunningStat, name), property), name
    rs = RunningStat((2,))
    assert rs.n == 0 and rs.shape == (2,)
    # Fewer than two observations: RLlib 1.13's variance is the mean squared.
    np.testing.assert_array_equal(rs.var, [0.0, 0.0])
    rs.push(np.array([3.0, -2.0]))
    np.testing.assert_array_equal(rs.var, [9.0, 4.0])
    np.testing.assert_array_equal(rs.std, [3.0, 2.0])
    rs.push(np.array([1.0, 0.0]))
    assert rs.n == 2
    np.testing.assert_allclose(rs.mean, [2.0, -1.0])
    np.testing.assert_allclose(rs.var, [2.0, 2.0])  # ddof=1
    with pytest.raises(AttributeError):
        rs.n = 5  # read-only, as in RLlib 1.13
    with pytest.raises(ValueError, match=r"shape \(2,\).*\(3,\)"):
        rs.push(np.zeros(3))
    assert RunningStat().shape == RunningStat(None).shape == ()
    assert "n=2" in repr(rs)


def test_mean_std_filter_with_one_observation_destds_as_rllib_1_13():
    # std after one observation is |x| (1.13's var): x / |x| without demeaning.
    f = MeanStdFilter((2,), demean=False, clip=None)
    out = f(np.array([4.0, -0.5]))
    np.testing.assert_allclose(out, [1.0, -1.0], rtol=1e-6)
