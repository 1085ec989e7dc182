"""Ray Tune 1.13's search algorithms under ``tune.run(search_alg=...)``: a ``Searcher`` of
one's own, ``ConcurrencyLimiter``, ``Repeater``, ``BasicVariantGenerator`` (the default),
resuming a searched run, and their errors."""

from __future__ import annotations

import json
import os
import random

import pytest

from corral import tune
from corral.tune import Trainable
from corral.tune.experiment_state import STATE_FILE
from corral.tune.suggest import (
    BasicVariantGenerator,
    ConcurrencyLimiter,
    Repeater,
    Searcher,
    SearchGenerator,
    create_searcher,
)
from corral.tune.suggest.repeater import TRIAL_INDEX
from corral.tune.suggest.variant_generator import config_variants


class Scored(Trainable):
    """Adds `lr` (plus `__trial_index__` when set) to its score each iteration. While
    `Scored.interrupt_at` is set, the step that would reach that (lr, iteration) raises
    KeyboardInterrupt (a Ctrl-C of the run)."""

    interrupt_at: tuple | None = None
    built: list = []

    def setup(self, config):
        Scored.built.append(config["lr"])
        self.score = 0.0

    def step(self):
        if Scored.interrupt_at == (self.config["lr"], self.iteration + 1):
            raise KeyboardInterrupt
        self.score += self.config["lr"] + self.config.get(TRIAL_INDEX, 0)
        return {"score": self.score}

    def save_checkpoint(self, checkpoint_dir):
        return {"score": self.score}

    def load_checkpoint(self, checkpoint):
        self.score = checkpoint["score"]


@pytest.fixture(autouse=True)
def _reset(monkeypatch):
    monkeypatch.setattr(Scored, "interrupt_at", None)
    monkeypatch.setattr(Scored, "built", [])


class Doubling(Searcher):
    """Suggests lr=1, then twice the lr of the best trial so far; records every call."""

    def __init__(self, limit=None, **kwargs):
        super().__init__(**kwargs)
        self.limit = limit  # answer FINISHED after this many suggestions
        self.events = []
        self.lrs = {}
        self.scores = {}

    def suggest(self, trial_id):
        if self.limit is not None and len(self.lrs) >= self.limit:
            return Searcher.FINISHED
        best = max(self.scores, key=self.scores.get, default=None)
        lr = 1.0 if best is None else 2 * self.lrs[best]
        self.lrs[trial_id] = lr
        self.events.append(("suggest", trial_id, lr))
        return {"lr": lr}

    def on_trial_result(self, trial_id, result):
        self.events.append(("result", trial_id, result["training_iteration"]))

    def on_trial_complete(self, trial_id, result=None, error=False):
        self.events.append(("complete", trial_id, result and result["score"], error))
        if result is not None:
            self.scores[trial_id] = result[self.metric]

    def get_state(self):
        return {"lrs": self.lrs, "scores": self.scores}

    def set_state(self, state):
        self.lrs, self.scores = state["lrs"], state["scores"]


def _run(tmp_path, search_alg=None, **kwargs):
    options = {
        "config": {"const": "kept"},
        "stop": {"training_iteration": 2},
        "local_dir": str(tmp_path),
        "name": "exp",
        "verbose": 0,
        **kwargs,
    }
    return tune.run(Scored, search_alg=search_alg, **options)


