"""Smoke test of `benchmarks/dqn_step.py --quick` (no timing assertions)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "dqn_step.py"


def test_dqn_step_quick(tmp_path: Path) -> None:
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
    assert lines[0]["bench"] == "dqn_step" and "machine" in lines[0]
    summary = lines[-1]
    assert summary["summary"] is True
    assert set(summary["median_us"]) == {"corral_step", "hand_step", "corral_update", "hand_update"}
    assert all(us > 0 for us in summary["median_us"].values())
    assert summary["step_corral_over_hand"] > 0 and summary["update_corral_over_hand"] > 0
