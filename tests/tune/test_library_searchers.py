"""``OptunaSearch`` and ``HyperOptSearch`` (Ray Tune 1.13's, on the real optuna and
hyperopt libraries, the ``optuna`` and ``hyperopt`` extras): converting corral's search
spaces, searching with ``tune.run``, ``ConcurrencyLimiter``, ``points_to_evaluate``,
errors, failed trials and resuming with the observations restored."""

from __future__ import annotations

import json
import logging
import statistics
import sys
import warnings
from dataclasses import dataclass
from typing import Any

import pytest

from corral import tune
from corral.tune import Trainable
from corral.tune.suggest import BasicVariantGenerator, ConcurrencyLimiter, create_searcher


@dataclass
class Library:
    """One library's searcher, made alike for the shared tests."""

    name: str

    @property
    def cls(self) -> Any:
        module = pytest.importorskip(
            self.name,
            reason=f"the {self.name} extra is not installed (pip install 'corral[{self.name}]')",
        )
        if self.name == "optuna":
            module.logging.set_verbosity(module.logging.WARNING)
            from corral.tune.suggest.optuna import OptunaSearch

            return OptunaSearch
        from corral.tune.suggest.hyperopt import HyperOptSearch

        return HyperOptSearch

    def make(self, seed: int = 0, n_initial: int = 10, **kwargs: Any) -> Any:
        """The searcher, seeded, drawing ``n_initial`` trials at random before modelling."""
        cls = self.cls
        if self.name == "optuna":
            import optuna

            if "sampler" not in kwargs:
                kwargs["sampler"] = optuna.samplers.TPESampler(
                    n_startup_trials=n_initial, seed=seed
                )
            return cls(**kwargs)
        return cls(n_initial_points=n_initial, random_state_seed=seed, **kwargs)

    def observations(self, searcher: Any) -> list[tuple[dict, float | None]]:
        """What the library was told, in order: each trial's parameters and its metric
        (None: failed or pruned); running trials left out."""
        if self.name == "optuna":
            return [
                (t.params, t.value if t.state.name == "COMPLETE" else None)
                for t in searcher._study.get_trials(deepcopy=False)
                if t.state.name != "RUNNING"
            ]
        import hyperopt

        done = {
            d["tid"]: d["result"]["loss"]
            for d in searcher._trials.trials
            if d["state"] == hyperopt.JOB_STATE_DONE
        }
        return [
            ({k: v[0] for k, v in searcher._vals[t].items()}, done.get(searcher._tids[t]))
            for t in searcher._vals
            if t not in searcher._live
        ]


LIBRARIES = [Library("optuna"), Library("hyperopt")]


@pytest.fixture(params=LIBRARIES, ids=lambda lib: lib.name)
def lib(request):
    request.param.cls  # noqa: B018 (skips when the extra is missing)
    return request.param


def quadratic(config):
    tune.report(loss=(config["x"] - 0.7) ** 2 + (config["y"] + 0.4) ** 2)


SPACE = {"x": tune.uniform(-3, 3), "y": tune.uniform(-3, 3)}


def _run(tmp_path, search_alg, name="exp", **kwargs):
    options = {
        "config": SPACE,
        "num_samples": 6,
        "stop": {"training_iteration": 1},
        "local_dir": str(tmp_path),
        "name": name,
        "verbose": 0,
        **kwargs,
    }
    return tune.run(options.pop("run", quadratic), search_alg=search_alg, **options)


# -- search spaces -----------------------------------------------------------------


def test_optuna_converts_each_search_space():
    optuna = pytest.importorskip("optuna", reason="the optuna extra is not installed")
    from corral.tune.suggest.optuna import OptunaSearch

    d = optuna.distributions
    space = OptunaSearch.convert_search_space(
        {
            "u": tune.uniform(-1, 2),
            "lu": tune.loguniform(1e-4, 1e-1),
            "ri": tune.randint(3, 6),
            "c": tune.choice(["a", None, 2]),
            "cl": tune.choice([[64, 64], {"k": 1}]),
            "nested": {"v": tune.uniform(0, 1), "const": 5},
            "const": "kept out",
        }
    )
    assert space == {
        "u": d.FloatDistribution(-1, 2),
        "lu": d.FloatDistribution(1e-4, 1e-1, log=True),
        "ri": d.IntDistribution(3, 5),  # (randint excludes its upper bound)
        "c": d.CategoricalDistribution(["a", None, 2]),
        "cl": d.CategoricalDistribution([0, 1]),  # (not plain values: their indices)
        "nested/v": d.FloatDistribution(0, 1),
    }


