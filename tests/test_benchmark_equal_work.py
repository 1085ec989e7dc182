"""Smoke test of `benchmarks/equal_work.py --quick` on one row (no timing assertions)."""

import pytest


def test_equal_work_quick_one_row(run_benchmark) -> None:
    pytest.importorskip(
        "stable_baselines3",
        reason="Stable-Baselines3 is not installed (the `bench` extra): equal_work.py "
        "compares corral with it",
    )
    # One A2C batch (8 envs x 5 steps) per side: the run is mostly three interpreters'
    # start-up.
    lines = run_benchmark("equal_work.py", "--quick", "--rows", "a2c", "--steps", "40")
    assert lines[0]["bench"] == "equal_work" and "machine" in lines[0]
    runs = [line for line in lines if "impl" in line]
    assert sorted(r["impl"] for r in runs) == ["corral", "hand", "sb3"]
    assert all(r["env_steps"] >= 40 and r["torch_threads"] == 1 for r in runs)
    summary = lines[-1]
    assert summary["summary"] is True and summary["errors"] == 0
    row = summary["a2c"]
    assert row["ratio_corral_sb3"]["train_s"] > 0
    assert row["ratio_corral_hand"]["total_s"] > 0
