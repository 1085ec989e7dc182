"""Smoke test of `benchmarks/replay_search.py --quick` (no timing assertions)."""


def test_replay_search_quick(run_benchmark) -> None:
    lines = run_benchmark("replay_search.py", "--quick")
    assert lines[0]["bench"] == "replay_search" and "machine" in lines[0]
    summary = lines[-1]
    assert summary["summary"] is True and summary["queries"] == 64
    assert [(c["capacity"], c["used"]) for c in summary["cases"]] == [(65536, 2000), (65536, 4000)]
    for case in summary["cases"]:
        assert set(case["median_us"]) == {"corral", "before"}
        assert all(us > 0 for us in case["median_us"].values())
        assert case["same_leaves"] == 1.0  # both paths find the same leaves
