"""Ray Tune 1.x's function API: `tune.run(train_fn)`, `tune.report`, `reporter`, `yield`,
`tune.checkpoint_dir`, and the rest of 1.13's `tune.run` arguments."""

from __future__ import annotations

import json
import os
import threading
import time

import pytest

from corral import tune
from corral.tune.error import TuneError
from corral.tune.result import DONE, TRAINING_ITERATION
from corral.utils.error import CheckpointError


@pytest.fixture(autouse=True)
def results_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("CORRAL_RESULTS_DIR", str(tmp_path))
    return tmp_path


def _write(path, text):
    with open(path, "w") as f:
        f.write(text)


def _results(trial):
    with open(os.path.join(trial.logdir, "result.json")) as f:
        return [json.loads(line) for line in f]


def test_each_report_is_one_iteration_and_the_function_returning_ends_the_trial():
    seen = {}

    def train_fn(config):
        seen["session"] = (tune.is_session_enabled(), tune.get_trial_dir(), tune.get_trial_id())
        for i in range(3):
            tune.report(score=config["base"] + i, timesteps_this_iter=10)

    analysis = tune.run(train_fn, config={"base": tune.grid_search([0, 10])}, verbose=0)
    assert [t.status for t in analysis.trials] == ["TERMINATED", "TERMINATED"]
    first = analysis.trials[0]
    assert first.last_result["score"] == 2 and first.last_result[DONE] is True
    assert first.last_result[TRAINING_ITERATION] == 3
    assert first.last_result["timesteps_total"] == 30
    assert [r["score"] for r in _results(first)] == [0, 1, 2]  # logged once each
    assert analysis.get_best_config("score", "max") == {"base": 10}
    # The session of the last trial, seen from inside its function.
    assert seen["session"] == (True, analysis.trials[1].logdir, analysis.trials[1].trial_id)
    assert str(first).startswith("train_fn_")


def test_function_trials_running_at_once_each_report_to_their_own_trial():
    # With `max_concurrent_trials`, several functions run in their own threads at once;
    # each one's reports (and trial dir) are its own trial's.
    def train_fn(config):
        for i in range(4):
            tune.report(score=config["base"] + i, trial_dir=tune.get_trial_dir())

    analysis = tune.run(
        train_fn,
        config={"base": tune.grid_search([0, 100, 200])},
        max_concurrent_trials=3,
        verbose=0,
    )
    assert [t.status for t in analysis.trials] == ["TERMINATED"] * 3
    for trial, base in zip(analysis.trials, [0, 100, 200]):
        assert [r["score"] for r in _results(trial)] == [base, base + 1, base + 2, base + 3]
        assert trial.last_result["trial_dir"] == trial.logdir


def test_a_stop_criterion_unwinds_the_function_at_its_report():
    unwound = threading.Event()

    def forever(config):
        try:
            i = 0
            while True:
                i += 1
                tune.report(i=i)
        finally:
            unwound.set()

    analysis = tune.run(forever, stop={"i": 4}, verbose=0)
    (trial,) = analysis.trials
    assert trial.status == "TERMINATED" and trial.last_result["i"] == 4
    assert unwound.wait(5)


def test_reporter_argument_returned_and_yielded_results():
    def with_reporter(config, reporter):
        reporter(step=1)
        reporter(step=2)
        return {"step": 3, "final": True}

    (trial,) = tune.run(with_reporter, verbose=0).trials
    assert [r["step"] for r in _results(trial)] == [1, 2, 3]
    assert trial.last_result["final"] is True and trial.last_result[DONE] is True

    def generator(config):
        yield {"loss": 1.0}
        yield 0.5  # a number alone is the result's `_metric`

    (trial,) = tune.run(generator, verbose=0).trials
    assert [r.get("loss", r.get("_metric")) for r in _results(trial)] == [1.0, 0.5]

    def silent(config):
        pass

    (trial,) = tune.run(silent, verbose=0).trials
    assert trial.status == "TERMINATED" and trial.last_result[DONE] is True


