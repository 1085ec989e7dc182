"""``SkOptSearch``, ``NevergradSearch`` and ``BayesOptSearch`` (Ray Tune 1.13's, on the real
scikit-optimize, nevergrad and bayesian-optimization libraries, the ``skopt``,
``nevergrad`` and ``bayesopt`` extras): optimising with ``tune.run``, converting corral's
search spaces, ``points_to_evaluate``, failed trials, errors and resuming from their JSON
state."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from typing import Any

import pytest

from corral import tune
from corral.tune import Trainable
from corral.tune.suggest import ConcurrencyLimiter, create_searcher


@dataclass
class Library:
    """One library's searcher, made alike for the shared tests."""

    name: str  # the extra's and create_searcher's name
    module: str  # the package's import name

    @property
    def cls(self) -> Any:
        pytest.importorskip(
            self.module,
            reason=f"the {self.name} extra is not installed (pip install 'corral[{self.name}]')",
        )
        if self.name == "skopt":
            from corral.tune.suggest.skopt import SkOptSearch

            return SkOptSearch
        if self.name == "nevergrad":
            from corral.tune.suggest.nevergrad import NevergradSearch

            return NevergradSearch
        from corral.tune.suggest.bayesopt import BayesOptSearch

        return BayesOptSearch

    def make(self, seed: int = 0, space: Any = None, **kwargs: Any) -> Any:
        """The searcher, seeded, over ``space`` (corral search spaces; None: tune.run's
        config, unseeded for skopt and nevergrad)."""
        cls = self.cls
        if self.name == "skopt":
            if space is not None:
                import skopt

                dims = cls.convert_search_space(space)
                optimizer = skopt.Optimizer(list(dims.values()), random_state=seed)
                return cls(optimizer, list(dims), **kwargs)
            return cls(**kwargs)
        if self.name == "nevergrad":
            import nevergrad as ng

            if space is not None:
                space = ng.p.Dict(**cls.convert_search_space(space))
                space.random_state.seed(seed)
            kwargs.setdefault("optimizer", ng.optimizers.NGOpt)
            kwargs.setdefault("optimizer_kwargs", {"budget": 30})
            return cls(space=space, **kwargs)
        kwargs.setdefault("random_search_steps", 5)
        return cls(space=space, random_state=seed, **kwargs)


LIBRARIES = [
    Library("skopt", "skopt"),
    Library("nevergrad", "nevergrad"),
    Library("bayesopt", "bayes_opt"),
]


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


# -- searching -----------------------------------------------------------------------


@pytest.mark.parametrize("seed", [0, 1])
def test_finds_a_better_point_of_a_quadratic_than_its_first_suggestions(tmp_path, lib, seed):
    searcher = lib.make(seed=seed, space=dict(SPACE), metric="loss", mode="min")
    analysis = _run(tmp_path, searcher, config={}, num_samples=20)
    losses = [t.last_result["loss"] for t in analysis.trials]
    assert len(losses) == 20
    # The first 5 are (mostly) random draws; the model's suggestions beat them clearly.
    assert min(losses[5:]) < min(losses[:5]) / 2
    assert min(losses) < 0.1
    assert [v for _, v in searcher.observations()] == pytest.approx(losses)


def test_by_name_and_over_tune_runs_config(tmp_path, lib):
    searcher = create_searcher(lib.name, metric="loss", mode="max", **_optimizer(lib))
    assert type(searcher) is lib.cls
    analysis = _run(tmp_path, searcher, config={**SPACE, "const": "kept", "n": {"z": 1}})
    assert len(analysis.trials) == 6
    for trial in analysis.trials:
        assert trial.config["const"] == "kept" and trial.config["n"] == {"z": 1}
        assert set(trial.evaluated_params) == {"x", "y"}
    # mode="max": the loss told is the metric negated.
    assert [v for _, v in searcher.observations()] == pytest.approx(
        [-t.last_result["loss"] for t in analysis.trials]
    )


