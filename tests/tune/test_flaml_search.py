"""``BlendSearch`` and ``CFO`` (Ray Tune 1.13's FLAML searchers, on the real flaml
library, the ``flaml`` extra): optimising with ``tune.run``, converting corral's search
spaces, ``points_to_evaluate`` and ``evaluated_rewards``, errors and resuming from their
JSON state."""

from __future__ import annotations

import json
import sys
import warnings

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore", UserWarning)  # ("flaml.automl is not available")
    flaml = pytest.importorskip(
        "flaml", reason="the flaml extra is not installed (pip install 'corral[flaml]')"
    )

from corral import tune  # noqa: E402
from corral.tune.suggest import create_searcher  # noqa: E402
from corral.tune.suggest.flaml import CFO, BlendSearch  # noqa: E402
from tests.tune.test_ask_tell_searchers import (  # noqa: E402
    SPACE,
    _run,
    interrupted_and_resumed,
)


@pytest.fixture(params=[CFO, BlendSearch], ids=lambda cls: cls.__name__)
def cls(request):
    return request.param


def test_finds_a_near_optimum_of_a_quadratic(tmp_path, cls):
    searcher = cls(space=dict(SPACE), metric="loss", mode="min", seed=20)
    analysis = _run(tmp_path, searcher, config={}, num_samples=30)
    losses = [t.last_result["loss"] for t in analysis.trials]
    assert len(losses) == 30
    assert min(losses[5:]) < min(losses[:5]) / 4
    assert min(losses) < 0.15
    assert [v for _, v in searcher.observations()] == pytest.approx(losses)


def test_by_name_over_tune_runs_config_and_mode_max(tmp_path, cls):
    searcher = create_searcher(cls.__name__.lower(), metric="loss", mode="max")
    assert type(searcher) is cls
    analysis = _run(tmp_path, searcher, config={**SPACE, "const": "kept", "n": {"z": 1}})
    assert len(analysis.trials) == 6
    for trial in analysis.trials:
        assert trial.config["const"] == "kept" and trial.config["n"] == {"z": 1}
        assert set(trial.evaluated_params) == {"x", "y"}
    assert [v for _, v in searcher.observations()] == pytest.approx(
        [t.last_result["loss"] for t in analysis.trials]
    )
    # mode="max": its best is the highest.
    assert searcher._searcher.metric_target == max(t.last_result["loss"] for t in analysis.trials)


def test_each_search_space_gives_the_values_it_should(cls):
    space = {
        "u": tune.uniform(-1, 2),
        "lu": tune.loguniform(1e-4, 1e-1),
        "ri": tune.randint(3, 6),
        "c": tune.choice(["a", "b", None]),
        "cl": tune.choice([[64, 64], {"k": 1}]),
        "nested": {"v": tune.uniform(0, 1)},
    }
    converted = cls.convert_search_space(space)
    assert set(converted) == {"u", "lu", "ri", "c", "cl", "nested/v"}
    assert (converted["u"].lower, converted["u"].upper) == (-1, 2)
    assert (converted["ri"].lower, converted["ri"].upper) == (3, 6)
    assert converted["c"].categories == ["a", "b", None]
    assert converted["cl"].categories == [0, 1]  # (searched by index)
    with pytest.raises(ValueError, match="cannot search grid_search values"):
        cls.convert_search_space({"g": tune.grid_search([1, 2])})
    searcher = cls(space=space, metric="loss", mode="min")
    configs = []
    for i in range(30):
        config = searcher.suggest(f"t{i}")
        if config is None:
            continue
        searcher.on_trial_complete(f"t{i}", {"loss": config["u"]})
        configs.append(config)
    assert len(configs) > 15
    assert all(set(c) == {"u", "lu", "ri", "c", "cl", "nested"} for c in configs)
    assert all(type(c["u"]) is float and -1 <= c["u"] <= 2 for c in configs)
    assert all(1e-4 <= c["lu"] <= 1e-1 for c in configs)
    assert all(type(c["ri"]) is int and 3 <= c["ri"] <= 5 for c in configs)
    assert {c["c"] for c in configs} <= {"a", "b", None}
    assert {json.dumps(c["cl"]) for c in configs} <= {"[64, 64]", '{"k": 1}'}
    assert all(0 <= c["nested"]["v"] <= 1 for c in configs)
    json.dumps(searcher.get_state())


def test_flamls_own_space_with_constants(cls):
    space = {"x": flaml.tune.uniform(-3, 3), "k": flaml.tune.choice([1, 2]), "const": 5}
    searcher = cls(space=space, mode="min", low_cost_partial_config={"k": 1})
    config = searcher.suggest("t0")
    assert config["const"] == 5 and config["k"] == 1 and -3 <= config["x"] <= 3
    searcher.on_trial_complete("t0", {"_metric": 1.0})
    assert searcher.observations()[0][1] == 1.0


def test_points_to_evaluate_run_first(tmp_path, cls):
    # (A point may leave parameters out: FLAML draws them.)
    points = [{"x": 0.5, "y": -0.5}, {"x": 0.7}]
    searcher = cls(space=dict(SPACE), metric="loss", mode="min", points_to_evaluate=points)
    analysis = _run(tmp_path, searcher, config={}, num_samples=4)
    assert analysis.trials[0].config == pytest.approx(points[0])
    assert analysis.trials[1].config["x"] == pytest.approx(0.7)
    with pytest.raises(ValueError, match=r"sets x=7, which x=\S+.* cannot give"):
        cls(space=dict(SPACE), mode="min", points_to_evaluate=[{"x": 7}]).suggest("t0")
    with pytest.raises(ValueError, match=r"sets z, which the search space lacks"):
        cls(space=dict(SPACE), mode="min", points_to_evaluate=[{"z": 7}]).suggest("t0")


