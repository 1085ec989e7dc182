"""Ray Tune 1.13 names that RLlib 1.x scripts import: progress reporters, the quantised /
log-int / normal search spaces, ``tune.utils``, and the smaller ones."""

from __future__ import annotations

import json
import random

import numpy as np
import pytest

from corral import tune


def _train(config):
    for i in range(2):
        tune.report(score=config["x"] * (i + 1), cpus=tune.get_trial_resources().required_resources)


class _Recorder(tune.ProgressReporter):
    def __init__(self):
        self.asked, self.reports = [], []

    def should_report(self, trials, done=False):
        self.asked.append(done)
        return True

    def report(self, trials, done, *sys_info):
        self.reports.append(([t.status for t in trials], done, sys_info))


def test_custom_reporter_is_asked_every_step_and_at_the_end(tmp_path):
    rec = _Recorder()
    tune.run(
        _train,
        config={"x": tune.grid_search([1, 2])},
        local_dir=str(tmp_path),
        progress_reporter=rec,
        verbose=1,
    )
    assert rec.asked[-1] is True and rec.asked.count(True) == 1
    assert len(rec.asked) >= 4  # a step per iteration, then the end
    statuses, done, sys_info = rec.reports[-1]
    assert done and statuses == ["TERMINATED", "TERMINATED"] and sys_info


def test_cli_reporter_shapes_the_table(tmp_path, capsys):
    reporter = tune.CLIReporter(
        metric_columns={"score": "S"},
        parameter_columns=["x"],
        max_report_frequency=0,
        max_progress_rows=1,
        print_intermediate_tables=True,
    )
    reporter.add_metric_column("training_iteration", "it")
    with pytest.raises(ValueError, match="already exists"):
        reporter.add_metric_column("score")
    tune.run(
        _train,
        config={"x": tune.grid_search([3, 5])},
        local_dir=str(tmp_path),
        progress_reporter=reporter,
        metric="score",
        mode="max",
        verbose=2,
    )
    out = capsys.readouterr().out
    assert "== Status ==" in out and "Number of trials: 2/2 (2 TERMINATED)" in out
    table = out[out.rindex("| Trial name") :]
    header = table.splitlines()[0]
    assert [c.strip() for c in header.strip("|").split("|")] == [
        "Trial name",
        "status",
        "loc",
        "x",
        "S",
        "it",
    ]
    assert "Current best trial" in out and "score=10" in out
    # While running, max_progress_rows=1 left a trial out; the last report shows all.
    assert "... 1 more trials not shown" in out
    assert "more trials not shown" not in table


def test_reporter_verbose_1_replaces_default_lines(tmp_path, capsys):
    tune.run(
        _train,
        config={"x": 1},
        local_dir=str(tmp_path),
        verbose=1,
        progress_reporter=tune.CLIReporter(max_report_frequency=0),
    )
    out = capsys.readouterr().out
    assert "== Status ==" in out and "TERMINATED after" not in out
    tune.run(_train, config={"x": 1}, local_dir=str(tmp_path), verbose=1)
    out = capsys.readouterr().out
    assert "== Status ==" not in out and "TERMINATED after 2 iterations" in out


def test_bad_reporter_and_sync_config_refused(tmp_path):
    with pytest.raises(TypeError, match="ProgressReporter"):
        tune.run(_train, config={"x": 1}, local_dir=str(tmp_path), progress_reporter=object())
    with pytest.raises(ValueError, match="upload_dir"):
        tune.run(
            _train,
            config={"x": 1},
            local_dir=str(tmp_path),
            sync_config=tune.SyncConfig(upload_dir="s3://bucket"),
        )


def test_progress_reporter_module_path():
    from corral.tune.progress_reporter import CLIReporter, JupyterNotebookReporter, ProgressReporter

    assert CLIReporter is tune.CLIReporter and ProgressReporter is tune.ProgressReporter
    assert JupyterNotebookReporter is tune.JupyterNotebookReporter


@pytest.mark.parametrize(
    ("domain", "allowed"),
    [
        (tune.quniform(0, 1, 0.25), {0.0, 0.25, 0.5, 0.75, 1.0}),
        (tune.qrandint(0, 10, 5), {0, 5, 10}),
        (tune.lograndint(1, 4), {1, 2, 3}),
        (tune.qlograndint(10, 100, 10), {10 * i for i in range(1, 11)}),
        (tune.qloguniform(1, 8, 1), {float(i) for i in range(1, 9)}),
    ],
)
def test_bounded_new_domains_draw_within_their_values(domain, allowed):
    rng = random.Random(0)
    drawn = {domain.sample(rng, None) for _ in range(500)}
    assert drawn <= allowed and len(drawn) > 1
    assert type(next(iter(drawn))) is type(next(iter(allowed)))


