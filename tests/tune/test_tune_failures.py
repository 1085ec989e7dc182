"""Ray Tune 1.13's failure semantics in `tune.run`: `max_failures` (recovery from the
latest checkpoint), `fail_fast` (False / True / "raise"), `raise_on_failed_trial`, and
errors of the run itself ending it at once."""

from __future__ import annotations

import json
import os

import pytest

from corral import tune
from corral.tune import Trainable, TuneError, grid_search
from corral.tune.result import TRAINING_ITERATION


class Steps(Trainable):
    """Counts; `fail_at` (iteration) raises there the first `failures` times a trial
    reaches it (counted per `fail_at` value across rebuilds); `crash` raises in setup."""

    raised: dict = {}

    def setup(self, config):
        if config.get("crash"):
            raise ValueError("cannot build")
        self.count = 0

    def step(self):
        self.count += 1
        fail_at, failures = self.config.get("fail_at"), self.config.get("failures", 1)
        key = (fail_at, self.config.get("tag"))
        if self.count == fail_at and Steps.raised.get(key, 0) < failures:
            Steps.raised[key] = Steps.raised.get(key, 0) + 1
            raise RuntimeError(f"step {self.count} failed")
        return {"count": self.count}

    def save_checkpoint(self, checkpoint_dir):
        return {"count": self.count}

    def load_checkpoint(self, checkpoint):
        self.count = checkpoint["count"]


@pytest.fixture(autouse=True)
def fresh_failures():
    Steps.raised = {}


def _statuses(trials):
    return [t.status for t in trials]


def test_by_default_every_trial_runs_and_the_failed_ones_raise_tune_error_at_the_end():
    with pytest.raises(TuneError, match="Trials did not complete") as info:
        tune.run(
            Steps,
            config={
                "fail_at": grid_search([None, 2, None]),
                "failures": 99,
                "tag": grid_search([0]),
            },
            stop={TRAINING_ITERATION: 3},
            verbose=0,
        )
    message, failed = info.value.args
    (trial,) = failed
    assert isinstance(info.value.__cause__, RuntimeError)
    assert trial.num_failures == 1 and "step 2 failed" in trial.error_msg
    with open(trial.error_file) as f:
        assert "Failure # 1" in f.read()
    assert os.path.dirname(trial.error_file) == trial.logdir


def test_raise_on_failed_trial_false_returns_the_analysis():
    analysis = tune.run(
        Steps,
        config={"fail_at": grid_search([None, 2, None]), "failures": 99},
        stop={TRAINING_ITERATION: 3},
        raise_on_failed_trial=False,
        verbose=0,
    )
    assert _statuses(analysis.trials) == ["TERMINATED", "ERROR", "TERMINATED"]
    assert analysis.trials[1].last_result["count"] == 1


def test_fail_fast_starts_no_further_trial():
    with pytest.raises(TuneError) as info:
        tune.run(
            Steps,
            config={"fail_at": grid_search([2, None, None]), "failures": 99},
            stop={TRAINING_ITERATION: 3},
            fail_fast=True,
            verbose=0,
        )
    (failed,) = info.value.args[1]
    assert failed.config["fail_at"] == 2


def test_fail_fast_raise_raises_the_trial_s_own_error_at_once():
    calls = []

    class Record(tune.Callback):
        def on_trial_start(self, iteration, trials, trial, **info):
            calls.append(trial.config["fail_at"])

    with pytest.raises(RuntimeError, match="step 2 failed"):
        tune.run(
            Steps,
            config={"fail_at": grid_search([2, None])},
            stop={TRAINING_ITERATION: 3},
            fail_fast="raise",
            max_failures=5,  # no recovery with "raise" (Ray Tune's)
            callbacks=[Record()],
            verbose=0,
        )
    assert calls == [2]


def test_max_failures_recovers_from_the_latest_checkpoint_in_the_same_folder():
    events = []

    class Record(tune.Callback):
        def on_trial_recover(self, iteration, trials, trial, **info):
            events.append(("recover", iteration, trial.num_failures))

        def on_trial_error(self, iteration, trials, trial, **info):
            events.append(("error", iteration))

    analysis = tune.run(
        Steps,
        config={"fail_at": 4},
        stop={TRAINING_ITERATION: 5},
        checkpoint_freq=2,
        max_failures=1,
        callbacks=[Record()],
        verbose=0,
    )
    (trial,) = analysis.trials
    assert trial.status == "TERMINATED" and trial.num_failures == 1
    assert events == [("recover", 3, 1)]
    # Restored from checkpoint 2: the count goes on from 2, not from 3 or 0.
    assert trial.last_result["count"] == 5 and trial.last_result[TRAINING_ITERATION] == 5
    with open(os.path.join(trial.logdir, "result.json")) as f:
        iterations = [json.loads(line)[TRAINING_ITERATION] for line in f]
    assert iterations == [1, 2, 3, 3, 4, 5]  # both attempts, one folder


