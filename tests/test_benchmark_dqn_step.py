"""Smoke test of `benchmarks/dqn_step.py --quick` (no timing assertions)."""


def test_dqn_step_quick(run_benchmark) -> None:
    lines = run_benchmark("dqn_step.py", "--quick")
    assert lines[0]["bench"] == "dqn_step" and "machine" in lines[0]
    summary = lines[-1]
    assert summary["summary"] is True
    assert set(summary["median_us"]) == {"corral_step", "hand_step", "corral_update", "hand_update"}
    assert all(us > 0 for us in summary["median_us"].values())
    assert summary["step_corral_over_hand"] > 0 and summary["update_corral_over_hand"] > 0