def test_normal_domains_and_bad_arguments():
    rng = random.Random(0)
    values = [tune.randn(5.0, 0.1).sample(rng, None) for _ in range(200)]
    assert abs(np.mean(values) - 5.0) < 0.05
    assert all(
        v * 2 == round(v * 2) for v in (tune.qrandn(0, 1, 0.5).sample(rng, None) for _ in range(50))
    )
    with pytest.raises(ValueError, match="multiple of q"):
        tune.quniform(0, 1, 0.3)
    with pytest.raises(ValueError, match="sd > 0"):
        tune.randn(0, 0)
    with pytest.raises(DeprecationWarning):
        tune.function(len)


def test_default_generator_samples_new_domains(tmp_path):
    analysis = tune.run(
        _train,
        config={"x": tune.qrandint(1, 3, 1), "y": tune.randn()},
        num_samples=3,
        local_dir=str(tmp_path),
        verbose=0,
        seed=1,
    )
    assert all(
        t.config["x"] in (1, 2, 3) and isinstance(t.config["y"], float) for t in analysis.trials
    )


def test_searchers_convert_or_refuse_new_domains():
    pytest.importorskip("optuna")
    pytest.importorskip("hyperopt")
    from corral.tune.suggest.hyperopt import HyperOptSearch
    from corral.tune.suggest.optuna import OptunaSearch

    space = {
        "a": tune.quniform(0, 1, 0.25),
        "b": tune.qrandint(0, 10, 5),
        "c": tune.lograndint(1, 100),
    }
    dists = OptunaSearch.convert_search_space(space)
    assert (
        dists["a"].step == 0.25
        and dists["b"].step == 5
        and dists["b"].high == 10
        and dists["c"].log
    )
    with pytest.raises(ValueError, match="no normal distribution"):
        OptunaSearch.convert_search_space({"n": tune.randn()})
    hyper = HyperOptSearch.convert_search_space({**space, "n": tune.qrandn(0, 1, 0.5)})
    assert set(hyper) == {"a", "b", "c", "n"}
    searcher = HyperOptSearch(
        space={"b": tune.qrandint(0, 10, 5), "n": tune.randn()},
        metric="m",
        mode="max",
        random_state_seed=0,
    )
    for i in range(5):
        config = searcher.suggest(str(i))
        assert config["b"] in (0, 5, 10) and isinstance(config["n"], float)


def test_tune_utils():
    from corral.tune.utils import (
        date_str,
        deep_update,
        flatten_dict,
        merge_dicts,
        unflatten_dict,
        unflattened_lookup,
    )
    from corral.tune.utils.placement_groups import PlacementGroupFactory
    from corral.tune.utils.util import SafeFallbackEncoder, is_nan_or_inf

    assert merge_dicts({"a": {"b": 1}}, {"a": {"c": 2}}) == {"a": {"b": 1, "c": 2}}
    assert deep_update({"a": {"b": 1}}, {"a": {"b": 2}}) == {"a": {"b": 2}}
    assert flatten_dict({"a": {"b": 1}}) == {"a/b": 1}
    with pytest.raises(ValueError, match="delimiter"):
        flatten_dict({"a/b": 1}, prevent_delimiter=True)
    assert unflatten_dict({"a/b": 1}) == {"a": {"b": 1}}
    assert unflattened_lookup("a/1/b", {"a": [{}, {"b": 3}]}) == 3
    assert unflattened_lookup("a/x", {"a": {}}, default=None) is None
    with pytest.raises(KeyError):
        unflattened_lookup("a/x", {"a": {}})
    assert len(date_str()) == 19 and is_nan_or_inf(float("inf"))
    assert (
        json.loads(json.dumps({"v": np.float32(1.5), "o": object}, cls=SafeFallbackEncoder))["v"]
        == 1.5
    )
    assert PlacementGroupFactory is tune.PlacementGroupFactory


def test_registry_trial_resources_and_tune_module_names(tmp_path):
    from corral.tune.registry import get_trainable_cls
    from corral.tune.resources import Resources, resources_from_tune_argument
    from corral.tune.trial import ExportFormat
    from corral.tune.tune import run_experiments

    class Mine(tune.Trainable):
        def step(self):
            return {"done": True}

    tune.register_trainable("mine_1_13", Mine)
    assert get_trainable_cls("mine_1_13") is Mine
    assert get_trainable_cls("PPO").__name__ == "PPOTrainer"
    with pytest.raises(ValueError, match="Unknown trainable"):
        get_trainable_cls("NoSuchAlgo")
    assert ExportFormat.MODEL == "model" and ExportFormat is tune.ExportFormat
    resources = Resources(cpu=1, gpu=0, extra_cpu=2)
    assert resources.cpu_total() == 3 and resources.summary_string().startswith("3 CPUs")
    assert resources_from_tune_argument(resources).required_resources == {"CPU": 3}
    assert run_experiments is tune.run_experiments
    analysis = tune.run(
        _train, config={"x": 1}, local_dir=str(tmp_path), verbose=0, resources_per_trial={"cpu": 2}
    )
    assert analysis.trials[0].last_result["cpus"] == {"CPU": 2}
    assert tune.get_trial_resources() is None  # outside a session