def test_a_searcher_suggests_each_trial_and_hears_its_results(tmp_path):
    searcher = Doubling(metric="score", mode="max")
    analysis = _run(tmp_path, searcher, num_samples=3)
    first, second, third = analysis.trials
    # Each trial's config is the suggestion put over tune.run's config; each suggestion
    # came after the trial before had ended (one trial at a time), and saw its result.
    assert [t.config for t in analysis.trials] == [
        {"const": "kept", "lr": 1.0},
        {"const": "kept", "lr": 2.0},
        {"const": "kept", "lr": 4.0},
    ]
    assert searcher.events == [
        ("suggest", first.trial_id, 1.0),
        ("result", first.trial_id, 1),  # (the stopping result goes to on_trial_complete)
        ("complete", first.trial_id, 2.0, False),
        ("suggest", second.trial_id, 2.0),
        ("result", second.trial_id, 1),
        ("complete", second.trial_id, 4.0, False),
        ("suggest", third.trial_id, 4.0),
        ("result", third.trial_id, 1),
        ("complete", third.trial_id, 8.0, False),
    ]
    assert [t.evaluated_params for t in analysis.trials] == [{"lr": 1.0}, {"lr": 2.0}, {"lr": 4.0}]
    assert [t.experiment_tag for t in analysis.trials] == ["1_lr=1.0", "2_lr=2.0", "3_lr=4.0"]
    assert all(t.status == "TERMINATED" for t in analysis.trials)
    assert analysis.get_best_trial("score", "max") is third


def test_finished_ends_the_search_and_num_samples_caps_it(tmp_path):
    searcher = Doubling(limit=2, metric="score", mode="max")
    analysis = _run(tmp_path / "a", searcher, num_samples=10)
    assert [t.config["lr"] for t in analysis.trials] == [1.0, 2.0]
    analysis = _run(tmp_path / "b", Doubling(metric="score", mode="max"), num_samples=2)
    assert len(analysis.trials) == 2


def test_a_failed_trial_is_reported_as_an_error(tmp_path):
    class Fails(Scored):
        def step(self):
            if self.config["lr"] == 2.0:
                raise RuntimeError("boom")
            return super().step()

    searcher = Doubling(metric="score", mode="max")
    analysis = tune.run(
        Fails,
        search_alg=searcher,
        num_samples=3,
        stop={"training_iteration": 1},
        raise_on_failed_trial=False,
        local_dir=str(tmp_path),
        verbose=0,
    )
    # (Without a score for the failed trial, the searcher suggests its lr again.)
    assert [t.status for t in analysis.trials] == ["TERMINATED", "ERROR", "ERROR"]
    assert [t.config["lr"] for t in analysis.trials] == [1.0, 2.0, 2.0]
    assert ("complete", analysis.trials[1].trial_id, None, True) in searcher.events


class Live(tune.Callback):
    """Records how many trials were running at each result."""

    def __init__(self):
        self.running = []

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self.running.append(sum(t.status == "RUNNING" for t in trials))


class Always(Searcher):
    """Suggests lr = 1, 2, 3, ...; records the completions it hears of, in order."""

    def __init__(self):
        super().__init__(metric="score", mode="max")
        self.count = 0
        self.completed = []

    def suggest(self, trial_id):
        self.count += 1
        return {"lr": float(self.count)}

    def on_trial_complete(self, trial_id, result=None, error=False):
        self.completed.append(trial_id)


def test_concurrency_limiter_limits_the_live_trials(tmp_path):
    live = Live()
    searcher = Always()
    analysis = _run(
        tmp_path / "limited",
        ConcurrencyLimiter(searcher, max_concurrent=2),
        num_samples=5,
        max_concurrent_trials=4,
        callbacks=[live],
    )
    assert len(analysis.trials) == 5
    assert max(live.running) == 2
    # Without it, the same run has 4 trials live at once.
    unlimited = Live()
    _run(tmp_path / "free", Always(), num_samples=5, max_concurrent_trials=4, callbacks=[unlimited])
    assert max(unlimited.running) == 4
    assert len(searcher.completed) == 5

    # batch=True: the searcher hears of a whole batch of completions at once, after its
    # last trial ended; no trial of the next batch started before.
    class Batches(Always):
        def suggest(self, trial_id):
            self.completed.append(("suggest", len(self.completed)))
            return super().suggest(trial_id)

    def kinds(batch):
        searcher = Batches()
        _run(
            tmp_path / f"batch_{batch}",
            ConcurrencyLimiter(searcher, max_concurrent=2, batch=batch),
            num_samples=4,
            max_concurrent_trials=4,
            # (A trial with lr=n runs n iterations: the first of a pair ends first.)
            stop=lambda trial_id, result: result["training_iteration"] >= result["config"]["lr"],
        )
        return ["complete" if isinstance(e, str) else "suggest" for e in searcher.completed]

    assert (
        kinds(batch=True) == ["suggest"] * 2 + ["complete"] * 2 + ["suggest"] * 2 + ["complete"] * 2
    )
    # Without batch, a slot is suggested for as soon as a trial ends.
    assert kinds(batch=False)[:4] == ["suggest", "suggest", "complete", "suggest"]


