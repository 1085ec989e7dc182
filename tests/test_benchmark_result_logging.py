"""Smoke test of `benchmarks/result_logging.py --quick` (no timing assertions)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "result_logging.py"


def test_result_logging_quick(tmp_path: Path) -> None:
    pytest.importorskip(
        "tensorboardX", reason="tensorboardX (the `tensorboard` extra) is not installed"
    )
    env = {k: v for k, v in os.environ.items() if k != "CORRAL_RESULTS_DIR"}
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick"],
        capture_output=True,
        text=True,
        timeout=300,
        env={**env, "CORRAL_RESULTS_DIR": str(tmp_path)},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert lines[0]["bench"] == "result_logging" and "machine" in lines[0]
    summary = lines[-1]
    assert summary["summary"] is True
    assert set(summary["ms_per_result"]) == {"corral_tbx", "per_value", "unified"}
    assert all(ms > 0 for ms in summary["ms_per_result"].values())
    assert summary["corral_tbx_over_per_value"] > 0
