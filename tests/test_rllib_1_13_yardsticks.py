"""The tooling of RLlib 1.13's yardsticks (`scripts/rllib_1_13_tests.py`,
`scripts/rllib_1_13_example_scripts.py`): the porting rule's rewrite, the flags a script
gets, and the class a failure is put in. The yardsticks themselves run RLlib's code
(test data outside the repository) and are not part of the suite."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "scripts"))

from rllib_1_13_example_scripts import classify, flags_for, last_error  # noqa: E402
from rllib_1_13_tests import rewrite, run_file  # noqa: E402

SOURCE = """import ray
import ray.tune as tune
from ray import tune
from ray.rllib.agents import ppo
from ray.rllib.examples.env.random_env import RandomEnv

def main():
    ray.init(num_cpus=2)
    tune.run(ppo.PPOTrainer)
    ray.shutdown()
"""


def test_rewrite_applies_the_porting_rule():
    out = rewrite(SOURCE)
    assert out.splitlines() == [
        "from corral import tune",
        "from corral import tune",
        "from corral.agents import ppo",
        "from rllib_examples_support.env.random_env import RandomEnv",
        "",
        "def main():",
        "    pass",
        "    tune.run(ppo.PPOTrainer)",
        "    pass",
    ]


def test_rewrite_keeps_the_ray_lines_when_asked():
    out = rewrite(SOURCE, keep_ray=True).splitlines()
    assert out[0] == "import ray" and out[1] == "from corral import tune"
    assert "    ray.init(num_cpus=2)" in out and "    ray.shutdown()" in out
    assert "from corral.agents import ppo" in out


def test_flags_for_gives_only_the_flags_a_script_defines(tmp_path):
    script = tmp_path / "s.py"
    script.write_text(
        'parser.add_argument("--framework", default="tf")\n'
        "parser.add_argument('--stop-iters', type=int)\n"
    )
    assert flags_for(script) == ["--framework", "torch", "--stop-iters", "2"]
    script.write_text('parser.add_argument("--torch", action="store_true")\n')
    assert flags_for(script) == ["--torch"]


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        (
            "ValueError: framework='tf' is not available: corral is built on PyTorch",
            "tensorflow-only",
        ),
        ("NameError: name 'ray' is not defined", "ray-api"),
        ("ModuleNotFoundError: No module named 'recsim'", "third-party"),
        ("ValueError: No files found matching 'tests/data/cartpole/small.json'", "test-data"),
        ("EOFError: EOF when reading a line", "interactive"),
        ("DeprecationWarning: This file has been renamed to `x.py`", "renamed-stub"),
        ("timed out after 300 s", "time-limit"),
        (
            "EnvError: Unknown env 'Pendulum-v0': ... Gymnasium has this env as 'Pendulum-v1'",
            "retired-env-id",
        ),
        ("ValueError: too many values to unpack (expected 4)", "other"),
    ],
)
def test_classify(error, expected):
    assert classify(error) == expected


def test_last_error_is_the_failed_trials_own():
    output = (
        "Trial PG_1 errored:\n"
        "    raise ValueError(\n"
        "ValueError: framework='tf' is not available\n"
        "/x/glfw/__init__.py:917: GLFWError: (65550) no DISPLAY\n"
        "corral.tune.error.TuneError: Trials did not complete: PG_1 (their errors: ...)\n"
    )
    assert last_error(output) == "ValueError: framework='tf' is not available"
    assert last_error("no error here\nlast line") == "last line"


def test_run_file_reports_the_exit_code_of_a_pytest_that_died(tmp_path):
    """A test file whose pytest process dies before its summary line is reported with
    the process's exit code (its last line is then a progress line, no counts)."""
    tests = tmp_path / "rllib_tests" / "tests"
    tests.mkdir(parents=True)
    (tests / "test_dies.py").write_text(
        "import os\n\ndef test_passes():\n    pass\n\ndef test_dies():\n    os._exit(3)\n"
    )
    (tests / "test_fine.py").write_text("def test_passes():\n    pass\n")
    died = run_file(tests / "test_dies.py", tmp_path, timeout=120)
    assert died["exit_code"] == 3 and "passed" not in died
    fine = run_file(tests / "test_fine.py", tmp_path, timeout=120)
    assert fine["passed"] == 1 and "exit_code" not in fine