def test_hyperopt_converts_each_search_space():
    hyperopt = pytest.importorskip("hyperopt", reason="the hyperopt extra is not installed")
    from corral.tune.suggest.hyperopt import HyperOptSearch

    space = HyperOptSearch.convert_search_space(
        {"u": tune.uniform(-1, 2), "ri": tune.randint(3, 6), "n": {"c": tune.choice(["a", 1])}}
    )
    assert sorted(space) == ["n/c", "ri", "u"]
    assert sorted(hyperopt.Domain(lambda c: c, space).params) == ["n/c", "ri", "u"]
    draws = [hyperopt.pyll.stochastic.sample(space) for _ in range(200)]
    assert all(-1 <= d["u"] <= 2 for d in draws)
    assert {d["n/c"] for d in draws} == {"a", 1}
    # randint(3, 6): 3, 4 and 5 alike (rounded from [2.5, 5.5)).
    assert {round(d["ri"]) for d in draws} == {3, 4, 5}


def test_each_search_space_gives_the_values_it_should(lib):
    space = {
        "u": tune.uniform(-1, 2),
        "lu": tune.loguniform(1e-4, 1e-1),
        "ri": tune.randint(3, 6),
        "c": tune.choice(["a", "b", None]),
        "cl": tune.choice([[64, 64], {"k": 1}]),
        "nested": {"v": tune.uniform(0, 1)},
    }
    searcher = lib.make(space=space, metric="loss", mode="min", n_initial=100)
    configs = []
    for i in range(60):
        config = searcher.suggest(f"t{i}")
        searcher.on_trial_complete(f"t{i}", {"loss": config["u"]})
        configs.append(config)
    assert all(set(c) == {"u", "lu", "ri", "c", "cl", "nested"} for c in configs)
    assert all(type(c["u"]) is float and -1 <= c["u"] <= 2 for c in configs)
    lus = [c["lu"] for c in configs]
    assert all(1e-4 <= v <= 1e-1 for v in lus) and min(lus) < 1e-3 and max(lus) > 1e-2
    assert {c["ri"] for c in configs} == {3, 4, 5}
    assert all(type(c["ri"]) is int for c in configs)
    assert {c["c"] for c in configs} == {"a", "b", None}
    # Categories that are not plain values come back as they are (a list stays a list).
    assert {json.dumps(c["cl"]) for c in configs} == {"[64, 64]", '{"k": 1}'}
    assert all(0 <= c["nested"]["v"] <= 1 for c in configs)


@pytest.mark.parametrize(
    "config, match",
    [
        ({"x": tune.grid_search([1, 2])}, r"cannot search grid_search values \(x\)"),
        ({"x": tune.sample_from(lambda spec: 1)}, r"cannot search x=sample_from"),
        ({"x": [tune.uniform(0, 1)]}, r"search spaces inside the list at x"),
    ],
)
def test_what_cannot_be_converted_is_named(lib, config, match):
    with pytest.raises(ValueError, match=match):
        lib.cls.convert_search_space(config)


# -- searching -----------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1])
def test_finds_a_better_region_of_a_quadratic_than_random_search(tmp_path, lib, seed):
    def losses(search_alg, name):
        analysis = _run(tmp_path, search_alg, name, num_samples=30, metric="loss", mode="min")
        return [t.last_result["loss"] for t in analysis.trials]

    random = losses(BasicVariantGenerator(random_state=seed), "random")
    searched = losses(lib.make(seed=seed, n_initial=10), lib.name)
    # The best of 30 trials, and the typical trial once the model steers (the last 10).
    assert min(searched) < min(random)
    assert statistics.median(searched[-10:]) < statistics.median(random[-10:])
    assert min(searched) < 0.45


