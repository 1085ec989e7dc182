"""All of RLlib 1.13's example scripts, run against corral under the porting rule (test data only).

`../shared/rllib-1.13-examples/run` runs 12 of RLlib's example scripts in CI. RLlib 1.13's
wheel ships 73 (`rllib/examples/*.py`). This script copies them, with the example envs,
models and policies they import, into a scratch folder outside the repository, applies the
porting rule of docs/migrating.md (the same rewrite as `rllib_1_13_tests.py`), and runs each
script in its own process with small stop criteria: of the flags it defines, `--framework
torch` (or `--torch`), `--stop-iters 2`, `--stop-timesteps 2000`. A script passes when it
exits 0 within `--timeout` seconds.

A failure is put in a class by its last error line (a failed Tune trial's own error, not
Tune's "Trials did not complete"): TensorFlow-only code, a package corral does not use
(DeepMind Lab, RecSim, VizDoom, ...), Ray's own API after `import ray` was dropped, RLlib's
test data files (the wheel does not ship them), an interactive prompt, one of the stubs RLlib
left behind for renamed scripts, a GPU asked for on a machine without one, an env id of gym's
time that Gymnasium keeps under a newer version, a bug of the script's own, or the time
limit. The rest (`other`) are the ones to read. `--keep-ray` keeps the `import ray` lines
(the porting rule's variant for when the `ray` extra is installed).

Usage:
    python scripts/rllib_1_13_example_scripts.py --download        # fetch ray==1.13.0's wheel
    python scripts/rllib_1_13_example_scripts.py --rllib PATH/TO/rllib -k custom_
    python scripts/rllib_1_13_example_scripts.py --download --keep-ray -k rollout_worker

Prints one JSON line per script and a summary line (passed, and failures per class).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

from rllib_1_13_tests import add_source_arguments, rewrite, rllib_of, scratch_folder

# The flags a script gets when it defines them (its argparse `add_argument("--...")`).
SMALL_RUN = {
    "--framework": ["torch"],
    "--torch": [],
    "--stop-iters": ["2"],
    "--stop-timesteps": ["2000"],
}

# A failure's class, from its last error line (first match wins).
FAILURE_CLASSES = [
    ("renamed-stub", r"This file has been renamed"),
    (
        "tensorflow-only",
        r"framework='tf|TensorFlow|tf_modelv2|enable_eager_execution|keras|"
        r"invalid choice: 'torch'|No module named 'rllib'",
    ),
    ("ray-api", r"name 'ray' is not defined|ray\._private|not an ray\.ObjectRef"),
    ("test-data", r"No files found matching|does not exist|/path/to/"),
    ("interactive", r"EOFError"),
    ("no-gpu", r"NoGPUsError|sees no CUDA GPU"),
    ("retired-env-id", r"Gymnasium has this env as"),
    # `ray.tune.run(...)` in a script that never imports `ray` (it fails on RLlib 1.13 too).
    ("script-bug", r"name 'corral' is not defined"),
    (
        "third-party",
        r"No module named|cannot import name 'Iterable' from 'collections'|"
        r"cannot import name '\w+' from 'pettingzoo|NotBuiltError|Name or service not known",
    ),
    ("time-limit", r"^timed out"),
]

TUNE_GAVE_UP = re.compile(r"TuneError: Trials did not complete")
ERROR_LINE = re.compile(r"^\S*(Error|Exception|Warning)\b.*|^\w+(\.\w+)*(Error|Exit): .*")


def prepare(rllib: Path, work: Path, keep_ray: bool) -> list[Path]:
    """Copies RLlib's examples into `work`, rewritten; the scripts to run."""
    shutil.copytree(rllib / "examples", work / "rllib_examples_support")
    for path in sorted((rllib / "examples").glob("*.py")):
        if path.name != "__init__.py":
            shutil.copyfile(path, work / path.name)
    for path in work.rglob("*.py"):
        path.write_text(rewrite(path.read_text(), keep_ray))
    return sorted(p for p in work.glob("*.py"))


def flags_for(script: Path) -> list[str]:
    """The small-run flags that `script` defines."""
    source = script.read_text()
    flags: list[str] = []
    for flag, values in SMALL_RUN.items():
        if re.search(rf"[\"']{re.escape(flag)}[\"']", source):
            flags += [flag, *values]
    return flags


def classify(last_error: str) -> str:
    """The failure class of a script whose last error line is `last_error`."""
    for name, pattern in FAILURE_CLASSES:
        if re.search(pattern, last_error):
            return name
    return "other"


def last_error(output: str) -> str:
    """The last error line of a script's `output` (a failed trial's own error, which comes
    before Tune's "Trials did not complete"); its last line when none looks like one."""
    lines = [ln.strip() for ln in output.splitlines()]
    errors = [ln for ln in lines if ERROR_LINE.match(ln) and not TUNE_GAVE_UP.search(ln)]
    return (errors or lines[-1:] or [""])[-1][:300]


def run_script(script: Path, work: Path, timeout: float) -> dict:
    """One script in its own process: passed, or its failure class and last error line."""
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(p for p in (str(work), os.environ.get("PYTHONPATH")) if p),
        "CORRAL_RESULTS_DIR": str(work / "results"),
        "SDL_VIDEODRIVER": "dummy",
        "SDL_AUDIODRIVER": "dummy",
    }
    flags = flags_for(script)
    try:
        proc = subprocess.run(
            [sys.executable, script.name, *flags],
            cwd=work,
            env=env,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
    except subprocess.TimeoutExpired:
        error = f"timed out after {timeout:.0f} s"
        return {"script": script.stem, "passed": False, "class": classify(error), "error": error}
    if proc.returncode == 0:
        return {"script": script.stem, "passed": True, "flags": flags}
    error = last_error(proc.stdout + proc.stderr)
    return {"script": script.stem, "passed": False, "class": classify(error), "error": error}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_source_arguments(parser)
    parser.add_argument(
        "-k", action="append", default=[], help="run only scripts whose name contains this"
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per script")
    parser.add_argument("--keep-ray", action="store_true", help="keep `import ray` lines")
    args = parser.parse_args()
    rllib = rllib_of(args)
    with scratch_folder("rllib113_examples_", args.keep) as work:
        results = []
        for script in prepare(rllib, work, args.keep_ray):
            if not args.k or any(k in script.stem for k in args.k):
                results.append(run_script(script, work, args.timeout))
                print(json.dumps(results[-1]), flush=True)
        failures = Counter(r["class"] for r in results if not r["passed"])
        summary = {
            "summary": True,
            "scripts": len(results),
            "passed": sum(r["passed"] for r in results),
            "failed_by_class": dict(sorted(failures.items())),
        }
        print(json.dumps(summary))


if __name__ == "__main__":
    main()
