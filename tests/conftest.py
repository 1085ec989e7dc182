import contextlib
import itertools
import json
import logging
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).parents[1] / "benchmarks"
_ENV_NAMES = itertools.count()


@pytest.fixture(autouse=True)
def _results_in_tmp(tmp_path, monkeypatch):
    """Trainers write their logdirs under a temporary folder, never in $HOME."""
    monkeypatch.setenv("CORRAL_RESULTS_DIR", str(tmp_path / "corral_results"))


@pytest.fixture(autouse=True)
def _corral_log_level_restored():
    """A trainer's `log_level` sets the "corral" logger's level for the process (as
    RLlib's does); each test starts from the level before it, so that one test's
    `log_level: "ERROR"` does not silence the warnings another checks."""
    corral_logger = logging.getLogger("corral")
    level = corral_logger.level
    yield
    corral_logger.setLevel(level)


@pytest.fixture
def run_benchmark(tmp_path):
    """`run_benchmark(script, *args)`: runs `benchmarks/<script>` in a fresh interpreter
    (its trainers' results under `tmp_path`) and returns its JSON lines; fails with the
    end of its stderr when it exits non-zero."""

    def run(script: str, *args: str, timeout: float = 300) -> list[dict]:
        proc = subprocess.run(
            [sys.executable, str(BENCHMARKS / script), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, "CORRAL_RESULTS_DIR": str(tmp_path / "benchmark_results")},
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        return [json.loads(line) for line in proc.stdout.splitlines()]

    return run


@pytest.fixture
def env_name():
    """`env_name(creator)`: registers the env creator under a fresh name, returns it."""
    from corral.tune.registry import register_env

    def register(creator):
        name = f"test-env-{next(_ENV_NAMES)}"
        register_env(name, creator)
        return name

    return register


@pytest.fixture
def time_limit():
    """`with time_limit(seconds):` fails the test with a `TimeoutError` when the block
    runs `seconds` or more, instead of hanging the suite (a loop that waits forever)."""

    @contextlib.contextmanager
    def limit(seconds: int):
        def expire(*_):
            raise TimeoutError(f"still running after {seconds} s")

        previous = signal.signal(signal.SIGALRM, expire)
        signal.alarm(seconds)
        try:
            yield
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, previous)

    return limit