def test_by_name_and_over_tune_runs_config(tmp_path, lib):
    searcher = create_searcher(lib.name, metric="loss", mode="min")
    assert type(searcher) is lib.cls
    analysis = _run(tmp_path, searcher, config={**SPACE, "const": "kept", "n": {"z": 1}})
    assert len(analysis.trials) == 6
    for trial in analysis.trials:
        assert trial.config["const"] == "kept" and trial.config["n"] == {"z": 1}
        assert set(trial.evaluated_params) == {"x", "y"}
    assert [v for _, v in lib.observations(searcher)] == pytest.approx(
        [t.last_result["loss"] for t in analysis.trials]
    )


class Live(tune.Callback):
    def __init__(self):
        self.running = []

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self.running.append(sum(t.status == "RUNNING" for t in trials))


class ThreeSteps(Trainable):
    """The quadratic plus the iteration. (A class: function trainables run one at a time.)"""

    def step(self):
        return {"loss": (self.config["x"] - 0.7) ** 2 + self.iteration}


def test_concurrency_limiter_around_them(tmp_path, lib):
    live = Live()
    searcher = lib.make(metric="loss", mode="min", n_initial=3)
    analysis = _run(
        tmp_path,
        ConcurrencyLimiter(searcher, max_concurrent=2),
        run=ThreeSteps,
        num_samples=8,
        max_concurrent_trials=4,
        stop={"training_iteration": 3},
        callbacks=[live],
    )
    assert max(live.running) == 2
    assert [t.status for t in analysis.trials] == ["TERMINATED"] * 8
    # Every trial was told, with its last result.
    observed = lib.observations(searcher)
    assert len(observed) == 8 and all(v is not None for _, v in observed)
    assert sorted(v for _, v in observed) == pytest.approx(
        sorted(t.last_result["loss"] for t in analysis.trials)
    )


def test_points_to_evaluate_run_first(tmp_path, lib):
    points = [{"x": 0.5, "y": -0.5}, {"x": 0.7, "y": -0.4}]
    searcher = lib.make(metric="loss", mode="min", points_to_evaluate=points)
    analysis = _run(tmp_path, searcher, num_samples=4)
    assert [t.config for t in analysis.trials[:2]] == points
    assert analysis.trials[1].last_result["loss"] == 0.0
    assert lib.observations(searcher)[1] == ({"x": 0.7, "y": -0.4}, 0.0)


def test_points_to_evaluate_are_checked(lib):
    def make(points):
        searcher = lib.make(space=dict(SPACE), metric="loss", mode="min", points_to_evaluate=points)
        return searcher.suggest("t0")

    with pytest.raises(ValueError, match=r"sets z, which the search space lacks"):
        make([{"x": 0.5, "y": 0.5, "z": 1}])
    with pytest.raises(ValueError, match=r"sets x=7, which x=uniform\(-3.0, 3.0\) cannot give"):
        make([{"x": 7, "y": 0.5}])
    with pytest.raises(TypeError, match="takes a list of configs"):
        make({"x": 1})
    if lib.name == "hyperopt":
        with pytest.raises(ValueError, match=r"lacks y: give a value for every parameter"):
            make([{"x": 0.5}])
    else:  # Optuna draws what a point leaves out.
        assert make([{"x": 0.5}])["x"] == 0.5


def test_optuna_evaluated_rewards_are_told_not_run(tmp_path):
    pytest.importorskip("optuna", reason="the optuna extra is not installed")
    lib = Library("optuna")
    points = [{"x": 0.5, "y": -0.5}, {"x": 0.7, "y": -0.4}]
    searcher = lib.make(
        space=dict(SPACE),
        metric="loss",
        mode="min",
        points_to_evaluate=points,
        evaluated_rewards=[0.02, 0.0],
    )
    analysis = _run(tmp_path, searcher, config={}, num_samples=3)
    assert all(t.config not in points for t in analysis.trials)
    assert lib.observations(searcher)[:2] == [(points[0], 0.02), (points[1], 0.0)]
    assert len(lib.observations(searcher)) == 5
    with pytest.raises(ValueError, match=r"one value per point of points_to_evaluate \(2\)"):
        lib.make(space=dict(SPACE), points_to_evaluate=points, evaluated_rewards=[1.0])