def test_evaluated_rewards_are_told_not_run(tmp_path, cls):
    points = [{"x": 0.5, "y": -0.5}, {"x": 0.7, "y": -0.4}]
    searcher = cls(
        space=dict(SPACE),
        metric="loss",
        mode="min",
        points_to_evaluate=points,
        evaluated_rewards=[0.02, 0.0],
    )
    analysis = _run(tmp_path, searcher, config={}, num_samples=3)
    assert all(t.config not in points for t in analysis.trials)
    # Its best so far is the point told 0.0.
    assert searcher._searcher.metric_target == 0.0
    with pytest.raises(ValueError, match=r"evaluated_rewards=...\) takes .* \(at most 2 numbers"):
        cls(space=dict(SPACE), points_to_evaluate=points, evaluated_rewards=[1.0, 2.0, 3.0])


# -- errors ------------------------------------------------------------------------


def test_errors_are_named(tmp_path, cls):
    name = cls.__name__
    with pytest.raises(TypeError, match=rf"{name} got unexpected arguments: budget \(FLAML's"):
        cls(budget=3)
    with pytest.raises(ValueError, match=rf"{name} needs a mode, 'min' or 'max'"):
        _run(tmp_path, cls(space=dict(SPACE), metric="loss"), config={})
    with pytest.raises(ValueError, match=r"tune.run\(mode='max'\) differs from .* 'min'"):
        _run(tmp_path, cls(space=dict(SPACE), metric="loss", mode="min"), mode="max")
    with pytest.raises(ValueError, match=r"optimises 'score', which trial \S+'s result lacks"):
        _run(tmp_path, cls(space=dict(SPACE), metric="score", mode="min"), config={})
    with pytest.raises(ValueError, match=rf"{name} has no search space"):
        _run(tmp_path, cls(metric="loss", mode="min"), config={"const": 1})
    with pytest.raises(TypeError, match=r"space=...\) takes a dict"):
        cls(space=5)
    with pytest.raises(ValueError, match="ConcurrencyLimiter"):
        cls(space=dict(SPACE), max_concurrent=2)
    with pytest.MonkeyPatch().context() as m:
        m.setitem(sys.modules, "flaml", None)
        with pytest.raises(ImportError, match=r"needs flaml.*pip install 'corral\[flaml\]'"):
            cls()


def test_failed_trials_are_told_as_errors(cls):
    searcher = cls(space=dict(SPACE), metric="loss", mode="min")
    ids = []
    for i in range(8):
        if searcher.suggest(f"t{i}") is not None:
            ids.append(f"t{i}")
        if len(ids) == 4:
            break
    searcher.on_trial_complete(ids[0], {"loss": 1.0})
    searcher.on_trial_complete(ids[1], None, error=True)
    searcher.on_trial_complete(ids[2], {"loss": float("nan")})
    searcher.on_trial_complete(ids[3], {"loss": 2.0})
    assert [v for _, v in searcher.observations()] == [1.0, None, None, 2.0]
    assert searcher._searcher.metric_target == 1.0


# -- resume --------------------------------------------------------------------------


def test_resume_goes_on_from_the_trials_restored(tmp_path, cls, monkeypatch):
    searcher, _, resumed, configs = interrupted_and_resumed(
        tmp_path,
        monkeypatch,
        lambda: cls(space=dict(SPACE), metric="loss", mode="min", seed=20),
        num_samples=12,
    )
    # The restored searcher goes on from the best trial restored, without running the
    # trials again.
    assert not any(c in configs[:7] for c in configs[7:])
    losses = [t.last_result["loss"] for t in resumed.trials]
    assert [v for _, v in searcher.observations()] == pytest.approx(losses)
    assert searcher._searcher.metric_target == pytest.approx(min(losses))


def test_state_is_json_and_restores(cls):
    searcher = cls(space=dict(SPACE), metric="loss", mode="max")
    for i in range(6):
        config = searcher.suggest(f"t{i}")
        assert config is not None
        if i < 5:
            searcher.on_trial_complete(f"t{i}", {"loss": config["x"]}, error=i == 1)
    state = json.loads(json.dumps(searcher.get_state()))
    fresh = cls(space=dict(SPACE), metric="loss", mode="max")
    fresh.set_state(state)
    assert fresh.observations() == searcher.observations()
    # The running trial ends after the restore.
    fresh.on_trial_complete("t5", {"loss": 1.5})
    assert fresh.observations()[-1][1] == 1.5
    assert fresh.suggest("t6") is not None
    told = [v for _, v in fresh.observations() if v is not None]
    assert fresh._searcher.metric_target == max(told)
    name = cls.__name__
    with pytest.raises(ValueError, match=f"Not a state of {name}"):
        fresh.set_state({"trials": [{"trial_id": 3}]})
    with pytest.raises(ValueError, match=f"Not a state of {name}.*are not the parameters"):
        fresh.set_state({"trials": [{"trial_id": "a", "params": {"z": 1}, "value": 1, "live": 0}]})
