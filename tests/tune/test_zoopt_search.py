"""``ZOOptSearch`` (Ray Tune 1.13's, on the real zoopt library, the ``zoopt`` extra):
optimising with ``tune.run``, converting corral's search spaces, ``points_to_evaluate``,
ZOOpt's own dimensions, errors and resuming from its JSON state."""

from __future__ import annotations

import json
import sys

import numpy as np
import pytest

pytest.importorskip(
    "zoopt", reason="the zoopt extra is not installed (pip install 'corral[zoopt]')"
)

from zoopt import ValueType  # noqa: E402

from corral import tune  # noqa: E402
from corral.tune.suggest import create_searcher  # noqa: E402
from corral.tune.suggest.zoopt import ZOOptSearch  # noqa: E402
from tests.tune.test_ask_tell_searchers import (  # noqa: E402
    SPACE,
    _run,
    interrupted_and_resumed,
)


def make(seed: int = 0, **kwargs) -> ZOOptSearch:
    kwargs.setdefault("budget", 40)
    kwargs.setdefault("dim_dict", dict(SPACE))
    kwargs.setdefault("metric", "loss")
    kwargs.setdefault("mode", "min")
    return ZOOptSearch(seed=seed, **kwargs)


@pytest.mark.parametrize("seed", [0, 2])
def test_finds_a_near_optimum_of_a_quadratic(tmp_path, seed):
    searcher = make(seed)
    analysis = _run(tmp_path, searcher, config={}, num_samples=40)
    losses = [t.last_result["loss"] for t in analysis.trials]
    assert len(losses) == 40
    # Its first batch (4 trials for a budget of 40) is random; the classifier's
    # suggestions beat it clearly.
    assert min(losses[4:]) < min(losses[:4]) / 4
    assert min(losses) < 0.05
    assert [v for _, v in searcher.observations()] == pytest.approx(losses)


def test_by_name_over_tune_runs_config_and_mode_max(tmp_path):
    searcher = create_searcher("zoopt", budget=10, metric="loss", mode="max")
    assert type(searcher) is ZOOptSearch
    analysis = _run(tmp_path, searcher, config={**SPACE, "const": "kept", "n": {"z": 1}})
    assert len(analysis.trials) == 6
    for trial in analysis.trials:
        assert trial.config["const"] == "kept" and trial.config["n"] == {"z": 1}
    # mode="max": the loss told is the metric negated.
    assert [v for _, v in searcher.observations()] == pytest.approx(
        [-t.last_result["loss"] for t in analysis.trials]
    )


def test_each_search_space_gives_the_values_it_should():
    space = {
        "u": tune.uniform(-1, 2),
        "ri": tune.randint(3, 6),
        "c": tune.choice(["a", 2, None]),
        "cl": tune.choice([[64, 64], {"k": 1}]),
        "nested": {"v": tune.uniform(0, 1)},
    }
    assert ZOOptSearch.convert_search_space(space) == {
        "u": (ValueType.CONTINUOUS, [-1.0, 2.0], 1e-12),
        "ri": (ValueType.DISCRETE, [3, 5], True),
        "c": (ValueType.GRID, [0, 1, 2]),
        "cl": (ValueType.GRID, [0, 1]),
        "nested/v": (ValueType.CONTINUOUS, [0.0, 1.0], 1e-12),
    }
    with pytest.raises(ValueError, match=r"cannot search lu=.*no log scale"):
        ZOOptSearch.convert_search_space({"lu": tune.loguniform(1e-4, 1e-1)})
    searcher = make(dim_dict=space, budget=200, parallel_num=4)
    configs = []
    for i in range(40):
        config = searcher.suggest(f"t{i}")
        assert isinstance(config, dict)
        searcher.on_trial_complete(f"t{i}", {"loss": config["u"]})
        configs.append(config)
    assert all(type(c["u"]) is float and -1 <= c["u"] <= 2 for c in configs)
    assert {c["ri"] for c in configs} == {3, 4, 5}
    assert all(type(c["ri"]) is int for c in configs)
    # Plain categories come back as themselves (2 stays an int), the others as they are.
    assert {c["c"] for c in configs} == {"a", 2, None}
    assert {json.dumps(c["cl"]) for c in configs} == {"[64, 64]", '{"k": 1}'}
    assert all(0 <= c["nested"]["v"] <= 1 for c in configs)
    json.dumps(searcher.get_state())