def test_repeater_runs_each_suggestion_and_reports_the_mean(tmp_path):
    searcher = Doubling(metric="score", mode="max")
    analysis = _run(tmp_path, Repeater(searcher, repeat=3), num_samples=6)
    configs = [(t.config["lr"], t.config[TRIAL_INDEX]) for t in analysis.trials]
    assert configs == [(1.0, 0), (1.0, 1), (1.0, 2), (2.0, 0), (2.0, 1), (2.0, 2)]
    completions = [e for e in searcher.events if e[0] == "complete"]
    # Two iterations of lr + index: the scores 2, 4, 6 average to 4; then 4, 6, 8 to 6.
    first, fourth = analysis.trials[0].trial_id, analysis.trials[3].trial_id
    assert completions == [("complete", first, 4.0, False), ("complete", fourth, 6.0, False)]
    # The searcher suggested twice and saw no intermediate result of repeated configs.
    assert [e[0] for e in searcher.events] == ["suggest", "complete", "suggest", "complete"]


def test_basic_variant_generator_is_the_default_with_the_same_trials(tmp_path):
    config = {
        "lr": tune.grid_search([1.0, 2.0]),
        "x": tune.uniform(0, 1),
        "y": tune.sample_from(lambda spec: spec.config.lr * 10),
    }
    default = _run(
        tmp_path / "a", config=config, num_samples=2, seed=3, stop={"training_iteration": 1}
    )
    explicit = _run(
        tmp_path / "b",
        BasicVariantGenerator(random_state=3),
        config=config,
        num_samples=2,
        stop={"training_iteration": 1},
    )
    expected = config_variants(config, 2, random.Random(3))
    for analysis in (default, explicit):
        assert [t.config for t in analysis.trials] == [v for v, _ in expected]
        assert [t.experiment_tag for t in analysis.trials] == [
            "0_lr=1.0",
            "1_lr=2.0",
            "2_lr=1.0",
            "3_lr=2.0",
        ]
        assert list(analysis.trials[0].evaluated_params) == ["lr", "x", "y"]
    # By name too.
    by_name = _run(tmp_path / "c", "random", config=config, stop={"training_iteration": 1})
    assert len(by_name.trials) == 2


def test_basic_variant_generator_points_max_concurrent_and_constant_grid(tmp_path):
    config = {"lr": tune.grid_search([1.0, 2.0]), "x": tune.choice([5, 6])}
    points = BasicVariantGenerator(points_to_evaluate=[{"x": 7}, {"lr": 9.0, "x": 8}])
    analysis = _run(
        tmp_path / "p", points, config=config, num_samples=3, stop={"training_iteration": 1}
    )
    values = [(t.config["lr"], t.config["x"]) for t in analysis.trials]
    # A point leaves the grid it does not set in place; both points count as samples.
    assert values[:3] == [(1.0, 7), (2.0, 7), (9.0, 8)]
    assert [lr for lr, _ in values[3:]] == [1.0, 2.0] and {x for _, x in values[3:]} <= {5, 6}
    assert points.total_samples == 5

    live = Live()
    limited = BasicVariantGenerator(max_concurrent=1)
    _run(
        tmp_path / "m",
        limited,
        config={"lr": tune.grid_search([1.0, 2.0, 3.0])},
        max_concurrent_trials=3,
        callbacks=[live],
    )
    assert max(live.running) == 1

    constant = BasicVariantGenerator(constant_grid_search=True, random_state=0)
    analysis = _run(
        tmp_path / "c",
        constant,
        config={"lr": tune.grid_search([1.0, 2.0]), "x": tune.uniform(0, 1)},
        num_samples=2,
        stop={"training_iteration": 1},
    )
    xs = [t.config["x"] for t in analysis.trials]
    assert xs[0] == xs[1] and xs[2] == xs[3] and xs[0] != xs[2]


