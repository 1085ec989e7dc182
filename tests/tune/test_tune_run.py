import os

import pytest

from corral import tune
from corral.tune import Trainable, grid_search, register_trainable


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

    with pytest.raises(RuntimeError, match="boom"):
        tune.run(Crashes, stop={"count": 1}, local_dir=str(tmp_path), verbose=0)


def test_verbose_prints_progress(tmp_path, capsys):
    tune.run(Counter, stop={"count": 1}, local_dir=str(tmp_path), verbose=2)
    out = capsys.readouterr().out
    assert "iteration 1" in out and "TERMINATED after 1 iterations" in out


def test_empty_grid_is_rejected(tmp_path):
    with pytest.raises(ValueError, match="grid_search for lr has no values"):
        tune.run(Counter, config={"lr": grid_search([])}, local_dir=str(tmp_path), verbose=0)
