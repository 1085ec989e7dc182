"""`adjust_nstep` refuses a trajectory done before its last row, as RLlib 1.13 did."""

from __future__ import annotations

import numpy as np
import pytest

from corral.evaluation.postprocessing import adjust_nstep
from corral.policy.sample_batch import SampleBatch


def chain(dones: list[bool], eps_id: list[int] | None = None) -> SampleBatch:
    n = len(dones)
    columns = {
        "obs": np.arange(n, dtype=np.float32),
        "new_obs": np.arange(1, n + 1, dtype=np.float32),
        "actions": np.zeros(n, np.int64),
        "rewards": np.ones(n, np.float32),
        "dones": np.array(dones),
    }
    if eps_id is not None:
        columns["eps_id"] = np.array(eps_id)
    return SampleBatch(columns)


def test_done_in_the_middle_of_a_trajectory_raises():
    batch = chain([False, False, True, False, True])
    with pytest.raises(AssertionError, match="Unexpected done in middle of trajectory.*Row 2"):
        adjust_nstep(3, 0.9, batch)


def test_episodes_told_apart_by_eps_id_may_each_end_done():
    batch = chain([False, False, True, False, True], eps_id=[1, 1, 1, 2, 2])
    adjust_nstep(3, 1.0, batch)
    np.testing.assert_array_equal(batch["rewards"], [3, 2, 1, 2, 1])