def test_an_error_in_the_function_is_raised_and_marks_the_trial():
    class Boom(RuntimeError):
        pass

    def failing(config):
        tune.report(ok=1)
        raise Boom("in the function")

    trials = []

    class Record(tune.Callback):
        def on_trial_error(self, iteration, trials_, trial, **info):
            trials.append(trial)

    with pytest.raises(tune.TuneError, match="Trials did not complete") as info:
        tune.run(failing, callbacks=[Record()], verbose=0)
    assert isinstance(info.value.__cause__, Boom)
    assert trials[0].status == "ERROR" and trials[0].last_result["ok"] == 1
    assert "in the function" in trials[0].error_msg


def test_checkpoint_dir_checkpoints_are_the_trials_and_restore_hands_one_back(tmp_path):
    def train_fn(config, checkpoint_dir=None):
        start = 0
        if checkpoint_dir:
            with open(os.path.join(checkpoint_dir, "state.txt")) as f:
                start = int(f.read())
        for step in range(start, start + 3):
            with tune.checkpoint_dir(step=step) as path:
                _write(os.path.join(path, "state.txt"), str(step + 1))
            tune.report(step=step)

    analysis = tune.run(train_fn, keep_checkpoints_num=1, checkpoint_score_attr="step", verbose=0)
    (trial,) = analysis.trials
    assert os.path.basename(trial.checkpoint) == "checkpoint_000002"
    assert [os.path.basename(p) for p, _ in trial.checkpoints] == ["checkpoint_000002"]
    assert not os.path.exists(os.path.join(trial.logdir, "checkpoint_000000"))  # pruned
    assert analysis.get_best_checkpoint(trial, "step", "max") == trial.checkpoint

    (again,) = tune.run(train_fn, restore=trial.checkpoint, verbose=0).trials
    assert [r["step"] for r in _results(again)] == [3, 4, 5]
    # The trainable's progress was saved beside the checkpoint and counts on (Ray Tune's
    # .tune_metadata).
    first = _results(trial)
    assert [r[TRAINING_ITERATION] for r in _results(again)] == [4, 5, 6]
    assert _results(again)[0]["time_total_s"] >= first[-1]["time_total_s"]
    _write(os.path.join(trial.checkpoint, ".tune_progress.json"), '{"iteration": "x"}')
    with pytest.raises(TuneError) as info:
        tune.run(train_fn, restore=trial.checkpoint, verbose=0)
    assert isinstance(info.value.__cause__, CheckpointError)
    assert "not the progress a function trainable's save wrote" in str(info.value.__cause__)


def test_what_a_function_trainable_cannot_do_is_refused_up_front():
    def train_fn(config):
        tune.report(x=1)

    with pytest.raises(ValueError, match="tune.checkpoint_dir"):
        tune.run(train_fn, checkpoint_freq=1, verbose=0)
    with pytest.raises(ValueError, match="checkpoint_dir"):
        tune.run(train_fn, restore="/nowhere", verbose=0)
    with pytest.raises(ValueError, match="local path only"):
        tune.run(train_fn, config={"backend": "ray"}, verbose=0)

    def two_configs(config, other):
        pass

    with pytest.raises(ValueError, match=r"takes \['config', 'other'\]"):
        tune.run(two_configs, verbose=0)


def test_outside_tune_run_the_session_calls_do_nothing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert tune.is_session_enabled() is False
    tune.report(x=1)  # no session: nothing happens
    assert tune.get_trial_dir() is None and tune.get_trial_name() is None
    with tune.checkpoint_dir(step=1) as path:
        assert path == str(tmp_path)


