"""``AxSearch`` (Ray Tune 1.13's, on the real Ax library's ``Client``, the ``ax`` extra):
optimising with ``tune.run``, corral's search spaces and Ray Tune's ``AxClient`` parameter
dicts, ``points_to_evaluate``, parameter and outcome constraints, failed trials, errors
and resuming from its JSON state."""

from __future__ import annotations

import json
import sys

import pytest

pytest.importorskip("ax", reason="the ax extra is not installed (pip install 'corral[ax]')")

from corral import tune  # noqa: E402
from corral.tune.suggest import create_searcher  # noqa: E402
from corral.tune.suggest.ax import AxSearch  # noqa: E402
from tests.tune.test_ask_tell_searchers import (  # noqa: E402
    SPACE,
    _run,
    interrupted_and_resumed,
)


def _ax(**kwargs):
    kwargs.setdefault("space", dict(SPACE))
    kwargs.setdefault("metric", "loss")
    kwargs.setdefault("mode", "min")
    kwargs.setdefault("random_seed", 0)
    return AxSearch(**kwargs)


def _suggest_and_report(searcher, n, loss):
    """``n`` suggestions, each reported with ``loss(config)`` at once."""
    configs = []
    for i in range(n):
        config = searcher.suggest(f"t{i}")
        assert config is not None
        searcher.on_trial_complete(f"t{i}", {"loss": loss(config), **config})
        configs.append(config)
    return configs


# -- searching -----------------------------------------------------------------------


def test_its_model_finds_a_better_point_than_its_first_points(tmp_path):
    searcher = _ax()
    analysis = _run(tmp_path, searcher, config={}, num_samples=14)
    losses = [t.last_result["loss"] for t in analysis.trials]
    assert len(losses) == 14
    # The centre and Sobol points first (5), then the Gaussian process's suggestions.
    assert analysis.trials[0].config == {"x": 0.0, "y": 0.0}
    assert min(losses[5:]) < min(losses[:5]) / 2
    assert min(losses) < 0.1
    assert [v for _, v in searcher.observations()] == pytest.approx(losses)


def test_by_name_over_tune_runs_config_and_mode_max(tmp_path):
    searcher = create_searcher("ax", metric="loss", mode="max", random_seed=1)
    assert type(searcher) is AxSearch
    analysis = _run(tmp_path, searcher, config={**SPACE, "const": "kept", "n": {"z": 1}})
    assert len(analysis.trials) == 6  # (the 6th after the first 5 have results)
    for trial in analysis.trials:
        assert trial.config["const"] == "kept" and trial.config["n"] == {"z": 1}
        assert set(trial.evaluated_params) == {"x", "y"}
    losses = [t.last_result["loss"] for t in analysis.trials]
    assert [v for _, v in searcher.observations()] == pytest.approx(losses)
    # mode="max": Ax's best is the highest.
    best, *_ = searcher._client.get_best_parameterization(use_model_predictions=False)
    top = analysis.trials[losses.index(max(losses))].config
    assert best == pytest.approx({"x": top["x"], "y": top["y"]})


def test_each_search_space_gives_the_values_it_should():
    space = {
        "u": tune.uniform(-1, 2),
        "lu": tune.loguniform(1e-4, 1e-1),
        "ri": tune.randint(3, 6),
        "lri": tune.lograndint(1, 100),
        "c": tune.choice(["a", "b", None]),
        "cl": tune.choice([[64, 64], {"k": 1}]),
        "nested": {"v": tune.uniform(0, 1)},
    }
    converted = AxSearch.convert_search_space(space)
    assert set(converted) == {"u", "lu", "ri", "lri", "c", "cl", "nested/v"}
    assert converted["u"].bounds == (-1.0, 2.0) and converted["u"].scaling == "linear"
    assert converted["lu"].scaling == "log"
    assert converted["ri"].bounds == (3, 5) and converted["ri"].parameter_type == "int"
    assert converted["lri"].bounds == (1, 99) and converted["lri"].scaling == "log"
    assert converted["c"].values == [0, 1, 2]  # (searched by index)
    assert converted["c"].is_ordered is False
    assert AxSearch.convert_search_space({"b": tune.choice([32, 64])})["b"].is_ordered
    with pytest.raises(ValueError, match="cannot search grid_search values"):
        AxSearch.convert_search_space({"g": tune.grid_search([1, 2])})
    with pytest.raises(ValueError, match="Ax has no quantised or normal parameters"):
        AxSearch.convert_search_space({"q": tune.quniform(0, 1, 0.1)})
    searcher = _ax(space=space, initialization_budget=10)
    configs = _suggest_and_report(searcher, 8, lambda c: c["u"])
    assert all(set(c) == {"u", "lu", "ri", "lri", "c", "cl", "nested"} for c in configs)
    assert all(type(c["u"]) is float and -1 <= c["u"] <= 2 for c in configs)
    assert all(1e-4 <= c["lu"] <= 1e-1 for c in configs)
    assert all(type(c["ri"]) is int and 3 <= c["ri"] <= 5 for c in configs)
    assert all(type(c["lri"]) is int and 1 <= c["lri"] <= 99 for c in configs)
    assert {c["c"] for c in configs} == {"a", "b", None}
    assert {json.dumps(c["cl"]) for c in configs} == {"[64, 64]", '{"k": 1}'}
    assert all(0 <= c["nested"]["v"] <= 1 for c in configs)
    json.dumps(searcher.get_state())


