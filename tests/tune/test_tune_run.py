import math
import os

import pytest

from corral import tune
from corral.tune import Trainable, grid_search, register_trainable
from corral.tune.result import (
    DONE,
    EPISODE_REWARD_MEAN,
    EVALUATION,
    EVALUATION_REWARD_MEAN,
    INFO,
    TRAINING_ITERATION,
    new_logdir,
)
from corral.tune.stopping import met_criterion, should_stop


@pytest.fixture(autouse=True)
def results_dir(tmp_path_factory, monkeypatch):
    path = tmp_path_factory.mktemp("results")
    monkeypatch.setenv("CORRAL_RESULTS_DIR", str(path))
    return path


class Counter(Trainable):
    def setup(self, config):
        self.count = config.get("start", 0)

    def step(self):
        self.count += config_value(self.config, "increment", 1)
        return {"count": self.count, "info": {"count_squared": self.count**2}}

    def save_checkpoint(self, checkpoint_dir):
        return {"count": self.count}

    def load_checkpoint(self, checkpoint):
        self.count = checkpoint["count"]


def config_value(config, key, default):
    return config.get("nested", {}).get(key, config.get(key, default))


def test_grid_search_runs_one_trial_per_value_until_stop(tmp_path):
    analysis = tune.run(
        Counter,
        config={"start": grid_search([0, 100]), "nested": {"increment": grid_search([1, 2])}},
        stop={"training_iteration": 3},
        local_dir=str(tmp_path),
        name="exp",
        checkpoint_freq=2,
        checkpoint_at_end=True,
        verbose=0,
    )
    assert len(analysis.trials) == 4
    configs = sorted((t.config["start"], t.config["nested"]["increment"]) for t in analysis.trials)
    assert configs == [(0, 1), (0, 2), (100, 1), (100, 2)]
    for trial in analysis.trials:
        assert trial.status == "TERMINATED"
        assert trial.last_result["training_iteration"] == 3
        assert (
            trial.last_result["count"]
            == trial.config["start"] + 3 * (trial.config["nested"]["increment"])
        )
        assert os.path.dirname(trial.logdir) == str(tmp_path / "exp")
        assert trial.checkpoint == os.path.join(trial.logdir, "checkpoint_000003")
        assert os.path.isdir(os.path.join(trial.logdir, "checkpoint_000002"))
    best = analysis.get_best_trial("count", "max")
    assert best.config == {"start": 100, "nested": {"increment": 2}}
    assert analysis.get_best_config("info/count_squared", "min") == {
        "start": 0,
        "nested": {"increment": 1},
    }


def test_registered_name_num_samples_and_default_metric(results_dir):
    register_trainable("test_run_counter", Counter)
    analysis = tune.run(
        "test_run_counter",
        config={"start": grid_search([1, 2])},
        num_samples=2,
        stop={"training_iteration": 2},
        metric="count",
        mode="max",
        verbose=0,
    )
    assert len(analysis.trials) == 4
    assert len({t.trial_id for t in analysis.trials}) == 4
    assert all(t.logdir.startswith(str(results_dir / "test_run_counter")) for t in analysis.trials)
    assert analysis.best_result["count"] == 4
    assert analysis.best_config == {"start": 2}
    assert analysis.get_best_trial(mode="min").config == {"start": 1}
    assert analysis.best_checkpoint is None
    assert set(analysis.results) == {t.trial_id for t in analysis.trials}


def test_stop_callable_and_done_flag(tmp_path):
    seen = []

    def stop(trial_id, result):
        seen.append(trial_id)
        return result["count"] >= 2

    analysis = tune.run(Counter, stop=stop, local_dir=str(tmp_path), verbose=0)
    assert analysis.trials[0].last_result["count"] == 2
    assert seen == [analysis.trials[0].trial_id] * 2

    class Finishes(Counter):
        def step(self):
            result = super().step()
            return dict(result, done=self.count >= 3)

    analysis = tune.run(Finishes, local_dir=str(tmp_path), verbose=0)
    assert analysis.trials[0].last_result["count"] == 3


def test_restore_continues_from_a_checkpoint(tmp_path):
    first = tune.run(
        Counter, stop={"count": 2}, checkpoint_at_end=True, local_dir=str(tmp_path), verbose=0
    )
    second = tune.run(
        Counter,
        stop={"training_iteration": 3},
        restore=first.trials[0].checkpoint,
        local_dir=str(tmp_path),
        verbose=0,
    )
    assert second.trials[0].last_result["count"] == 3


def test_unknown_stop_key_names_close_matches(tmp_path):
    with pytest.raises(ValueError, match=r"'cuont'.*'count'"):
        tune.run(Counter, stop={"cuont": 3}, local_dir=str(tmp_path), verbose=0)


def test_unknown_trainable_name_is_a_clear_error(tmp_path):
    with pytest.raises(ValueError, match="Unknown trainable 'NoSuchAlgo'"):
        tune.run("NoSuchAlgo", local_dir=str(tmp_path), verbose=0)