def test_define_by_run_space(tmp_path):
    pytest.importorskip("optuna", reason="the optuna extra is not installed")
    lib = Library("optuna")

    def space(trial):
        trial.suggest_float("x", -3, 3)
        if trial.suggest_categorical("wide", [True, False]):
            trial.suggest_float("y", -3, 3)
        return {"y": 0.0} if "y" not in trial.params else None

    searcher = lib.make(space=space, metric="loss", mode="min")
    analysis = _run(tmp_path, searcher, config={}, num_samples=6)
    assert all({"x", "y", "wide"} == set(t.config) for t in analysis.trials)
    assert any(not t.config["wide"] and t.config["y"] == 0.0 for t in analysis.trials)


# -- errors ------------------------------------------------------------------------


def test_metric_and_mode_errors_are_named(tmp_path, lib):
    with pytest.raises(ValueError, match=rf"{lib.cls.__name__} needs a mode, 'min' or 'max'"):
        _run(tmp_path, lib.make(metric="loss"))
    with pytest.raises(ValueError, match="mode must be 'min', 'max' or None, got 'best'"):
        lib.make(metric="loss", mode="best")
    with pytest.raises(ValueError, match=r"tune.run\(metric='score'\) differs from .* 'loss'"):
        _run(tmp_path, lib.make(metric="loss", mode="min"), metric="score")
    with pytest.raises(ValueError, match=r"tune.run\(mode='max'\) differs from .* 'min'"):
        _run(tmp_path, lib.make(metric="loss", mode="min"), mode="max")
    with pytest.raises(ValueError, match=r"optimises 'score', which trial \S+'s result lacks"):
        _run(tmp_path, lib.make(metric="score", mode="min"))
    with pytest.raises(NotImplementedError, match="multi-objective search"):
        lib.make(metric=["a", "b"], mode=["min", "max"])
    if lib.name == "hyperopt":
        with pytest.raises(ValueError, match="ConcurrencyLimiter"):
            lib.cls(metric="loss", mode="min", max_concurrent=2)
    # Used directly, without tune.run.
    with pytest.raises(RuntimeError, match="needs a mode"):
        lib.make(space=dict(SPACE)).suggest("t0")
    # tune.run's metric and mode serve where it has none.
    analysis = _run(tmp_path, lib.make(), metric="loss", mode="max", num_samples=2)
    assert len(analysis.trials) == 2


def test_without_a_metric_it_optimises_the_returned_number(tmp_path, lib):
    def returns(config):
        return (config["x"] - 0.7) ** 2

    searcher = lib.make(mode="min")
    analysis = _run(tmp_path, searcher, run=returns, num_samples=3, stop=None)
    assert searcher.metric == "_metric"
    assert [v for _, v in lib.observations(searcher)] == pytest.approx(
        [t.last_result["_metric"] for t in analysis.trials]
    )


def test_search_space_errors(tmp_path, lib):
    name = lib.cls.__name__
    with pytest.raises(ValueError, match=rf"{name} has no search space"):
        _run(tmp_path, lib.make(metric="loss", mode="min"), config={"const": 1})
    with pytest.raises(ValueError, match="does not take them"):
        _run(tmp_path, lib.make(space=dict(SPACE), metric="loss", mode="min"))
    with pytest.raises(TypeError, match="holds other values than corral search spaces"):
        lib.make(space={**SPACE, "const": 1})
    with pytest.raises(TypeError, match=r"space=...\) takes a dict"):
        lib.make(space=[1, 2])