def test_ray_tunes_axclient_parameters_and_axs_own_configs():
    from ax.api.configs import RangeParameterConfig

    space = [
        {"name": "lr", "type": "range", "bounds": [1e-4, 1e-1], "log_scale": True},
        {"name": "layers", "type": "range", "bounds": [1, 4], "value_type": "int"},
        {"name": "act", "type": "choice", "values": ["relu", "tanh"]},
        {"name": "model/size", "type": "fixed", "value": 64},
        RangeParameterConfig(name="x", bounds=(0.0, 1.0), parameter_type="float"),
    ]
    searcher = AxSearch(space=space, metric="loss", mode="min", random_seed=0)
    configs = _suggest_and_report(searcher, 5, lambda c: c["lr"])
    for config in configs:
        assert set(config) == {"lr", "layers", "act", "model", "x"}
        assert config["model"] == {"size": 64}
        assert 1e-4 <= config["lr"] <= 1e-1 and type(config["layers"]) is int
        assert config["act"] in ("relu", "tanh") and 0 <= config["x"] <= 1
    with pytest.raises(ValueError, match=r"is not an Ax parameter \(type 'range', 'choice'"):
        AxSearch(space=[{"name": "a", "type": "interval"}], mode="min")
    with pytest.raises(ValueError, match=r"is not an Ax parameter \(unknown keys \['bound'\]"):
        AxSearch(space=[{"name": "a", "type": "range", "bound": [0, 1]}], mode="min")
    with pytest.raises(ValueError, match="names 'a' twice"):
        AxSearch(space=[{"name": "a", "type": "fixed", "value": 1}] * 2, mode="min")


def test_points_to_evaluate_run_first(tmp_path):
    points = [{"x": 0.5, "y": -0.5}, {"x": 0.7, "y": -0.4}]
    searcher = _ax(points_to_evaluate=points)
    analysis = _run(tmp_path, searcher, config={}, num_samples=4)
    assert [t.config for t in analysis.trials[:2]] == points
    assert searcher.get_state()["points_used"] == 2
    with pytest.raises(ValueError, match=r"sets x=7, which x=\S+.* cannot give"):
        _ax(points_to_evaluate=[{"x": 7, "y": 0}]).suggest("t0")
    with pytest.raises(ValueError, match=r"lacks y: give a value for every parameter"):
        _ax(points_to_evaluate=[{"x": 0.5}]).suggest("t0")


def test_parameter_and_outcome_constraints():
    searcher = _ax(parameter_constraints=["x + y <= 1"], outcome_constraints=["m1 <= 3"])
    with pytest.raises(ValueError, match="outcome_constraints name m1, which trial t0's"):
        searcher.suggest("t0")
        searcher.on_trial_complete("t0", {"loss": 1.0})
    configs = []
    for i in range(1, 6):
        config = searcher.suggest(f"t{i}")
        configs.append(config)
        searcher.on_trial_complete(f"t{i}", {"loss": 1.0, "m1": float(i)})
    assert all(c["x"] + c["y"] <= 1 + 1e-9 for c in configs)
    state = json.loads(json.dumps(searcher.get_state()))
    assert [t["outcomes"] for t in state["trials"][1:]] == [{"m1": float(i)} for i in range(1, 6)]
    # A constrained metric that is not a number: the trial counts as failed.
    searcher.suggest("t6")
    searcher.on_trial_complete("t6", {"loss": 1.0, "m1": float("nan")})
    assert searcher.observations()[-1][1] is None