def test_each_search_space_gives_the_values_it_should(lib):
    space = {
        "u": tune.uniform(-1, 2),
        "lu": tune.loguniform(1e-4, 1e-1),
        "ri": tune.randint(3, 6),
        "c": tune.choice(["a", "b", None]),
        "cl": tune.choice([[64, 64], {"k": 1}]),
        "nested": {"v": tune.uniform(0, 1)},
    }
    if lib.name == "bayesopt":
        for name in ("ri", "c"):
            with pytest.raises(ValueError, match=f"continuous parameters only .* not {name}="):
                lib.cls.convert_search_space({name: space[name]})
        assert lib.cls.convert_search_space({"u": space["u"], "n": space["nested"]}) == {
            "u": (-1.0, 2.0),
            "n/v": (0.0, 1.0),
        }
        return
    # (The corral space itself, not the library's space converted from it.)
    searcher = lib.cls(space=space, metric="loss", mode="min", **_optimizer(lib))
    configs = []
    for i in range(40):
        config = searcher.suggest(f"t{i}")
        searcher.on_trial_complete(f"t{i}", {"loss": config["u"]})
        configs.append(config)
    assert all(set(c) == {"u", "lu", "ri", "c", "cl", "nested"} for c in configs)
    assert all(type(c["u"]) is float and -1 <= c["u"] <= 2 for c in configs)
    assert all(1e-4 <= c["lu"] <= 1e-1 for c in configs)
    assert {c["ri"] for c in configs} <= {3, 4, 5} and len({c["ri"] for c in configs}) > 1
    assert all(type(c["ri"]) is int for c in configs)
    assert {c["c"] for c in configs} <= {"a", "b", None} and len({c["c"] for c in configs}) > 1
    # Categories that are not plain values come back as they are (a list stays a list).
    assert {json.dumps(c["cl"]) for c in configs} <= {"[64, 64]", '{"k": 1}'}
    assert all(0 <= c["nested"]["v"] <= 1 for c in configs)
    # The state is JSON.
    json.dumps(searcher.get_state())


class ThreeSteps(Trainable):
    """The quadratic plus the iteration. (A class: function trainables run one at a time.)"""

    def step(self):
        return {"loss": (self.config["x"] - 0.7) ** 2 + self.iteration}


def test_concurrency_limiter_around_them(tmp_path, lib):
    # (Nevergrad's optimizers take num_workers trials at once: 1 by default.)
    kwargs = (
        {"optimizer_kwargs": {"budget": 30, "num_workers": 2}} if lib.name == "nevergrad" else {}
    )
    searcher = lib.make(space={"x": SPACE["x"]}, metric="loss", mode="min", **kwargs)
    analysis = _run(
        tmp_path,
        ConcurrencyLimiter(searcher, max_concurrent=2),
        run=ThreeSteps,
        config={},
        num_samples=8,
        max_concurrent_trials=4,
        stop={"training_iteration": 3},
    )
    assert [t.status for t in analysis.trials] == ["TERMINATED"] * 8
    # Trials running together were suggested different points.
    assert len({t.config["x"] for t in analysis.trials}) == 8
    assert sorted(v for _, v in searcher.observations()) == pytest.approx(
        sorted(t.last_result["loss"] for t in analysis.trials)
    )


def test_points_to_evaluate_run_first(tmp_path, lib):
    points = [{"x": 0.5, "y": -0.5}, {"x": 0.7, "y": -0.4}]
    searcher = lib.make(space=dict(SPACE), metric="loss", mode="min", points_to_evaluate=points)
    analysis = _run(tmp_path, searcher, config={}, num_samples=4)
    for trial, point in zip(analysis.trials[:2], points):
        assert trial.config == pytest.approx(point)
    assert analysis.trials[1].last_result["loss"] == pytest.approx(0.0)
    with pytest.raises(ValueError, match=r"lacks y: give a value for every parameter"):
        lib.make(space=dict(SPACE), mode="min", points_to_evaluate=[{"x": 0.5}]).suggest("t0")
    with pytest.raises(ValueError, match=r"sets x=7, which x=\S+.* cannot give"):
        lib.make(space=dict(SPACE), mode="min", points_to_evaluate=[{"x": 7, "y": 0}]).suggest("t")


def test_skopt_evaluated_rewards_are_told_not_run(tmp_path):
    lib = LIBRARIES[0]
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
    assert searcher.observations()[:2] == [(points[0], 0.02), (points[1], 0.0)]
    assert len(searcher.observations()) == 5
    with pytest.raises(ValueError, match=r"one value per point of points_to_evaluate \(2\)"):
        lib.cls(space=dict(SPACE), points_to_evaluate=points, evaluated_rewards=[1.0])