def test_resources_per_trial_is_checked_and_ray_tune_options_at_defaults_are_accepted():
    from corral.agents.ppo import PPOTrainer

    def train_fn(config):
        tune.report(x=1)

    config = {"num_workers": 2}
    tune.run(
        train_fn,
        config=config,
        resources_per_trial=PPOTrainer.default_resource_request(config),
        max_failures=0,
        fail_fast=True,
        reuse_actors=True,
        max_concurrent_trials=4,
        verbose=0,
    )
    tune.run(train_fn, resources_per_trial={"cpu": 2, "gpu": 0, "extra_cpu": 1}, verbose=0)
    with pytest.raises(ValueError, match="Unknown resources_per_trial key 'cpus'"):
        tune.run(train_fn, resources_per_trial={"cpus": 2}, verbose=0)
    with pytest.raises(ValueError, match="gpu must be a number >= 0, got -1"):
        tune.run(train_fn, resources_per_trial={"gpu": -1}, verbose=0)
    # Ray Tune's third-party searchers that are not built raise naming the class.
    with pytest.raises(NotImplementedError, match="HEBOSearch"):
        tune.run(train_fn, search_alg="hebo", verbose=0)
    with pytest.raises(NotImplementedError, match=r"tune.run\(trial_name_creator="):
        tune.run(train_fn, trial_name_creator=str, verbose=0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'stop_iters'"):
        tune.run(train_fn, stop_iters=3, verbose=0)


def test_time_budget_stops_the_running_trial_and_starts_no_other():
    def slow(config):
        while True:
            time.sleep(0.05)
            tune.report(t=time.monotonic())

    analysis = tune.run(slow, config={"k": tune.grid_search([1, 2])}, time_budget_s=0.5, verbose=0)
    assert [t.status for t in analysis.trials] == ["TERMINATED", "PENDING"]
    assert 2 <= analysis.trials[0].last_result[TRAINING_ITERATION] <= 20
    with pytest.raises(ValueError, match="time_budget_s must be > 0"):
        tune.run(slow, time_budget_s=0, verbose=0)


def test_a_trainer_inside_a_function_trainable(tmp_path):
    from corral.agents.pg import PGTrainer

    def train_fn(config, reporter):
        trainer = PGTrainer(config=config, env="CartPole-v1")
        try:
            for _ in range(2):
                result = trainer.train()
                reporter(**result, phase=1)
            path = trainer.save(tune.get_trial_dir())
        finally:
            trainer.stop()
        restored = PGTrainer(config=config, env="CartPole-v1")
        restored.restore(path)
        reporter(**restored.train(), phase=2)
        restored.stop()

    config = {"num_workers": 1, "rollout_fragment_length": 50, "train_batch_size": 100}
    (trial,) = tune.run(train_fn, config=config, verbose=0).trials
    assert trial.status == "TERMINATED"
    assert [r["phase"] for r in _results(trial)] == [1, 1, 2]
    assert trial.last_result["timesteps_total"] == 300  # the restored trainer's own count


def test_tune_1_13_analysis_helpers():
    pytest.importorskip("pandas", reason="the analysis' dataframes need pandas")

    def train_fn(config):
        for i in range(3):
            with tune.checkpoint_dir(step=i) as path:
                _write(os.path.join(path, "x"), str(i))
            tune.report(score=config["k"] * i)

    analysis = tune.run(
        train_fn, config={"k": tune.grid_search([1, 2])}, metric="score", mode="max", verbose=0
    )
    best = analysis.best_trial
    assert best.config == {"k": 2} and analysis.best_logdir == best.logdir
    assert analysis.get_best_logdir("score", "min", scope="all") == analysis.trials[0].logdir
    assert os.path.basename(analysis.get_last_checkpoint()) == "checkpoint_000002"
    assert analysis.get_all_configs() == {t.logdir: t.config for t in analysis.trials}
    assert analysis.get_all_configs(prefix=True)[best.logdir] == {"config/k": 2}
    assert analysis.trial_dataframes[best.logdir]["score"].tolist() == [0, 2, 4]
    assert analysis.best_dataframe["score"].tolist() == [0, 2, 4]
    assert analysis.results_df.loc[best.trial_id, "score"] == 4
    assert analysis.best_result_df["score"].tolist() == [4]


def test_run_experiments_and_experiment():
    def train_fn(config):
        tune.report(env=config["env"], lr=config["lr"])

    trials = tune.run_experiments(
        {"first": {"run": train_fn, "env": "CartPole-v1", "config": {"lr": 0.1}}}, verbose=0
    )
    assert [(t.last_result["env"], t.last_result["lr"]) for t in trials] == [("CartPole-v1", 0.1)]
    experiment = tune.Experiment(
        "second", train_fn, config={"env": "x", "lr": tune.grid_search([1, 2])}, stop={"lr": 9}
    )
    trials = tune.run_experiments([experiment], verbose=0)
    assert [t.config["lr"] for t in trials] == [1, 2]
    assert os.path.basename(os.path.dirname(trials[0].logdir)) == "second"
    with pytest.raises(ValueError, match="needs a dict with a 'run' key"):
        tune.run_experiments({"bad": {"env": "CartPole-v1"}})
    with pytest.raises(NotImplementedError, match="HEBOSearch"):
        tune.run_experiments([experiment], search_alg="hebo")
