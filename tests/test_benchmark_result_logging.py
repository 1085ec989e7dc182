"""Smoke test of `benchmarks/result_logging.py --quick` (no timing assertions)."""

import pytest


def test_result_logging_quick(run_benchmark) -> None:
    pytest.importorskip(
        "tensorboardX", reason="tensorboardX (the `tensorboard` extra) is not installed"
    )
    lines = run_benchmark("result_logging.py", "--quick")
    assert lines[0]["bench"] == "result_logging" and "machine" in lines[0]
    summary = lines[-1]
    assert summary["summary"] is True
    assert set(summary["ms_per_result"]) == {"corral_tbx", "per_value", "unified"}
    assert all(ms > 0 for ms in summary["ms_per_result"].values())
    assert summary["corral_tbx_over_per_value"] > 0