def test_library_options_are_checked(lib):
    if lib.name == "optuna":
        import optuna

        with pytest.raises(ValueError, match="seed the sampler you pass itself"):
            lib.cls(sampler=optuna.samplers.RandomSampler(), seed=1)
        with pytest.raises(TypeError, match="takes an optuna.samplers.BaseSampler"):
            lib.cls(sampler="tpe")
    else:
        with pytest.raises(ValueError, match="gamma must be a number in"):
            lib.cls(gamma=2)
        with pytest.raises(ValueError, match="n_initial_points must be an int >= 0"):
            lib.cls(n_initial_points=-1)


def test_a_missing_extra_says_how_to_install_it(monkeypatch, lib):
    cls = lib.cls
    monkeypatch.setitem(sys.modules, lib.name, None)
    with pytest.raises(ImportError, match=rf"needs {lib.name}.*pip install 'corral\[{lib.name}\]'"):
        cls()


# -- failed trials -------------------------------------------------------------------


def test_failed_trials_are_told_as_failed(tmp_path, lib, caplog):
    def fails_right(config):
        if config["x"] > 0:
            raise RuntimeError("boom")
        loss = float("nan") if config["y"] > 2 else (config["x"] - 0.7) ** 2
        tune.report(loss=loss)

    searcher = lib.make(metric="loss", mode="min", n_initial=20)
    analysis = _run(
        tmp_path,
        searcher,
        run=fails_right,
        num_samples=12,
        raise_on_failed_trial=False,
        max_failures=0,
        config={"x": tune.uniform(-3, 3), "y": tune.uniform(-3, 3)},
    )
    failed = {t.trial_id for t in analysis.trials if t.status == "ERROR"}
    assert failed and len(failed) < 12
    observed = dict(zip([t.trial_id for t in analysis.trials], lib.observations(searcher)))
    for trial in analysis.trials:
        value = observed[trial.trial_id][1]
        if trial.status == "ERROR" or trial.config["y"] > 2:
            assert value is None
        else:
            assert value == pytest.approx(trial.last_result["loss"])
    if any(t.config["y"] > 2 for t in analysis.trials if t.status != "ERROR"):
        assert "not a finite number: it counts as failed" in caplog.text


# -- resume --------------------------------------------------------------------------


class Quadratic(Trainable):
    """The quadratic as a class; its `interrupt_at`-th step of the run raises
    KeyboardInterrupt (a Ctrl-C)."""

    interrupt_at: int | None = None
    steps = 0

    def step(self):
        Quadratic.steps += 1
        if Quadratic.steps == Quadratic.interrupt_at:
            raise KeyboardInterrupt
        return {"loss": (self.config["x"] - 0.7) ** 2 + (self.config["y"] + 0.4) ** 2}


def test_resume_goes_on_with_the_observations_restored(tmp_path, lib, monkeypatch):
    monkeypatch.setattr(Quadratic, "steps", 0)
    monkeypatch.setattr(Quadratic, "interrupt_at", None)

    def run(name, **kwargs):
        if lib.name == "optuna":
            # Its own TPESampler (seeded, 10 random trials first): resumed while it still
            # draws at random.
            searcher = lib.cls(seed=3, metric="loss", mode="min")
        else:  # resumed in TPE's turn
            searcher = lib.make(seed=3, n_initial=4, metric="loss", mode="min")
        return searcher, _run(tmp_path, searcher, name, run=Quadratic, num_samples=12, **kwargs)

    _, reference = run("reference")
    Quadratic.steps, Quadratic.interrupt_at = 0, 7
    with pytest.raises(KeyboardInterrupt):
        run("interrupted")
    saved = json.loads((tmp_path / "interrupted" / "searcher-state-default.json").read_text())
    assert len(saved["trials"]) == 7  # 6 ended, the 7th running

    Quadratic.interrupt_at = None
    searcher, resumed = run("interrupted", resume=True)
    configs = [t.config for t in resumed.trials]
    assert len(configs) == 12 and [t.status for t in resumed.trials] == ["TERMINATED"] * 12
    assert configs[:7] == [t.config for t in reference.trials[:7]]
    # The library heard of all 12: the 6 restored, the 7th run again, 5 new ones.
    observed = lib.observations(searcher)
    assert [v for _, v in observed] == pytest.approx(
        [t.last_result["loss"] for t in resumed.trials]
    )
    assert [p["x"] for p, _ in observed] == pytest.approx([c["x"] for c in configs])
    # Its random state came back too: the search is the one without the interruption.
    assert configs == [t.config for t in reference.trials]


