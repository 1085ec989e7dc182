"""RLlib 1.13's own example scripts run on corral after the porting rule (API.md).

The scripts are test data beside the repository (`../shared/rllib-1.13-examples/`, never
copied here); their `run` script rewrites the imports by the porting rule, installs what
the scripts themselves import (gym 0.23, pettingzoo, dm-tree, ...) into this interpreter's
environment when missing, and runs each with small stop criteria. On a clone without that
folder this test is skipped.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
RUN = ROOT.parent / "shared" / "rllib-1.13-examples" / "run"

pytestmark = pytest.mark.rllib_examples


@pytest.mark.skipif(
    not RUN.exists(),
    reason=f"RLlib 1.13's example scripts are not beside this checkout ({RUN} is missing)",
)
def test_rllib_1_13_examples_pass():
    env = {
        **os.environ,
        # The run script changes directory: it needs an absolute interpreter path.
        "PY": sys.executable,
        "TIMEOUT": os.environ.get("RLLIB_EXAMPLES_TIMEOUT", "300"),
    }
    proc = subprocess.run(
        ["bash", str(RUN)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=3600,
        check=False,
    )
    out = proc.stdout + proc.stderr
    summary = re.findall(r"^(\d+) passed, (\d+) failed$", proc.stdout, re.MULTILINE)
    assert summary, f"no summary line from {RUN}:\n{out[-4000:]}"
    passed, failed = (int(n) for n in summary[-1])
    assert failed == 0 and passed > 0 and proc.returncode == 0, out[-4000:]