def test_zoopts_own_dimensions():
    dim_dict = {
        "x": (ValueType.CONTINUOUS, [-3, 3], 1e-2),
        "k": (ValueType.DISCRETE, [1, 4], True),
        "act": (ValueType.GRID, ["relu", "tanh"]),
    }
    searcher = ZOOptSearch(
        budget=20,
        dim_dict=dim_dict,
        mode="min",
        points_to_evaluate=[{"x": 0.5, "k": 2, "act": "tanh"}],
        seed=0,
    )
    first = searcher.suggest("t0")
    assert first == {"x": 0.5, "k": 2, "act": "tanh"}
    searcher.on_trial_complete("t0", {"_metric": 1.0})
    config = searcher.suggest("t1")
    assert round(config["x"], 2) == config["x"] and config["k"] in (1, 2, 3, 4)
    assert config["act"] in ("relu", "tanh") and type(config["act"]) is str
    with pytest.raises(ValueError, match=r"sets k=9, which k=.* cannot give"):
        ZOOptSearch(
            budget=20,
            dim_dict=dim_dict,
            mode="min",
            points_to_evaluate=[{"x": 0, "k": 9, "act": "relu"}],
        ).suggest("t")


def test_first_batch_at_once_then_parallel_num_at_a_time():
    searcher = make(budget=20, parallel_num=2)  # (a first batch of 4)
    assert all(isinstance(searcher.suggest(f"t{i}"), dict) for i in range(4))
    assert searcher.suggest("t4") is None  # the batch ends first
    for i in range(4):
        searcher.on_trial_complete(f"t{i}", {"loss": float(i)})
    assert isinstance(searcher.suggest("t4"), dict)
    assert isinstance(searcher.suggest("t5"), dict)
    assert searcher.suggest("t6") is None  # parallel_num=2 run
    searcher.on_trial_complete("t4", {"loss": 0.5})
    assert isinstance(searcher.suggest("t6"), dict)


def test_points_to_evaluate_run_first(tmp_path):
    points = [{"x": 0.5, "y": -0.5}, {"x": 0.7, "y": -0.4}]
    searcher = make(points_to_evaluate=points)
    analysis = _run(tmp_path, searcher, config={}, num_samples=6)
    for trial, point in zip(analysis.trials[:2], points):
        assert trial.config == pytest.approx(point)
    assert analysis.trials[1].last_result["loss"] == pytest.approx(0.0)
    with pytest.raises(ValueError, match=r"lacks y: give a value for every parameter"):
        make(points_to_evaluate=[{"x": 0.5}]).suggest("t0")
    with pytest.raises(ValueError, match=r"sets x=7, which x=\S+.* cannot give"):
        make(points_to_evaluate=[{"x": 7, "y": 0}]).suggest("t0")


def test_small_discrete_space_finishes_when_all_tried():
    searcher = make(dim_dict={"c": tune.choice(["a", "b", "c"])}, budget=10)
    seen = []
    for i in range(10):
        config = searcher.suggest(f"t{i}")
        if config == "FINISHED":
            break
        if config is None:
            continue
        seen.append(config["c"])
        searcher.on_trial_complete(f"t{i}", {"loss": 1.0})
    assert config == "FINISHED"
    assert sorted(seen) == ["a", "b", "c"]


# -- errors ------------------------------------------------------------------------