def test_state_is_json_and_replays(lib):
    searcher = lib.make(space=dict(SPACE), metric="loss", mode="max", n_initial=2)
    for i in range(5):
        config = searcher.suggest(f"t{i}")
        if i < 4:
            searcher.on_trial_complete(f"t{i}", {"loss": config["x"]}, error=i == 1)
    state = json.loads(json.dumps(searcher.get_state()))
    fresh = lib.make(space=dict(SPACE), metric="loss", mode="max", n_initial=2)
    fresh.set_state(state)
    assert lib.observations(fresh) == lib.observations(searcher)
    # The running trial ends after the restore.
    fresh.on_trial_complete("t4", {"loss": 1.5})
    assert lib.observations(fresh)[-1][1] == (1.5 if lib.name == "optuna" else -1.5)
    with pytest.raises(ValueError, match=f"Not a state of {lib.cls.__name__}"):
        fresh.set_state({"trials": [{"trial_id": 3}]})


def _optuna_run(searcher: Any, start: int, count: int) -> list[dict]:
    configs = []
    for i in range(start, start + count):
        config = searcher.suggest(f"t{i}")
        searcher.on_trial_complete(f"t{i}", {"loss": (config["x"] - 0.3) ** 2})
        configs.append(config)
    return configs


@pytest.mark.parametrize("sampler", ["RandomSampler", "TPESampler"])
def test_optuna_restores_the_random_state_of_a_sampler_of_ones_own(sampler):
    """A sampler the user passes comes back with its random generators (JSON): the
    restored search suggests what the uninterrupted one does, not the seed's first draws
    again."""
    optuna = pytest.importorskip("optuna")
    from corral.tune.suggest.optuna import OptunaSearch

    def make() -> OptunaSearch:
        kwargs = {"n_startup_trials": 3} if sampler == "TPESampler" else {}
        own = getattr(optuna.samplers, sampler)(seed=11, **kwargs)
        return OptunaSearch(space=dict(SPACE), metric="loss", mode="min", sampler=own)

    searcher = make()
    _optuna_run(searcher, 0, 4)
    state = json.loads(json.dumps(searcher.get_state()))
    uninterrupted = _optuna_run(searcher, 4, 4)
    restored = make()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # nothing to warn of: its whole state came back
        restored.set_state(state)
    assert _optuna_run(restored, 4, 4) == uninterrupted


def test_optuna_says_when_a_samplers_state_cannot_come_back():
    optuna = pytest.importorskip("optuna")
    from corral.tune.suggest.optuna import OptunaSearch

    def make(sampler: Any) -> OptunaSearch:
        return OptunaSearch(space=dict(SPACE), metric="loss", mode="min", sampler=sampler)

    searcher = make(optuna.samplers.NSGAIISampler(seed=1))
    _optuna_run(searcher, 0, 2)
    state = json.loads(json.dumps(searcher.get_state()))
    # Its generators come back, the state it keeps in the trials' attributes does not.
    with pytest.warns(UserWarning, match="NSGAIISampler's random generators are restored, but"):
        make(optuna.samplers.NSGAIISampler(seed=1)).set_state(state)
    with pytest.warns(UserWarning, match="the resuming call passes a .*RandomSampler"):
        make(optuna.samplers.RandomSampler(seed=1)).set_state(state)


def test_hyperopt_leaves_its_logger_alone_when_configured():
    pytest.importorskip("hyperopt", reason="the hyperopt extra is not installed")
    from corral.tune.suggest.hyperopt import HyperOptSearch

    hyperopt_logger = logging.getLogger("hyperopt")
    level = hyperopt_logger.level
    try:
        hyperopt_logger.setLevel(logging.DEBUG)
        HyperOptSearch()
        assert hyperopt_logger.level == logging.DEBUG
    finally:
        hyperopt_logger.setLevel(level)
