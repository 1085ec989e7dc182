"""Smoke test of `benchmarks/offpolicy_step.py --quick` (no timing assertions)."""

import pytest


@pytest.mark.parametrize("row", ["dqn_prioritized", "td3"])
def test_offpolicy_step_quick(run_benchmark, row: str) -> None:
    lines = run_benchmark("offpolicy_step.py", "--quick", "--row", row)
    assert lines[0]["bench"] == "offpolicy_step" and "machine" in lines[0]
    summary = lines[-1]
    assert summary["summary"] is True and summary["row"] == row
    assert set(summary["median_us"]) == {
        f"{side}_{part}"
        for side in ("corral", "hand")
        for part in ("step", "update", "act", "replay")
    }
    assert all(us > 0 for us in summary["median_us"].values())
    for part in ("step", "update", "act", "replay"):
        assert summary[f"{part}_corral_over_hand"] > 0