def test_resuming_a_searched_run_goes_on_with_the_searchers_state(tmp_path):
    # The second trial (lr=2) is interrupted in its 2nd iteration; the third never started.
    Scored.interrupt_at = (2.0, 2)
    with pytest.raises(KeyboardInterrupt):
        _run(
            tmp_path,
            ConcurrencyLimiter(Doubling(metric="score", mode="max"), 1),
            num_samples=3,
            checkpoint_freq=1,
        )
    exp = tmp_path / "exp"
    saved = json.loads((exp / STATE_FILE).read_text())["trials"]
    assert [t["status"] for t in saved] == ["TERMINATED", "RUNNING"]
    assert json.loads((exp / "searcher-state-default.json").read_text())["lrs"] == {
        saved[0]["trial_id"]: 1.0,
        saved[1]["trial_id"]: 2.0,
    }
    wrappers = json.loads((exp / "search_gen_state-default.json").read_text())["wrappers"]
    assert wrappers[0]["name"] == "ConcurrencyLimiter"
    assert wrappers[0]["state"]["live_trials"] == [saved[1]["trial_id"]]

    Scored.interrupt_at = None
    Scored.built = []
    fresh = Doubling(metric="score", mode="max")
    analysis = _run(
        tmp_path, ConcurrencyLimiter(fresh, 1), num_samples=3, checkpoint_freq=1, resume=True
    )
    # The finished trial is not run again; the interrupted one goes on from its
    # checkpoint with its suggested lr; the searcher (its saved state back) then
    # suggests the third from both results: twice the best lr.
    assert Scored.built == [2.0, 4.0]
    assert [t.config["lr"] for t in analysis.trials] == [1.0, 2.0, 4.0]
    assert [t.last_result["score"] for t in analysis.trials] == [2.0, 4.0, 8.0]
    assert [t.trial_id for t in analysis.trials[:2]] == [row["trial_id"] for row in saved]
    assert fresh.events[0] == ("complete", saved[1]["trial_id"], 4.0, False)


class NoState(Always):
    """A searcher that cannot save its state."""


class Pickling(Always):
    """A searcher whose `save` writes a pickle."""

    def save(self, checkpoint_path):
        import pickle

        with open(checkpoint_path, "wb") as f:
            pickle.dump({"count": self.count}, f)

    def restore(self, checkpoint_path):
        raise AssertionError("corral must not hand it a file that is not JSON")


@pytest.mark.parametrize("searcher_cls", [NoState, Pickling])
def test_a_searcher_without_json_state_is_not_saved_and_resumes_afresh(
    tmp_path, searcher_cls, caplog
):
    Scored.interrupt_at = (2.0, 1)
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path, searcher_cls(), num_samples=3)
    assert not os.path.exists(tmp_path / "exp" / "searcher-state-default.json")
    Scored.interrupt_at = None
    again = searcher_cls()
    analysis = _run(tmp_path, again, num_samples=3, resume=True)
    assert [t.status for t in analysis.trials] == ["TERMINATED"] * 3
    # A fresh searcher: its first suggestion is lr=1 again (the third trial).
    assert [t.config["lr"] for t in analysis.trials] == [1.0, 2.0, 1.0]
    assert "saved no state" in caplog.text