def test_best_trial_needs_a_metric_and_mode(tmp_path):
    analysis = tune.run(Counter, stop={"count": 1}, local_dir=str(tmp_path), verbose=0)
    with pytest.raises(ValueError, match="needs a metric and a mode"):
        _ = analysis.best_config
    assert analysis.get_best_trial("not_reported", "max") is None


def test_failed_trial_is_marked_and_raises(tmp_path):
    class Crashes(Counter):
        def step(self):
            raise RuntimeError("boom")

    with pytest.raises(tune.TuneError) as info:
        tune.run(Crashes, stop={"count": 1}, local_dir=str(tmp_path), verbose=0)
    assert isinstance(info.value.__cause__, RuntimeError) and "boom" in str(info.value.__cause__)
    (trial,) = info.value.args[1]
    assert trial.status == "ERROR"


def test_verbose_prints_progress(tmp_path, capsys):
    tune.run(Counter, stop={"count": 1}, local_dir=str(tmp_path), verbose=2)
    out = capsys.readouterr().out
    assert "iteration 1" in out and "TERMINATED after 1 iterations" in out


def test_empty_grid_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="grid_search for lr has no values"):
        tune.run(Counter, config={"lr": grid_search([])}, local_dir=str(tmp_path), verbose=0)


# -- one stop rule, one loop, hooks (shared with `corral train`) --------------------------


class EvaluatesEverySecondIteration(Counter):
    """Like a trainer with evaluation_interval=2: `evaluation` only in even iterations."""

    def step(self):
        result = super().step()
        if self.count % 2 == 0:
            result[EVALUATION] = {EPISODE_REWARD_MEAN: 10.0 * self.count}
        result[EPISODE_REWARD_MEAN] = math.nan  # no episode finished yet
        return result


def test_a_section_key_missing_in_some_iterations_waits_for_them(tmp_path):
    analysis = tune.run(
        EvaluatesEverySecondIteration,
        stop={EVALUATION_REWARD_MEAN: 40, EPISODE_REWARD_MEAN: 0},  # the NaN never meets 0
        local_dir=str(tmp_path),
        verbose=0,
    )
    assert analysis.trials[0].last_result[TRAINING_ITERATION] == 4


def test_stop_rule_reads_nested_keys_and_refuses_typos_outside_the_sections():
    result = {"count": 3, INFO: {"count_squared": 9}}
    assert met_criterion({"info/count_squared": 9}, result) == ("info/count_squared", 9)
    assert met_criterion({"custom_metrics/x": 1, "count": 4}, result) is None
    with pytest.raises(ValueError, match=r"'cuont'.*'count'"):
        met_criterion({"cuont": 1}, result)
    with pytest.raises(ValueError, match="is not a number"):
        met_criterion({"name": 1}, {"name": "abc"})
    assert should_stop({}, {DONE: True}) and not should_stop({"count": 4}, result)


class Recorder(tune.Callback):
    def __init__(self):
        self.events = []

    def on_trial_start(self, iteration, trials, trial, **info):
        self.events.append(("start", iteration, info["trainable"].iteration))

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self.events.append(("result", iteration, result["count"]))

    def on_checkpoint(self, iteration, trials, trial, checkpoint, **info):
        self.events.append(("checkpoint", iteration, os.path.basename(checkpoint)))

    def on_trial_complete(self, iteration, trials, trial, **info):
        self.events.append(("complete", iteration, trial.status))

    def on_trial_error(self, iteration, trials, trial, **info):
        self.events.append(("error", iteration, trial.status))


def test_callbacks_see_every_event_of_the_trial_loop(tmp_path):
    recorder = Recorder()
    tune.run(
        Counter,
        stop={"count": 2},
        checkpoint_freq=2,
        local_dir=str(tmp_path),
        verbose=0,
        callbacks=[recorder],
    )
    assert recorder.events == [
        ("start", 0, 0),
        ("result", 1, 1),
        ("result", 2, 2),
        ("checkpoint", 2, "checkpoint_000002"),
        ("complete", 2, "TERMINATED"),
    ]


def test_a_failing_hook_ends_the_trial_as_an_error_and_stops_the_trainable(tmp_path):
    stopped = []

    class Refuses(Recorder):
        def on_trial_start(self, iteration, trials, trial, **info):
            info["trainable"].cleanup = lambda: stopped.append(True)
            raise RuntimeError("not this one")

    recorder = Refuses()
    with pytest.raises(RuntimeError, match="not this one"):
        tune.run(Counter, stop={"count": 2}, local_dir=str(tmp_path), callbacks=[recorder])
    assert recorder.events == [("error", 0, "ERROR")] and stopped == [True]


def test_callbacks_are_refused_on_the_ray_path(tmp_path):
    with pytest.raises(ValueError, match="local path only"):
        tune.run(Counter, config={"backend": "ray"}, callbacks=[Recorder()], verbose=0)


def test_trial_folders_are_named_by_one_namer(tmp_path):
    first, second = (
        new_logdir("PPO_CartPole-v1", str(tmp_path)),
        new_logdir("PPO_CartPole-v1", str(tmp_path)),
    )
    assert first != second
    for path in (first, second):
        assert os.path.dirname(path) == str(tmp_path) and os.path.isdir(path)
        assert os.path.basename(path).startswith("PPO_CartPole-v1_20")
