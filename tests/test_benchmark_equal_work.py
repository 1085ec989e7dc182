"""Smoke test of `benchmarks/equal_work.py --quick` on one row (no timing assertions)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parents[1] / "benchmarks" / "equal_work.py"


def test_equal_work_quick_one_row(tmp_path: Path) -> None:
    pytest.importorskip(
        "stable_baselines3",
        reason="Stable-Baselines3 is not installed (the `bench` extra): equal_work.py "
        "compares corral with it",
    )
    # One A2C batch (8 envs x 5 steps) per side: the run is mostly three interpreters'
    # start-up.
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--rows", "a2c", "--steps", "40"],
        capture_output=True,
        text=True,
        timeout=300,
        env={"CORRAL_RESULTS_DIR": str(tmp_path), **_env()},
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = [json.loads(line) for line in proc.stdout.splitlines()]
    assert lines[0]["bench"] == "equal_work" and "machine" in lines[0]
    runs = [line for line in lines if "impl" in line]
    assert sorted(r["impl"] for r in runs) == ["corral", "hand", "sb3"]
    assert all(r["env_steps"] >= 40 and r["torch_threads"] == 1 for r in runs)
    summary = lines[-1]
    assert summary["summary"] is True and summary["errors"] == 0
    row = summary["a2c"]
    assert row["ratio_corral_sb3"]["train_s"] > 0
    assert row["ratio_corral_hand"]["total_s"] > 0


def _env() -> dict[str, str]:
    import os

    return {k: v for k, v in os.environ.items() if k != "CORRAL_RESULTS_DIR"}