def test_resumed_suggestions_are_checked_before_use(tmp_path):
    _run(
        tmp_path,
        Doubling(metric="score", mode="max"),
        num_samples=1,
        stop={"training_iteration": 1},
    )
    path = tmp_path / "exp" / STATE_FILE
    state = json.loads(path.read_text())
    row = state["trials"][0]
    row["status"] = "PENDING"

    def resume_with(params):
        row["evaluated_params"] = params
        path.write_text(json.dumps(state))
        return _run(tmp_path, Doubling(metric="score", mode="max"), num_samples=1, resume=True)

    # A plain value comes back into the trial's config.
    assert resume_with({"lr": 3.0, "env": "CartPole-v1"}).trials[0].config["lr"] == 3.0
    # Nothing that could name code, nor anything that changes this call's constants.
    with pytest.raises(ValueError, match="'evil.module:Env': a string that could name a module"):
        resume_with({"lr": 3.0, "env": "evil.module:Env"})
    with pytest.raises(ValueError, match="where this call's config sets 'kept'"):
        resume_with({"lr": 3.0, "const": "other"})


def test_searcher_state_is_json_only():
    searcher = Doubling()
    searcher.lrs = {"t": object()}
    with pytest.raises(TypeError, match=r"Doubling.get_state\(\) must return JSON data"):
        searcher.save(os.devnull)


def test_search_errors(tmp_path):
    with pytest.raises(ValueError, match="does not take them"):
        _run(tmp_path, Doubling(), config={"lr": tune.uniform(0, 1)})
    with pytest.raises(ValueError, match="does not take them"):
        _run(tmp_path, Doubling(), config={"lr": tune.grid_search([1, 2])})
    with pytest.raises(ValueError, match=r"seed yours itself"):
        _run(tmp_path, Doubling(), seed=1)
    with pytest.raises(TypeError, match="takes a corral.tune.suggest SearchAlgorithm"):
        _run(tmp_path, object())
    with pytest.raises(ValueError, match="Unknown search algorithm 'grid'"):
        _run(tmp_path, "grid")
    with pytest.raises(TypeError, match="takes a Searcher, got BasicVariantGenerator"):
        ConcurrencyLimiter(BasicVariantGenerator(), 2)
    with pytest.raises(ValueError, match="max_concurrent must be an int >= 1"):
        ConcurrencyLimiter(Doubling(), 0)
    with pytest.raises(ValueError, match="ConcurrencyLimiter"):
        Doubling(max_concurrent=2)
    with pytest.raises(ValueError, match="repeat must be an int >= 1"):
        Repeater(Doubling(), repeat=0)
    with pytest.raises(ValueError, match="max_concurrent must be an int >= 0"):
        BasicVariantGenerator(max_concurrent=-1)

    class Bad(Searcher):
        def suggest(self, trial_id):
            return ["lr", 1]

    with pytest.raises(TypeError, match=r"Bad.suggest\('.*'\) returned \['lr', 1\]"):
        _run(tmp_path, Bad())
    with pytest.raises(ValueError, match="runs on the local path only"):
        _run(tmp_path, Doubling(), config={"backend": "ray"})


def test_third_party_searchers_import_and_raise_by_name():
    # (OptunaSearch and HyperOptSearch are built: tests/tune/test_library_searchers.py;
    # SkOptSearch, NevergradSearch and BayesOptSearch: tests/tune/test_ask_tell_searchers.py;
    # ZOOptSearch: test_zoopt_search.py; BlendSearch and CFO: test_flaml_search.py;
    # AxSearch: test_ax_search.py.)
    from corral.tune.suggest.hebo import HEBOSearch
    from corral.tune.suggest.sigopt import SigOptSearch

    for cls in (SigOptSearch, HEBOSearch):
        with pytest.raises(NotImplementedError, match=f"ray.tune.suggest.*{cls.__name__}"):
            cls(metric="score", mode="max")
    with pytest.raises(NotImplementedError, match="DragonflySearch"):
        create_searcher("Dragonfly", metric="score")
    assert isinstance(create_searcher("variant_generator"), BasicVariantGenerator)
    assert isinstance(SearchGenerator(Doubling()).searcher, Doubling)