# -- errors ------------------------------------------------------------------------


def test_errors_are_named(tmp_path, lib):
    name = lib.cls.__name__
    with pytest.raises(ValueError, match=rf"{name} needs a mode, 'min' or 'max'"):
        _run(tmp_path, lib.make(space=dict(SPACE), metric="loss"), config={})
    with pytest.raises(ValueError, match=r"tune.run\(mode='max'\) differs from .* 'min'"):
        _run(tmp_path, lib.make(space=dict(SPACE), metric="loss", mode="min"), mode="max")
    with pytest.raises(ValueError, match=r"optimises 'score', which trial \S+'s result lacks"):
        _run(tmp_path, lib.make(space=dict(SPACE), metric="score", mode="min"), config={})
    with pytest.raises(ValueError, match=rf"{name} has no search space"):
        _run(tmp_path, lib.make(metric="loss", mode="min"), config={"const": 1})
    with pytest.raises(TypeError, match=r"space=...\) takes a dict"):
        lib.make(space=None).__class__(space=5, **_optimizer(lib))
    with pytest.raises(ValueError, match="ConcurrencyLimiter"):
        lib.make(space=dict(SPACE), max_concurrent=2)
    cls = lib.cls
    monkey = pytest.MonkeyPatch()
    with monkey.context() as m:
        m.setitem(sys.modules, lib.module, None)
        with pytest.raises(
            ImportError, match=rf"needs {lib.module}.*pip install 'corral\[{lib.name}\]'"
        ):
            cls()


def _optimizer(lib: Library) -> dict[str, Any]:
    """The optimizer argument NevergradSearch needs (none for the others)."""
    if lib.name == "nevergrad":
        import nevergrad as ng

        return {"optimizer": ng.optimizers.OnePlusOne}
    return {}


def test_library_options_are_checked(lib):
    if lib.name == "skopt":
        import skopt

        with pytest.raises(ValueError, match="names the dimensions of an optimizer"):
            lib.cls(space=["x"])
        with pytest.raises(ValueError, match=r"must name each of the optimizer's 2 dimensions"):
            lib.cls(skopt.Optimizer([(0.0, 1.0), (0.0, 1.0)]), ["x"])
        with pytest.raises(ValueError, match=r"convert_to_python=False\) is not built"):
            lib.cls(convert_to_python=False)
    elif lib.name == "nevergrad":
        import nevergrad as ng

        with pytest.raises(ValueError, match="takes a Nevergrad optimizer"):
            lib.cls()
        made = ng.optimizers.OnePlusOne(parametrization=ng.p.Dict(x=ng.p.Scalar()))
        with pytest.raises(ValueError, match="already made has its search space"):
            lib.cls(made, space={"x": ng.p.Scalar()})
        with pytest.raises(TypeError, match="unexpected arguments: seed"):
            lib.cls(ng.optimizers.OnePlusOne, seed=1)
    else:
        with pytest.raises(ValueError, match="patience must be an int >= 1"):
            lib.cls(patience=0)
        with pytest.raises(ValueError, match="kind must be 'ucb', 'ei' or 'poi'"):
            lib.cls(utility_kwargs={"kind": "best"})
        with pytest.raises(TypeError, match=r"maps names to \(low, high\) bounds"):
            lib.cls(space={"x": (1, 0)})


def test_failed_trials_are_not_told(lib):
    kwargs = (
        {"optimizer_kwargs": {"budget": 30, "num_workers": 4}} if lib.name == "nevergrad" else {}
    )
    searcher = lib.make(space=dict(SPACE), metric="loss", mode="min", **kwargs)
    for i in range(4):
        searcher.suggest(f"t{i}")
    searcher.on_trial_complete("t0", {"loss": 1.0})
    searcher.on_trial_complete("t1", None, error=True)
    searcher.on_trial_complete("t2", {"loss": float("nan")})
    searcher.on_trial_complete("t3", {"loss": 2.0})
    assert [v for _, v in searcher.observations()] == [1.0, None, None, 2.0]


