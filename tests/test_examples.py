"""Every script in `examples/` runs to completion with its smoke flags.

Parametrised over the files found, so a new example is picked up without editing this
test; a script that needs other flags than `--smoke` says so in `SMOKE_ARGS`.
"""

from __future__ import annotations

import ast
import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
EXAMPLES = sorted((ROOT / "examples").glob("*.py"))

# The flags that make a script quick (default: `--smoke`).
SMOKE_ARGS = {
    "curriculum.py": [],  # finishes in seconds as it is
    "self_play.py": ["--iterations", "2"],
}
# Scripts that need an optional extra.
NEEDS = {"ray_backend.py": "ray"}
TIMEOUT_S = 120


def test_examples_are_found():
    assert len(EXAMPLES) >= 15, [p.name for p in EXAMPLES]


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_has_a_docstring_saying_how_to_run_it(path):
    doc = ast.get_docstring(ast.parse(path.read_text()))
    assert doc, f"{path.name} has no module docstring"
    assert f"examples/{path.name}" in doc, f"{path.name}'s docstring does not say how to run it"


@pytest.mark.parametrize("path", EXAMPLES, ids=[p.name for p in EXAMPLES])
def test_example_runs(path, tmp_path):
    needed = NEEDS.get(path.name)
    if needed and importlib.util.find_spec(needed) is None:
        pytest.skip(f"{path.name} needs {needed}, which is not installed")
    env = {**os.environ, "HOME": str(tmp_path), "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run(
        [sys.executable, str(path), *SMOKE_ARGS.get(path.name, ["--smoke"])],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert proc.stdout.strip(), f"{path.name} printed nothing"


def test_old_gym_example_runs_without_gym(tmp_path):
    """The old-API env example must not need `gym` (corral wraps it without Shimmy)."""
    script = ROOT / "examples" / "custom_env_old_gym.py"
    code = (
        "import runpy, sys\n"
        "sys.modules['gym'] = None  # as if gym were not installed\n"
        f"sys.argv = [{str(script)!r}, '--smoke']\n"
        f"runpy.run_path({str(script)!r}, run_name='__main__')\n"
    )
    env = {**os.environ, "HOME": str(tmp_path), "PYTHONWARNINGS": "ignore"}
    proc = subprocess.run(
        [sys.executable, "-c", code],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
    )
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-4000:]
    assert "Greedy episode" in proc.stdout