def test_failed_trials_are_marked_failed():
    searcher = _ax()
    for i in range(4):
        searcher.suggest(f"t{i}")
    searcher.on_trial_complete("t0", {"loss": 1.0})
    searcher.on_trial_complete("t1", None, error=True)
    searcher.on_trial_complete("t2", {"loss": float("nan")})
    searcher.on_trial_complete("t3", {"loss": 2.0})
    assert [v for _, v in searcher.observations()] == [1.0, None, None, 2.0]
    statuses = [t.status.name for t in searcher._client._experiment.trials.values()]
    assert statuses == ["COMPLETED", "FAILED", "FAILED", "COMPLETED"]


# -- errors ------------------------------------------------------------------------


def test_errors_are_named(tmp_path):
    with pytest.raises(NotImplementedError, match=r"ax_client=...\) is not built"):
        AxSearch(ax_client=object())
    with pytest.raises(TypeError, match=r"enforce_sequential_optimization: AxClient's"):
        AxSearch(enforce_sequential_optimization=False)
    with pytest.raises(TypeError, match="random_seed=...\\) takes an int"):
        AxSearch(random_seed="1")
    with pytest.raises(ValueError, match="AxSearch needs a mode, 'min' or 'max'"):
        _run(tmp_path, AxSearch(space=dict(SPACE), metric="loss"), config={})
    with pytest.raises(ValueError, match=r"tune.run\(mode='max'\) differs from .* 'min'"):
        _run(tmp_path, _ax(), mode="max")
    with pytest.raises(ValueError, match=r"optimises 'score', which trial \S+'s result lacks"):
        _run(tmp_path, _ax(metric="score"), config={})
    with pytest.raises(ValueError, match="AxSearch has no search space"):
        _run(tmp_path, AxSearch(metric="loss", mode="min"), config={"const": 1})
    with pytest.raises(TypeError, match=r"space=...\) takes corral search spaces"):
        AxSearch(space=5)
    with pytest.raises(ValueError, match="Ax refused the experiment"):
        _ax(parameter_constraints=["x + z <= 1"]).suggest("t0")
    with pytest.raises(ValueError, match="ConcurrencyLimiter"):
        _ax(max_concurrent=2)
    with pytest.MonkeyPatch().context() as m:
        m.setitem(sys.modules, "ax", None)
        with pytest.raises(ImportError, match=r"needs ax.*pip install 'corral\[ax\]'"):
            AxSearch()


# -- resume --------------------------------------------------------------------------


def test_resume_goes_on_from_the_trials_restored(tmp_path, monkeypatch):
    searcher, _, resumed, configs = interrupted_and_resumed(
        tmp_path, monkeypatch, lambda: _ax(random_seed=3), num_samples=10
    )
    # Ax heard of all 10: the 6 restored, the 7th run again, 3 new ones.
    losses = [t.last_result["loss"] for t in resumed.trials]
    observed = searcher.observations()
    assert [v for _, v in observed] == pytest.approx(losses)
    assert [p["x"] for p, _ in observed] == pytest.approx([c["x"] for c in configs])
    assert len(searcher._client._experiment.trials) == 10


def test_state_is_json_and_restores():
    searcher = _ax(mode="max")
    for i in range(5):
        config = searcher.suggest(f"t{i}")
        if i < 4:
            searcher.on_trial_complete(f"t{i}", {"loss": config["x"]}, error=i == 1)
    state = json.loads(json.dumps(searcher.get_state()))
    fresh = _ax(mode="max")
    fresh.set_state(state)
    assert fresh.observations() == searcher.observations()
    statuses = [t.status.name for t in fresh._client._experiment.trials.values()]
    assert statuses == ["COMPLETED", "FAILED", "COMPLETED", "COMPLETED", "RUNNING"]
    # The running trial ends after the restore.
    fresh.on_trial_complete("t4", {"loss": 1.5})
    assert fresh.observations()[-1][1] == 1.5
    assert fresh.suggest("t5") is not None
    with pytest.raises(ValueError, match="Not a state of AxSearch"):
        fresh.set_state({"trials": [{"trial_id": 3}]})
    with pytest.raises(ValueError, match="Not a state of AxSearch.*are not the parameters"):
        fresh.set_state({"trials": [{"trial_id": "a", "params": {"z": 1}, "value": 1, "live": 0}]})
    bad = {"trial_id": "a", "params": {"x": 0, "y": 0}, "value": 1, "live": False, "outcomes": 3}
    with pytest.raises(ValueError, match="outcomes must map names to finite numbers"):
        fresh.set_state({"trials": [bad]})
