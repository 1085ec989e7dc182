"""RLlib 1.13's filter API: `is_concurrent`, `reset_buffer` (and `rs`)."""

from __future__ import annotations

import numpy as np

from corral.utils.filter import ConcurrentMeanStdFilter, Filter, MeanStdFilter, NoFilter


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
