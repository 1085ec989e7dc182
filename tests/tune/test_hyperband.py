"""Ray Tune 1.13's synchronous ``HyperBandScheduler`` under ``tune.run``: brackets, trials
paused at milestones (and resumed from their checkpoints), halvings, ``max_t``."""

from __future__ import annotations

import json
import os

import pytest

from corral import tune
from corral.tune.schedulers import HyperBandForBOHB, HyperBandScheduler, create_scheduler
from corral.tune.suggest import Searcher
from corral.tune.trial import Trial
from tests.fixtures.trainables import Scored


class Events(tune.Callback):
    """Records restores and ends (whether a trainable came with the end)."""

    def __init__(self):
        self.restored = []
        self.ended = []

    def on_trial_restore(self, iteration, trials, trial, **info):
        self.restored.append((trial.config["lr"], iteration))

    def on_trial_complete(self, iteration, trials, trial, **info):
        self.ended.append((trial.config["lr"], iteration, "trainable" in info))


def _run(tmp_path, lrs, scheduler, **kwargs):
    return tune.run(
        Scored,
        config={"lr": tune.grid_search(lrs)},
        scheduler=scheduler,
        metric="score",
        mode="max",
        local_dir=str(tmp_path),
        verbose=0,
        **kwargs,
    )


def _iterations(analysis):
    return {t.config["lr"]: t.last_result["training_iteration"] for t in analysis.trials}


# max_t=9, reduction_factor=3: a band has 3 brackets. Bracket 0 takes 3 trials and runs
# them to 9; bracket 1 takes 5, keeps the top 2 at 3 and runs them to 9; bracket 2 takes 9
# (here only the last 3 trials), keeps the top 3 at 1 (all of them), the top 1 at 3.
LRS = [3.0, 1.0, 2.0, 5.0, 4.0, 8.0, 6.0, 7.0, 9.0, 11.0, 10.0]
EXPECTED = {3.0: 9, 1.0: 9, 2.0: 9, 5.0: 3, 4.0: 3, 8.0: 9, 6.0: 3, 7.0: 9, 9.0: 3, 11.0: 9}
EXPECTED[10.0] = 3


@pytest.mark.parametrize("slots", [None, 3])
def test_hyperband_halves_each_bracket_at_its_milestones(tmp_path, slots):
    scheduler = HyperBandScheduler(max_t=9, reduction_factor=3)
    events = Events()
    analysis = _run(tmp_path, LRS, scheduler, callbacks=[events], max_concurrent_trials=slots)
    assert _iterations(analysis) == EXPECTED
    for trial in analysis.trials:
        assert trial.status == "TERMINATED"
        # Paused trials resumed from their checkpoints: the score kept counting.
        assert trial.last_result["score"] == trial.config["lr"] * EXPECTED[trial.config["lr"]]
    # Bracket 2's trials waited at 1, the first two paused, the last went on to 3; there
    # 9 and 10 waited and lost to 11, which went on. Bracket 1's trials all waited at 3,
    # 7 came last and went on with 8, which resumed.
    assert events.restored == [(9.0, 1), (11.0, 1), (8.0, 3)]
    # The losers ended paused: without a trainable (Ray Tune's stop_trial).
    assert sorted((lr, it) for lr, it, built in events.ended if not built) == [
        (4.0, 3),
        (5.0, 3),
        (6.0, 3),
        (9.0, 3),
        (10.0, 3),
    ]
    assert len(events.ended) == len(LRS)
    assert scheduler.state() == {"num_brackets": 3, "num_stopped": 5}
    debug = scheduler.debug_string()
    assert debug.startswith("Using HyperBand: num_stopped=5 total_brackets=3")
    assert "Bracket(Max Size (n)=2, Milestone (r)=9, completed=100.0%): {TERMINATED: 5}" in debug


