"""`run_learning_tests_from_yaml` (RLlib 1.13's learning tests from tuned-example YAML)."""

from __future__ import annotations

import pytest

from corral.cli import ExperimentFileError
from corral.utils.test_utils import run_learning_tests_from_yaml

# A random CartPole policy averages about 20 per episode: the first criterion is met
# in the first iteration or two, the second never within two iterations.
YAML = """
cartpole-pg-easy:
    env: CartPole-v1
    run: PG
    frameworks: [tf, torch]
    pass_criteria:
        episode_reward_mean: 12.0
        timesteps_total: 200
    stop:
        training_iteration: 2
    config:
        num_workers: 0
        rollout_fragment_length: 200
        train_batch_size: 200
        seed: 0
cartpole-pg-hard:
    env: CartPole-v1
    run: PG
    pass_criteria:
        episode_reward_mean: 400.0
    stop:
        training_iteration: 2
    config:
        num_workers: 0
        rollout_fragment_length: 200
        train_batch_size: 200
        seed: 0
"""

RESULT_KEYS = {"time_taken", "trial_states", "last_update", "stats", "passed", "failures"}


@pytest.fixture
def yaml_file(tmp_path, monkeypatch):
    monkeypatch.setenv("CORRAL_RESULTS_DIR", str(tmp_path / "results"))
    path = tmp_path / "cartpole-pg.yaml"
    path.write_text(YAML)
    return str(path)


def test_passes_and_fails_by_the_pass_criteria(yaml_file):
    result = run_learning_tests_from_yaml([yaml_file], max_num_repeats=2)
    assert set(result) == RESULT_KEYS
    assert result["passed"] == ["cartpole-pg-easy-torch"]
    # The easy one passed at once; the hard one ran twice and failed both times.
    assert result["failures"] == {"cartpole-pg-hard-torch": 2}
    assert result["trial_states"] == {"TERMINATED": 3}
    easy, hard = (
        result["stats"]["cartpole-pg-easy-torch"],
        result["stats"]["cartpole-pg-hard-torch"],
    )
    assert easy["episode_reward_mean"] >= 12.0
    assert 0 < hard["episode_reward_mean"] < 400.0
    assert easy["throughput"] > 0
    assert result["time_taken"] > 0


def test_smoke_test_runs_one_iteration_unchecked(yaml_file):
    result = run_learning_tests_from_yaml([yaml_file], max_num_repeats=1, smoke_test=True)
    assert sorted(result["passed"]) == ["cartpole-pg-easy-torch", "cartpole-pg-hard-torch"]
    assert result["failures"] == {} and result["stats"] == {}
    assert result["trial_states"] == {"TERMINATED": 2}


def test_an_erring_experiment_counts_as_failed(tmp_path, monkeypatch):
    monkeypatch.setenv("CORRAL_RESULTS_DIR", str(tmp_path / "results"))
    path = tmp_path / "bad.yaml"
    path.write_text("bad-env:\n  run: PG\n  env: NoSuchEnv-v0\n  stop: {training_iteration: 1}\n")
    result = run_learning_tests_from_yaml([str(path)], max_num_repeats=1)
    assert result["passed"] == []
    assert result["failures"] == {"bad-env-torch": 1}
    assert result["trial_states"] == {"ERROR": 1}


def test_tf_only_experiments_are_skipped(tmp_path):
    path = tmp_path / "tf.yaml"
    path.write_text("tf-only:\n  run: PG\n  env: CartPole-v1\n  frameworks: [tf]\n")
    result = run_learning_tests_from_yaml([str(path)])
    assert result["passed"] == [] and result["failures"] == {} and result["trial_states"] == {}


@pytest.mark.parametrize(
    "entry, error, match",
    [
        ("pass_criteria: {episode_len_mean: 10}", ValueError, "unsupported pass_criteria"),
        ("pass_criteria: {episode_reward_mean: high}", ValueError, "must be a number"),
        ("pass_criteria: [1]", ValueError, "must be a mapping"),
        ("frameworks: 3", ValueError, "'frameworks' must be a list"),
        ("python_code: 1", ExperimentFileError, "unsupported keys \\['python_code'\\]"),
    ],
)
def test_bad_entries_are_refused(tmp_path, entry, error, match):
    path = tmp_path / "bad.yaml"
    path.write_text(f"exp:\n  run: PG\n  env: CartPole-v1\n  {entry}\n")
    with pytest.raises(error, match=match):
        run_learning_tests_from_yaml([str(path)])


def test_max_num_repeats_must_be_positive(yaml_file):
    with pytest.raises(ValueError, match="max_num_repeats must be an int >= 1, got 0"):
        run_learning_tests_from_yaml([yaml_file], max_num_repeats=0)


def test_timesteps_total_with_a_time_stop_is_a_throughput_check(tmp_path, monkeypatch):
    monkeypatch.setenv("CORRAL_RESULTS_DIR", str(tmp_path / "results"))
    path = tmp_path / "throughput.yaml"
    spec = (
        "  run: PG\n  env: CartPole-v1\n"
        "  stop: {training_iteration: 1, time_total_s: 1000}\n"
        "  config: {num_workers: 0, train_batch_size: 200, rollout_fragment_length: 200}\n"
    )
    # 200 steps in well under 1000 s passes; 10**9 steps in 1000 s (10**6 a second)
    # cannot.
    path.write_text(
        f"slow:\n{spec}  pass_criteria: {{timesteps_total: 200}}\n"
        f"fast:\n{spec}  pass_criteria: {{timesteps_total: 1000000000}}\n"
    )
    result = run_learning_tests_from_yaml([str(path)], max_num_repeats=1)
    assert result["passed"] == ["slow-torch"]
    assert result["failures"] == {"fast-torch": 1}