def test_a_trial_without_checkpoints_recovers_from_the_start():
    analysis = tune.run(
        Steps, config={"fail_at": 2}, stop={TRAINING_ITERATION: 3}, max_failures=1, verbose=0
    )
    (trial,) = analysis.trials
    assert trial.status == "TERMINATED" and trial.last_result["count"] == 3


def test_recoveries_run_out():
    with pytest.raises(TuneError):
        tune.run(
            Steps,
            config={"fail_at": 2, "failures": 99},
            stop={TRAINING_ITERATION: 3},
            max_failures=2,
            verbose=0,
        )
    assert Steps.raised[(2, None)] == 3  # the first try and two recoveries


def test_a_trainable_that_cannot_be_built_is_a_failed_trial():
    analysis = tune.run(
        Steps,
        config={"crash": grid_search([True, False])},
        stop={TRAINING_ITERATION: 1},
        raise_on_failed_trial=False,
        verbose=0,
    )
    assert _statuses(analysis.trials) == ["ERROR", "TERMINATED"]
    assert isinstance(analysis.trials[0].error, ValueError)


def test_errors_of_the_run_itself_end_it_at_once():
    class Broken(tune.Callback):
        def on_trial_result(self, iteration, trials, trial, result, **info):
            raise KeyError("hook")

    with pytest.raises(KeyError, match="hook"):
        tune.run(
            Steps,
            config={"tag": grid_search([0, 1])},
            stop={TRAINING_ITERATION: 2},
            callbacks=[Broken()],
            max_failures=3,
            verbose=0,
        )
    with pytest.raises(ValueError, match="cuont"):
        tune.run(Steps, config={"tag": grid_search([0, 1])}, stop={"cuont": 2}, verbose=0)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"max_failures": -2}, "max_failures must be an int >= -1"),
        ({"max_failures": 1.5}, "max_failures must be an int >= -1"),
        ({"fail_fast": "yes"}, "fail_fast must be False, True or 'raise'"),
        ({"checkpoint_freq": -1}, "checkpoint_freq must be an int >= 0"),
        ({"checkpoint_freq": 2.5}, "checkpoint_freq must be an int >= 0"),
    ],
)
def test_bad_failure_and_checkpoint_options_are_refused(options, message):
    with pytest.raises(ValueError, match=message):
        tune.run(Steps, stop={TRAINING_ITERATION: 1}, verbose=0, **options)


def test_run_experiments_runs_every_experiment_before_raising():
    ended = []

    class Record(tune.Callback):
        def on_trial_complete(self, iteration, trials, trial, **info):
            ended.append(iteration)

    with pytest.raises(TuneError) as info:
        tune.run_experiments(
            {
                "fails": {
                    "run": Steps,
                    "stop": {TRAINING_ITERATION: 3},
                    "config": {"fail_at": 1, "failures": 9},
                },
                "works": {"run": Steps, "stop": {TRAINING_ITERATION: 2}},
            },
            callbacks=[Record()],
            verbose=0,
        )
    assert ended == [2]  # "works" ran after "fails" failed
    (failed,) = info.value.args[1]
    assert failed.config == {"fail_at": 1, "failures": 9}
    trials = tune.run_experiments(
        {
            "fails": {
                "run": Steps,
                "stop": {TRAINING_ITERATION: 3},
                "config": {"fail_at": 1, "failures": 9},
            }
        },
        raise_on_failed_trial=False,
        verbose=0,
    )
    assert [t.status for t in trials] == ["ERROR"]


def test_a_failed_step_is_not_saved_at_the_end_and_recovery_uses_the_last_good_checkpoint():
    analysis = tune.run(
        Steps,
        config={"fail_at": 4},
        stop={TRAINING_ITERATION: 5},
        checkpoint_freq=2,
        checkpoint_at_end=True,
        max_failures=1,
        verbose=0,
    )
    (trial,) = analysis.trials
    saved = sorted(os.path.basename(path) for path, _ in trial.checkpoints)
    # Saved at 2, 4 and the end (5); nothing at 3, where the failed attempt stopped.
    assert saved == ["checkpoint_000002", "checkpoint_000004", "checkpoint_000005"]
    assert trial.last_result["count"] == 5