def test_hyperband_min_mode_pauses_a_function_trainable_through_its_checkpoints(tmp_path):
    def train_fn(config, checkpoint_dir=None):
        step, loss = 0, 100.0
        if checkpoint_dir:
            with open(os.path.join(checkpoint_dir, "state.json")) as f:
                step, loss = json.load(f)
        while True:
            step += 1
            loss -= config["rate"]
            with (
                tune.checkpoint_dir(step=step) as path,
                open(os.path.join(path, "state.json"), "w") as f,
            ):
                json.dump([step, loss], f)
            tune.report(loss=loss, step=step)

    # max_t=4, reduction_factor=2: brackets of 3 trials (to 4), 3 (top 2 of them at 2 go
    # on) and 4 (here 1 trial).
    scheduler = HyperBandScheduler(metric="loss", mode="min", max_t=4, reduction_factor=2)
    analysis = tune.run(
        train_fn,
        config={"rate": tune.grid_search([1.0, 3.0, 2.0, 4.0, 0.5, 5.0, 6.0])},
        scheduler=scheduler,
        local_dir=str(tmp_path),
        verbose=0,
    )
    ran = {t.config["rate"]: t.last_result["training_iteration"] for t in analysis.trials}
    assert ran == {1.0: 4, 3.0: 4, 2.0: 4, 4.0: 4, 0.5: 2, 5.0: 4, 6.0: 4}
    for trial in analysis.trials:
        # The resumed function counted on from its checkpoint (its step is the
        # trial's iteration).
        assert trial.last_result["step"] == trial.last_result["training_iteration"]
        assert trial.last_result["loss"] == 100.0 - trial.config["rate"] * ran[trial.config["rate"]]
    assert scheduler.state()["num_stopped"] == 1


def test_hyperband_without_stop_last_trials_lets_the_winners_run_on(tmp_path):
    # max_t=3, reduction_factor=3: bracket 0 takes 2 trials (to 3), bracket 1 takes 3,
    # keeps the top 1 at 1.
    scheduler = HyperBandScheduler(max_t=3, reduction_factor=3, stop_last_trials=False)
    analysis = _run(tmp_path, [1.0, 2.0, 4.0, 6.0, 5.0], scheduler, stop={"training_iteration": 5})
    assert _iterations(analysis) == {1.0: 5, 2.0: 5, 4.0: 1, 6.0: 5, 5.0: 1}


def test_a_trial_that_ends_by_itself_leaves_its_bracket(tmp_path):
    # Bracket 1 (milestone 3, top 2 go on): lr=7, its last trial, ends by itself at 2
    # while the other four wait paused at 3: the bracket halves without it.
    scheduler = HyperBandScheduler(max_t=9, reduction_factor=3)
    analysis = tune.run(
        Scored,
        config={
            "lr": tune.grid_search([3.0, 1.0, 2.0, 5.0, 4.0, 8.0, 6.0, 7.0]),
            "done_at": tune.sample_from(lambda spec: 2 if spec.config.lr == 7.0 else None),
        },
        scheduler=scheduler,
        metric="score",
        mode="max",
        local_dir=str(tmp_path),
        verbose=0,
    )
    assert _iterations(analysis) == {3.0: 9, 1.0: 9, 2.0: 9, 5.0: 3, 4.0: 3, 8.0: 9, 6.0: 9, 7.0: 2}
    assert {t.status for t in analysis.trials} == {"TERMINATED"}


class Listed(Searcher):
    """Suggests the given lrs in order; records each trial's end."""

    def __init__(self, lrs, **kwargs):
        super().__init__(**kwargs)
        self.lrs = list(lrs)
        self.given = {}
        self.ended = {}

    def suggest(self, trial_id):
        if len(self.given) == len(self.lrs):
            return Searcher.FINISHED
        self.given[trial_id] = self.lrs[len(self.given)]
        return {"lr": self.given[trial_id]}

    def on_trial_complete(self, trial_id, result=None, error=False):
        self.ended[self.given[trial_id]] = None if result is None else result["score"]


