"""RLlib 1.13's own unit tests, run against corral under the porting rule (test data only).

RLlib 1.13's wheel ships 58 unit-test files (`rllib/**/tests/test_*.py`). This script copies
them into a scratch folder outside the repository, applies the porting rule of
docs/migrating.md to them (`ray.rllib` -> `corral`, `ray.tune` -> `corral.tune`, `import
ray` dropped, `ray.init(...)` / `ray.shutdown()` replaced by `pass` so that the `setUpClass`
bodies they were alone in stay Python), and runs each file with pytest in its own process.
Nothing of RLlib is copied into corral: the tests are a yardstick of RLlib 1.x behaviour.

Two mappings keep the tests importable as they were: their imports of one another
(`ray.rllib.evaluation.tests.test_rollout_worker`) point at the copied tests, and
`ray.rllib.examples` at a copy of RLlib's examples package (envs and models the tests
use). Ray's own `conftest.py` files are left out, and so are the tests of RLlib's example
envs (`examples/env/tests`, whose envs import `collections.Iterable`, gone since Python 3.10).

RLlib's `rllib/train.py` and `rllib/evaluate.py` scripts are, under the porting rule, corral's
command line (`rllib train` -> `corral train`, `rllib evaluate` -> `corral evaluate`):
`tests/test_rllib_train_and_evaluate.py` runs `python <tests root>/train.py ...`, so two small
shims `train.py` / `evaluate.py` in the tests' root run `python -m corral.train` /
`python -m corral.evaluate` on this script's interpreter, with the arguments unchanged.

Files that only test Ray or TensorFlow (`SKIPPED` below) are not run. Many of the others
have tests outside what corral promises (TensorFlow paths, private attributes, Ray's
`ray.get`, RLlib's test data files, which the wheel does not ship): the summary counts
them as failures; docs/migrating.md says which and why.

Usage:
    python scripts/rllib_1_13_tests.py --download            # fetch ray==1.13.0's wheel first
    python scripts/rllib_1_13_tests.py --rllib PATH/TO/rllib  # an unpacked `rllib` package
    python scripts/rllib_1_13_tests.py --download -k rollout_worker   # only matching files

Prints one JSON line per file and a summary line (passed / failed / errors per file).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator
from pathlib import Path

# Test files of Ray's cluster or of TensorFlow alone: nothing of corral's to measure.
SKIPPED = {
    "tests/test_perf.py": "times Ray actors",
    "tests/test_gpus.py": "needs GPUs through Ray's resources",
    "tests/test_ray_client.py": "Ray client",
    "tests/test_placement_groups.py": "Ray placement groups through Tune on a Ray cluster",
    "tests/test_dependency_tf.py": "TensorFlow",
    "tests/test_eager_support.py": "TensorFlow eager mode",
    "tests/test_execution.py": "Ray actors (ray.remote) in RLlib's execution operators",
    "agents/tests/test_memory_leaks.py": "Ray's memory leak checker",
    "utils/tests/test_taskpool.py": "Ray's TaskPool of object refs",
}

# The porting rule (docs/migrating.md), plus the two test-data mappings described above;
# in order: the more specific rules first.
REWRITES: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"ray\.rllib\.examples"), "rllib_examples_support"),
    (re.compile(r"ray\.rllib\.((?:[a-z_]+\.)*tests)\b"), r"rllib_tests.\1"),
    (re.compile(r"^([ \t]*)import ray\.tune as tune[ \t]*$", re.M), r"\1from corral import tune"),
    (re.compile(r"ray\.rllib"), "corral"),
    (re.compile(r"ray\.tune"), "corral.tune"),
    (
        re.compile(r"^([ \t]*)from ray import tune([ \t]*(#.*)?)$", re.M),
        r"\1from corral import tune\2",
    ),
]
# The rule's last part: the lines `import ray`, `ray.init(...)`, `ray.shutdown()` dropped
# (kept when the `ray` extra is installed: `rewrite(..., keep_ray=True)`).
RAY_LINES_DROPPED: list[tuple[re.Pattern[str], str]] = [
    (re.compile(r"^[ \t]*import ray[ \t]*(#.*)?\n", re.M), ""),
    (re.compile(r"^([ \t]*)ray\.init\(.*\)[ \t]*(#.*)?$", re.M), r"\1pass"),
    (re.compile(r"^([ \t]*)ray\.shutdown\(\)[ \t]*(#.*)?$", re.M), r"\1pass"),
]

SUMMARY = re.compile(r"(\d+) (passed|failed|errors?|skipped)")


def download_rllib(cache: Path) -> Path:
    """RLlib 1.13's package from ray 1.13.0's wheel (downloaded with pip into `cache`)."""
    rllib = cache / "rllib"
    if rllib.is_dir():
        return rllib
    cache.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "download",
            "ray==1.13.0",
            "--no-deps",
            "--only-binary=:all:",
            "--python-version",
            "3.9",
            "--platform",
            "manylinux2014_x86_64",
            "-d",
            str(cache),
        ],
        check=True,
    )
    wheel = next(cache.glob("ray-1.13.0-*.whl"))
    # (The wheel keeps the package under `ray-1.13.0.data/purelib/ray/rllib/`.)
    with zipfile.ZipFile(wheel) as zf:
        names = [n for n in zf.namelist() if "ray/rllib/" in n]
        prefix = names[0][: names[0].index("ray/rllib/")]
        for name in names:
            if name.startswith(prefix + "ray/rllib/"):
                zf.extract(name, cache / "unpacked")
    shutil.move(str(cache / "unpacked" / prefix / "ray" / "rllib"), str(rllib))
    return rllib


def add_source_arguments(parser: argparse.ArgumentParser) -> None:
    """The options both yardsticks take: where RLlib 1.13 comes from, and `--keep`."""
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument("--rllib", type=Path, help="an unpacked RLlib 1.13 `rllib` package")
    source.add_argument("--download", action="store_true", help="pip-download ray==1.13.0")
    parser.add_argument("--cache", type=Path, default=Path(tempfile.gettempdir()) / "rllib113")
    parser.add_argument("--keep", action="store_true", help="keep the scratch folder")


def rllib_of(args: argparse.Namespace) -> Path:
    """The `rllib` package the options of `add_source_arguments` name (downloaded first)."""
    return download_rllib(args.cache) if args.download else args.rllib


@contextlib.contextmanager
def scratch_folder(prefix: str, keep: bool) -> Iterator[Path]:
    """A new folder outside the repository, removed afterwards unless `keep`."""
    work = Path(tempfile.mkdtemp(prefix=prefix))
    try:
        yield work
    finally:
        if keep:
            print(f"kept {work}", file=sys.stderr)
        else:
            shutil.rmtree(work, ignore_errors=True)


def rewrite(source: str, keep_ray: bool = False) -> str:
    """`source` under the porting rule and the test-data mappings (with `keep_ray`, the
    rule's variant for an installed `ray` extra: its `import ray` lines stay)."""
    for pattern, replacement in REWRITES + ([] if keep_ray else RAY_LINES_DROPPED):
        source = pattern.sub(replacement, source)
    return source


def cli_shim(command: str) -> str:
    """RLlib's `rllib/<command>.py` script as a shim: `python -m corral.<command>` on this
    interpreter (the tests run the scripts with whatever `python` is first on PATH)."""
    return (
        f'"""RLlib 1.13\'s rllib/{command}.py under the porting rule: corral {command}."""\n'
        f"import os\nimport sys\n\nPYTHON = {sys.executable!r}\n"
        f"os.execv(PYTHON, [PYTHON, '-m', 'corral.{command}', *sys.argv[1:]])\n"
    )


def prepare(rllib: Path, work: Path) -> list[Path]:
    """Copies RLlib's tests and examples into `work`, rewritten; the test files to run."""
    tests_root, examples = work / "rllib_tests", work / "rllib_examples_support"
    shutil.copytree(rllib / "examples", examples)
    for path in rllib.rglob("tests/*.py"):
        relative = path.relative_to(rllib)
        if relative.parts[0] == "examples" or path.name == "conftest.py":
            continue
        target = tests_root / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(path, target)
    for folder in [tests_root, *(p for p in tests_root.rglob("*") if p.is_dir())]:
        (folder / "__init__.py").touch()
    for path in work.rglob("*.py"):
        path.write_text(rewrite(path.read_text()))
    for command in ("train", "evaluate"):
        (tests_root / f"{command}.py").write_text(cli_shim(command))
    return sorted(
        p for p in tests_root.rglob("test_*.py") if str(p.relative_to(tests_root)) not in SKIPPED
    )


def run_file(test: Path, work: Path, timeout: float) -> dict:
    """One test file in its own pytest process: its counts and the last line."""
    env = {
        **os.environ,
        # (After the scratch folder, any PYTHONPATH given: e.g. a checkout of corral to test.)
        "PYTHONPATH": os.pathsep.join(p for p in (str(work), os.environ.get("PYTHONPATH")) if p),
        "CORRAL_RESULTS_DIR": str(work / "results"),
    }
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test.name],
            cwd=test.parent,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
        )
        last = (proc.stdout.strip().splitlines() or [""])[-1]
        code: int | None = proc.returncode
    except subprocess.TimeoutExpired:
        last, code = f"timed out after {timeout:.0f} s", None
    counts = {kind.rstrip("s"): int(n) for n, kind in SUMMARY.findall(last)}
    result = {"file": str(test.relative_to(work / "rllib_tests")), **counts, "last_line": last}
    if not counts and code is not None:  # no summary: pytest died (a crash, a signal)
        result["exit_code"] = code
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_source_arguments(parser)
    parser.add_argument("-k", default="", help="run only files whose path contains this")
    parser.add_argument("--timeout", type=float, default=600.0, help="seconds per file")
    args = parser.parse_args()
    rllib = rllib_of(args)
    with scratch_folder("rllib113_tests_", args.keep) as work:
        results = []
        for test in prepare(rllib, work):
            if args.k in str(test):
                results.append(run_file(test, work, args.timeout))
                print(json.dumps(results[-1]), flush=True)
        total = {key: sum(r.get(key, 0) for r in results) for key in ("passed", "failed", "error")}
        clean = sum(
            1 for r in results if r.get("passed") and not r.get("failed") and not r.get("error")
        )
        print(
            json.dumps({"summary": True, "files": len(results), "files_all_passed": clean, **total})
        )


if __name__ == "__main__":
    main()