def test_bayesopt_random_steps_wait_for_their_results():
    lib = LIBRARIES[2]
    searcher = lib.make(space=dict(SPACE), metric="loss", mode="min", random_search_steps=3)
    assert all(searcher.suggest(f"t{i}") is not None for i in range(3))
    assert searcher.suggest("t3") is None  # the 3 random steps run: wait
    for i in range(3):
        searcher.on_trial_complete(f"t{i}", {"loss": float(i)})
    assert len(searcher._opt.space) == 3  # registered once all had ended
    assert searcher.suggest("t3") is not None


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


def interrupted_and_resumed(tmp_path, monkeypatch, make_searcher, num_samples):
    """`num_samples` trials of `Quadratic` run once whole (the reference) and once
    interrupted at the 7th trial and resumed (`resume=True`), each with a searcher of
    `make_searcher()`; checks the saved state and that the resumed run ends every trial
    and repeats the reference's first 7 configs. Returns (the resumed searcher, the
    reference's analysis, the resumed one's, the resumed configs)."""
    monkeypatch.setattr(Quadratic, "steps", 0)
    monkeypatch.setattr(Quadratic, "interrupt_at", None)

    def run(name, **kwargs):
        searcher = make_searcher()
        return searcher, _run(
            tmp_path, searcher, name, run=Quadratic, config={}, num_samples=num_samples, **kwargs
        )

    _, reference = run("reference")
    Quadratic.steps, Quadratic.interrupt_at = 0, 7
    with pytest.raises(KeyboardInterrupt):
        run("interrupted")
    saved = json.loads((tmp_path / "interrupted" / "searcher-state-default.json").read_text())
    assert len(saved["trials"]) == 7 and saved["trials"][-1]["live"]  # 6 ended, the 7th runs

    Quadratic.interrupt_at = None
    searcher, resumed = run("interrupted", resume=True)
    configs = [t.config for t in resumed.trials]
    assert len(configs) == num_samples
    assert [t.status for t in resumed.trials] == ["TERMINATED"] * num_samples
    assert configs[:7] == [t.config for t in reference.trials[:7]]
    return searcher, reference, resumed, configs


def test_resume_goes_on_with_the_observations_restored(tmp_path, lib, monkeypatch):
    searcher, _, resumed, configs = interrupted_and_resumed(
        tmp_path,
        monkeypatch,
        lambda: lib.make(seed=3, space=dict(SPACE), metric="loss", mode="min"),
        num_samples=10,
    )
    # The library heard of all 10: the 6 restored, the 7th run again, 3 new ones.
    observed = searcher.observations()
    assert [v for _, v in observed] == pytest.approx(
        [t.last_result["loss"] for t in resumed.trials]
    )
    assert [p["x"] for p, _ in observed] == pytest.approx([c["x"] for c in configs])


def test_nevergrad_suggests_as_many_at_once_as_its_workers():
    lib = LIBRARIES[1]
    searcher = lib.make(space=dict(SPACE), metric="loss", mode="min")
    assert searcher.suggest("t0") is not None
    assert searcher.suggest("t1") is None  # (num_workers=1: wait for t0)
    searcher.on_trial_complete("t0", {"loss": 1.0})
    assert searcher.suggest("t1") is not None


def test_state_is_json_and_replays(lib):
    searcher = lib.make(space=dict(SPACE), metric="loss", mode="max")
    for i in range(5):
        config = searcher.suggest(f"t{i}")
        if i < 4:
            searcher.on_trial_complete(f"t{i}", {"loss": config["x"]}, error=i == 1)
    state = json.loads(json.dumps(searcher.get_state()))
    fresh = lib.make(space=dict(SPACE), metric="loss", mode="max")
    fresh.set_state(state)
    assert fresh.observations() == searcher.observations()
    # The running trial ends after the restore.
    fresh.on_trial_complete("t4", {"loss": 1.5})
    assert fresh.observations()[-1][1] == -1.5
    assert fresh.suggest("t5") is not None
    name = lib.cls.__name__
    with pytest.raises(ValueError, match=f"Not a state of {name}"):
        fresh.set_state({"trials": [{"trial_id": 3}]})
    with pytest.raises(ValueError, match=f"Not a state of {name}.*are not the parameters"):
        fresh.set_state({"trials": [{"trial_id": "a", "params": {"z": 1}, "loss": 1, "live": 0}]})