def test_the_searcher_hears_a_paused_loser_end_without_a_result(tmp_path):
    # max_t=3, reduction_factor=3: lr 1, 2 in bracket 0; 4, 6, 5 in bracket 1, where 4
    # and 6 wait paused at 1 until 5 gets there: 6 goes on, 4 stops while paused (no
    # result, as Ray Tune's stop_trial), 5 stops at its own result.
    searcher = Listed([1.0, 2.0, 4.0, 6.0, 5.0])
    analysis = tune.run(
        Scored,
        search_alg=searcher,
        scheduler=HyperBandScheduler(max_t=3, reduction_factor=3),
        metric="score",
        mode="max",
        num_samples=5,
        max_concurrent_trials=5,
        local_dir=str(tmp_path),
        verbose=0,
    )
    assert _iterations(analysis) == {1.0: 3, 2.0: 3, 4.0: 1, 6.0: 3, 5.0: 1}
    assert searcher.ended == {1.0: 3.0, 2.0: 6.0, 4.0: None, 6.0: 18.0, 5.0: 5.0}


def test_hyperband_schedule_of_a_band():
    scheduler = HyperBandScheduler(metric="m", mode="max", max_t=81, reduction_factor=3)
    for i in range(5 + 8 + 15 + 34 + 81 + 1):
        scheduler.on_trial_add(None, Trial("T", {}, f"t{i}"))
    lines = scheduler.debug_string().splitlines()
    assert lines[0] == "Using HyperBand: num_stopped=0 total_brackets=6"
    sizes = [line.split("Max Size (n)=")[1].split(",")[0] for line in lines if "Bracket" in line]
    milestones = [
        line.split("Milestone (r)=")[1].split(",")[0] for line in lines if "Bracket" in line
    ]
    # Bracket s takes ceil(5 / (s + 1) * 3**s) trials; its first milestone is 81 / 3**s.
    assert sizes == ["5", "8", "15", "34", "81", "5"]
    assert milestones == ["81", "27", "9", "3", "1", "81"]
    assert lines[7] == "Round #1:"
    # A finished trial (of a resumed run) joins no bracket.
    fresh = HyperBandScheduler(metric="m", mode="max")
    ended = Trial("T", {}, "done")
    ended.status = Trial.TERMINATED
    fresh.on_trial_add(None, ended)
    assert fresh.state() == {"num_brackets": 0, "num_stopped": 0}


def test_hyperband_milestones_reach_max_t():
    scheduler = HyperBandScheduler(metric="m", mode="max", max_t=100, reduction_factor=3)
    trials = [Trial("T", {}, f"t{i}") for i in range(400)]
    for trial in trials:
        scheduler.on_trial_add(None, trial)
    bracket = scheduler._bracket_of["t399"]  # bracket 4 of the first band: 81 trials
    milestones = [bracket._milestone(k) for k in range(5)]
    assert milestones == [1, 3, 11, 33, 100]


def test_hyperband_errors(tmp_path):
    with pytest.raises(ValueError, match="max_t must be a number > 0"):
        HyperBandScheduler(max_t=0)
    with pytest.raises(ValueError, match="reduction_factor must be a number > 1"):
        HyperBandScheduler(reduction_factor=1)
    with pytest.raises(ValueError, match="mode must be 'max' or 'min'"):
        HyperBandScheduler(mode="best")

    def run(scheduler, metric, folder):
        tune.run(
            Scored,
            config={"lr": 1.0},
            scheduler=scheduler,
            metric=metric,
            mode="max" if metric else None,
            local_dir=str(tmp_path / folder),
            verbose=0,
        )

    with pytest.raises(ValueError, match="needs a metric and a mode"):
        run(HyperBandScheduler(), None, "none")
    with pytest.raises(ValueError, match="has no 'loss'"):
        run(HyperBandScheduler(), "loss", "missing")
    # A mode alone: Ray Tune's anonymous metric.
    anonymous = HyperBandScheduler()
    assert anonymous.set_search_properties(None, "min")
    assert anonymous.metric == "_metric"
    assert isinstance(create_scheduler("hyperband", metric="m", mode="max"), HyperBandScheduler)
    with pytest.raises(NotImplementedError, match="TuneBOHB"):
        HyperBandForBOHB()