def test_errors_are_named(tmp_path):
    with pytest.raises(ValueError, match=r"budget=...\) must be an int >= 3.*got None"):
        ZOOptSearch(dim_dict=dict(SPACE))
    with pytest.raises(ValueError, match=r"budget=...\) must be an int >= 3.*got 2"):
        ZOOptSearch(budget=2)
    with pytest.raises(ValueError, match=r"algo=...\) must be 'asracos' or 'sracos'"):
        ZOOptSearch(algo="racos", budget=10)
    with pytest.raises(ValueError, match=r"parallel_num=...\) must be an int >= 1, got 0"):
        ZOOptSearch(budget=10, parallel_num=0)
    with pytest.raises(ValueError, match=r"seed=...\) must be an int or None"):
        ZOOptSearch(budget=10, seed="x")
    with pytest.raises(TypeError, match=r"unexpected arguments: init_samples, nonsense"):
        ZOOptSearch(budget=10, nonsense=1, init_samples=[])
    with pytest.raises(TypeError, match=r"dim_dict maps names to ZOOpt dimensions.*got x="):
        ZOOptSearch(budget=10, dim_dict={"x": (ValueType.CONTINUOUS, [1, 0], 0.1)})
    with pytest.raises(TypeError, match=r"dim_dict=...\) takes a dict"):
        ZOOptSearch(budget=10, dim_dict=5)
    with pytest.raises(ValueError, match="ConcurrencyLimiter"):
        ZOOptSearch(budget=10, max_concurrent=2)
    with pytest.raises(ValueError, match=r"ZOOptSearch needs a mode, 'min' or 'max'"):
        _run(tmp_path, make(mode=None), config={})
    with pytest.raises(ValueError, match=r"tune.run\(mode='max'\) differs from .* 'min'"):
        _run(tmp_path, make(), mode="max")
    with pytest.raises(ValueError, match=r"optimises 'score', which trial \S+'s result lacks"):
        _run(tmp_path, make(metric="score"), config={})
    with pytest.raises(ValueError, match=r"ZOOptSearch has no search space"):
        _run(tmp_path, make(dim_dict=None), config={"const": 1})
    with pytest.MonkeyPatch().context() as m:
        m.setitem(sys.modules, "zoopt", None)
        with pytest.raises(ImportError, match=r"needs zoopt.*pip install 'corral\[zoopt\]'"):
            ZOOptSearch(budget=10)


def test_failed_trials_are_told_as_the_worst_loss():
    searcher = make(budget=10)
    for i in range(4):
        searcher.suggest(f"t{i}")
    searcher.on_trial_complete("t0", {"loss": 1.0})
    searcher.on_trial_complete("t1", None, error=True)
    searcher.on_trial_complete("t2", {"loss": float("nan")})
    searcher.on_trial_complete("t3", {"loss": 2.0})
    assert [v for _, v in searcher.observations()] == [1.0, None, None, 2.0]
    # The batch counts as ended: the classifier suggests.
    assert isinstance(searcher.suggest("t4"), dict)


def test_leaves_numpys_global_random_state_alone():
    np.random.seed(123)
    expected = np.random.random()
    np.random.seed(123)
    searcher = make()
    for i in range(6):
        searcher.suggest(f"t{i}")
    assert np.random.random() == expected


# -- resume --------------------------------------------------------------------------


def test_resume_goes_on_with_the_observations_restored(tmp_path, monkeypatch):
    searcher, _, resumed, configs = interrupted_and_resumed(
        tmp_path, monkeypatch, lambda: make(seed=3, budget=12), num_samples=12
    )
    # The restored searcher draws new configs, not its first ones again.
    assert not any(c in configs[:7] for c in configs[7:])
    observed = searcher.observations()
    assert [v for _, v in observed] == pytest.approx(
        [t.last_result["loss"] for t in resumed.trials]
    )
    assert [p["x"] for p, _ in observed] == pytest.approx([c["x"] for c in configs])


def test_state_is_json_and_replays():
    searcher = make(mode="max", budget=10)
    for i in range(6):
        config = searcher.suggest(f"t{i}")
        if i < 5:
            searcher.on_trial_complete(f"t{i}", {"loss": config["x"]}, error=i == 1)
    state = json.loads(json.dumps(searcher.get_state()))
    fresh = make(mode="max", budget=10)
    fresh.set_state(state)
    assert fresh.observations() == searcher.observations()
    # The running trial ends after the restore.
    fresh.on_trial_complete("t5", {"loss": 1.5})
    assert fresh.observations()[-1][1] == -1.5
    assert isinstance(fresh.suggest("t6"), dict)
    with pytest.raises(ValueError, match="Not a state of ZOOptSearch"):
        fresh.set_state({"trials": [{"trial_id": 3}]})
    with pytest.raises(ValueError, match="Not a state of ZOOptSearch.*are not the parameters"):
        fresh.set_state({"trials": [{"trial_id": "a", "params": {"z": 1}, "loss": 1, "live": 0}]})
