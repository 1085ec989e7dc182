"""Ray Tune 1.13's schedulers under ``tune.run``: ASHA, the median stopping rule,
population-based training, FIFO with trials taking turns, and their errors."""

from __future__ import annotations

import json
import os

import pytest

from corral import tune
from corral.tune.schedulers import (
    PB2,
    ASHAScheduler,
    AsyncHyperBandScheduler,
    FIFOScheduler,
    HyperBandForBOHB,
    MedianStoppingRule,
    PopulationBasedTraining,
    TrialScheduler,
    create_scheduler,
)
from corral.tune.schedulers.pbt import explore
from corral.tune.trial import Trial
from tests.fixtures.trainables import Scored


class Order(tune.Callback):
    """Records (lr, iteration) of every result, in order."""

    def __init__(self):
        self.seen = []

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self.seen.append((trial.config["lr"], result["training_iteration"]))


def _run(tmp_path, lrs, **kwargs):
    return tune.run(
        Scored,
        config={"lr": tune.grid_search(lrs)},
        local_dir=str(tmp_path),
        verbose=0,
        **kwargs,
    )


def test_asha_stops_trials_below_the_rung_cutoff(tmp_path):
    scheduler = ASHAScheduler(
        time_attr="training_iteration", max_t=8, grace_period=1, reduction_factor=2
    )
    analysis = _run(tmp_path, [4.0, 3.0, 5.0, 1.0], scheduler=scheduler, metric="score", mode="max")
    iterations = [t.last_result["training_iteration"] for t in analysis.trials]
    # 4 runs to max_t; 3 is below the rung-1 cutoff (4); 5 passes rungs 1, 2 and 4 (the
    # top half each time); 1 is below rung 1's median (4).
    assert iterations == [8, 1, 8, 1]
    assert {t.status for t in analysis.trials} == {"TERMINATED"}
    assert "num_stopped=4" in scheduler.debug_string()  # two early, two at max_t


def test_asha_min_mode_and_rungs():
    scheduler = AsyncHyperBandScheduler(metric="loss", mode="min", max_t=9, reduction_factor=3)
    assert [m for m, _ in scheduler._brackets[0].rungs] == [9, 3, 1]
    trials = [Trial("T", {}, f"t{i}") for i in range(3)]
    for trial in trials:
        scheduler.on_trial_add(None, trial)
    result = {"training_iteration": 1}
    assert scheduler.on_trial_result(None, trials[0], {**result, "loss": 1.0}) == "CONTINUE"
    assert scheduler.on_trial_result(None, trials[1], {**result, "loss": 2.0}) == "STOP"
    assert scheduler.on_trial_result(None, trials[2], {**result, "loss": 0.5}) == "CONTINUE"
    # Results without the metric or time go on.
    assert scheduler.on_trial_result(None, trials[0], {"training_iteration": 3}) == "CONTINUE"


def test_median_stopping_rule_stops_and_with_hard_stop_false_pauses(tmp_path):
    rule = MedianStoppingRule(
        time_attr="training_iteration", grace_period=0, min_samples_required=1
    )
    analysis = _run(
        tmp_path / "hard",
        [4.0, 1.0, 5.0],
        scheduler=rule,
        metric="score",
        mode="max",
        stop={"training_iteration": 5},
    )
    assert [t.last_result["training_iteration"] for t in analysis.trials] == [5, 1, 5]

    order = Order()
    soft = MedianStoppingRule(
        time_attr="training_iteration", grace_period=0, min_samples_required=1, hard_stop=False
    )
    analysis = _run(
        tmp_path / "soft",
        [4.0, 1.0, 5.0],
        scheduler=soft,
        metric="score",
        mode="max",
        stop={"training_iteration": 5},
        callbacks=[order],
    )
    # lr=1 is paused after its first iteration, lr=5 runs, then lr=1 resumes from its
    # checkpoint (iteration 1, score 1) and is not judged again.
    assert [lr for lr, _ in order.seen] == [4.0] * 5 + [1.0] + [5.0] * 5 + [1.0] * 4
    slow = analysis.trials[1]
    assert slow.status == "TERMINATED"
    assert slow.last_result["training_iteration"] == 5
    assert slow.last_result["score"] == 5.0


def test_fifo_with_max_concurrent_trials_takes_turns(tmp_path):
    order = Order()
    analysis = _run(
        tmp_path,
        [1.0, 2.0, 3.0],
        stop={"training_iteration": 2},
        max_concurrent_trials=2,
        callbacks=[order],
    )
    assert order.seen == [(1.0, 1), (2.0, 1), (1.0, 2), (2.0, 2), (3.0, 1), (3.0, 2)]
    assert [t.status for t in analysis.trials] == ["TERMINATED"] * 3


class FailsOnce(Scored):
    def step(self):
        if self.config["lr"] == 2.0 and self.iteration == 1:
            raise RuntimeError("boom")
        return super().step()


def test_fail_fast_with_trials_taking_turns_stops_the_others(tmp_path):
    analysis = tune.run(
        FailsOnce,
        config={"lr": tune.grid_search([1.0, 2.0, 3.0])},
        stop={"training_iteration": 5},
        max_concurrent_trials=2,
        fail_fast=True,
        raise_on_failed_trial=False,
        checkpoint_at_end=True,
        local_dir=str(tmp_path),
        verbose=0,
    )
    first, failed, pending = analysis.trials
    assert failed.status == "ERROR"
    assert first.status == "TERMINATED"
    assert first.last_result["training_iteration"] == 2
    assert first.checkpoint is not None  # stopped like a trial meeting its stop rule
    assert pending.status == "PENDING"


def test_pbt_exploits_the_top_trial_and_explores_its_config(tmp_path):
    pbt = PopulationBasedTraining(
        time_attr="training_iteration",
        perturbation_interval=2,
        hyperparam_mutations={"lr": [0.1, 0.2, 0.5, 0.9, 1.0]},
        quantile_fraction=0.25,
        resample_probability=0.0,
        seed=0,
    )
    analysis = _run(
        tmp_path,
        [0.1, 0.2, 0.9, 1.0],
        scheduler=pbt,
        metric="score",
        mode="max",
        stop={"training_iteration": 8},
    )
    weakest = analysis.trials[0]
    # It took the best trial's state (score 2.0 at iteration 2) and a neighbour of its
    # lr (0.9 or 1.0 in the list): far above 8 * 0.1.
    assert weakest.config["lr"] in (0.9, 1.0)
    assert weakest.last_result["score"] > 5.0
    assert "@perturbed[lr=" in weakest.experiment_tag
    assert all(t.status == "TERMINATED" for t in analysis.trials)
    assert all(t.last_result["training_iteration"] == 8 for t in analysis.trials)
    experiment_dir = os.path.dirname(weakest.logdir)
    with open(os.path.join(experiment_dir, "pbt_global.txt")) as f:
        rows = [json.loads(line) for line in f]
    assert rows[0]["trial"] == weakest.trial_id
    assert rows[0]["target_trial"] == analysis.trials[3].trial_id
    assert "PopulationBasedTraining" in pbt.debug_string()


def test_pbt_with_fewer_slots_than_trials_pauses_to_take_turns(tmp_path):
    order = Order()
    pbt = PopulationBasedTraining(
        time_attr="training_iteration",
        perturbation_interval=2,
        hyperparam_mutations={"lr": [0.1, 0.2, 0.9, 1.0]},
        seed=1,
    )
    analysis = _run(
        tmp_path,
        [0.1, 0.2, 0.9, 1.0],
        scheduler=pbt,
        metric="score",
        mode="max",
        stop={"training_iteration": 6},
        max_concurrent_trials=2,
        callbacks=[order],
    )
    assert all(t.last_result["training_iteration"] == 6 for t in analysis.trials)
    # The third and fourth trials started before the first two finished (they paused).
    first_of_third = next(i for i, (lr, _) in enumerate(order.seen) if lr == 0.9)
    assert first_of_third < len([x for x in order.seen if x[0] in (0.1, 0.2)])


def test_pbt_trains_ppo_trainers(tmp_path):
    pbt = PopulationBasedTraining(
        time_attr="training_iteration",
        perturbation_interval=1,
        hyperparam_mutations={"lr": [1e-4, 1e-3, 1e-2]},
        quantile_fraction=0.5,
        seed=0,
    )
    analysis = tune.run(
        "PPO",
        config={
            "env": "CartPole-v1",
            "num_workers": 0,
            "train_batch_size": 64,
            "sgd_minibatch_size": 32,
            "num_sgd_iter": 1,
            "rollout_fragment_length": 64,
            "model": {"fcnet_hiddens": [8]},
            "lr": tune.grid_search([1e-4, 1e-2]),
        },
        scheduler=pbt,
        # (Trials in lockstep tie on steps: "min" ranks the one that just stepped lowest.)
        metric="timesteps_total",
        mode="min",
        stop={"training_iteration": 3},
        local_dir=str(tmp_path),
        verbose=0,
    )
    assert [t.last_result["training_iteration"] for t in analysis.trials] == [3, 3]
    # The first trial took the second's trainer state twice (restored into a new PPO
    # trainer with the explored lr: its step count went back to the donor's).
    assert pbt._num_perturbations == 2
    assert analysis.trials[0].config["lr"] in (1e-4, 1e-3, 1e-2)


def test_explore_perturbs_lists_numbers_and_nested_keys():
    import random

    rng = random.Random(0)
    config = {"lr": 0.01, "n": 10, "opt": {"mom": 0.9}, "keep": "x"}
    mutations = {"lr": tune.uniform(0.0, 1.0), "n": lambda: 3, "opt": {"mom": [0.8, 0.9, 0.99]}}
    for _ in range(20):
        new = explore(config, mutations, 0.0, None, rng)
        assert new["lr"] in (pytest.approx(0.012), pytest.approx(0.008))
        assert new["n"] in (12, 8) and isinstance(new["n"], int)
        assert new["opt"]["mom"] in (0.8, 0.99)
        assert new["keep"] == "x"
    new = explore(config, mutations, 1.0, lambda c: {**c, "keep": "y"}, rng)
    assert new["n"] == 3 and new["keep"] == "y" and 0.0 <= new["lr"] <= 1.0
    assert config == {"lr": 0.01, "n": 10, "opt": {"mom": 0.9}, "keep": "x"}


def test_scheduler_errors(tmp_path):
    with pytest.raises(ValueError, match="needs hyperparam_mutations or custom_explore_fn"):
        PopulationBasedTraining()
    with pytest.raises(ValueError, match="quantile_fraction"):
        PopulationBasedTraining(hyperparam_mutations={"lr": [1]}, quantile_fraction=0.6)
    with pytest.raises(TypeError, match=r"hyperparam_mutations\[lr\]"):
        PopulationBasedTraining(hyperparam_mutations={"lr": 0.1})
    with pytest.raises(ValueError, match="reduction_factor must be > 1"):
        ASHAScheduler(reduction_factor=1)
    with pytest.raises(NotImplementedError, match="HyperBandForBOHB"):
        HyperBandForBOHB()
    with pytest.raises(NotImplementedError, match="PB2"):
        PB2(metric="x")
    with pytest.raises(ValueError, match="Unknown scheduler 'bohb'"):
        create_scheduler("bohb")
    assert isinstance(create_scheduler("asha", metric="m", mode="max"), AsyncHyperBandScheduler)
    assert isinstance(create_scheduler("fifo"), FIFOScheduler)
    # No metric anywhere: a clear error before any trial runs.
    with pytest.raises(ValueError, match="needs a metric and a mode"):
        _run(tmp_path, [1.0], scheduler=ASHAScheduler())
    # A metric in two places that differ.
    with pytest.raises(ValueError, match="set them in one place"):
        _run(tmp_path, [1.0], scheduler=ASHAScheduler(metric="a", mode="max"), metric="b")
    with pytest.raises(TypeError, match="corral.tune.schedulers scheduler"):
        _run(tmp_path, [1.0], scheduler=object())
    with pytest.raises(ValueError, match="max_concurrent_trials"):
        _run(tmp_path, [1.0], max_concurrent_trials=0)

    def train_fn(config):
        tune.report(score=1)

    pbt = PopulationBasedTraining(hyperparam_mutations={"lr": [1]}, metric="score", mode="max")
    with pytest.raises(ValueError, match="function trainable"):
        tune.run(train_fn, scheduler=pbt, local_dir=str(tmp_path), verbose=0)
    # A string names Ray Tune's scheduler; it takes tune.run's metric and mode.
    analysis = _run(
        tmp_path,
        [1.0, 2.0],
        scheduler="asha",
        metric="score",
        mode="max",
        stop={"training_iteration": 2},
    )
    assert len(analysis.trials) == 2


def test_a_custom_scheduler_subclass_decides(tmp_path):
    class StopAtTwo(FIFOScheduler):
        def on_trial_result(self, trial_runner, trial, result):
            assert trial in trial_runner.get_trials()
            if result["training_iteration"] >= 2:
                return TrialScheduler.STOP
            return TrialScheduler.CONTINUE

    analysis = _run(tmp_path, [1.0, 2.0], scheduler=StopAtTwo())
    assert [t.last_result["training_iteration"] for t in analysis.trials] == [2, 2]


class Tracked(Scored):
    """Records which trials' trainables were stopped."""

    stopped: list = []

    def cleanup(self):
        Tracked.stopped.append(self.config["lr"])


def test_an_error_of_the_run_stops_every_live_trial(tmp_path):
    class Boom(tune.Callback):
        def on_trial_result(self, iteration, trials, trial, result, **info):
            if trial.config["lr"] == 2.0:
                raise KeyError("a hook that raises")

    Tracked.stopped = []
    with pytest.raises(KeyError, match="a hook that raises"):
        tune.run(
            Tracked,
            config={"lr": tune.grid_search([1.0, 2.0, 3.0])},
            max_concurrent_trials=2,
            checkpoint_at_end=True,
            callbacks=[Boom()],
            local_dir=str(tmp_path),
            verbose=0,
        )
    assert sorted(Tracked.stopped) == [1.0, 2.0]  # the third never started


class FakeRunner:
    """What PBT's hooks call on a trial runner, recorded."""

    experiment_dir = None

    def __init__(self, trials):
        self.trials = trials
        self.saved, self.restarted = [], []

    def get_trials(self):
        return self.trials

    def save_to_object(self, trial):
        self.saved.append(trial.trial_id)
        return f"state of {trial.trial_id}".encode()

    def restart_trial(self, trial, config, checkpoint, tag):
        self.restarted.append((trial.trial_id, checkpoint.decode()))
        trial.config = config


def _population(synch):
    pbt = PopulationBasedTraining(
        time_attr="training_iteration",
        metric="score",
        mode="max",
        perturbation_interval=2,
        hyperparam_mutations={"lr": [0.1, 0.2, 0.9, 1.0]},
        quantile_fraction=0.25,
        synch=synch,
        seed=0,
    )
    trials = [Trial("T", {"lr": lr}, f"t{i}") for i, lr in enumerate([0.1, 0.2, 0.9, 1.0])]
    runner = FakeRunner(trials)
    for trial in trials:
        pbt.on_trial_add(runner, trial)
        trial.status = "RUNNING"
    return pbt, runner, trials


def test_synchronous_pbt_perturbs_only_once_all_trials_reached_the_point():
    pbt, runner, trials = _population(synch=True)
    # Before the perturbation point: go on.
    assert pbt.on_trial_result(runner, trials[0], {"training_iteration": 1, "score": 0.1}) == (
        "CONTINUE"
    )
    # Each trial reaching it waits (PAUSE), nothing is saved or exploited ...
    for trial in trials[:3]:
        result = {"training_iteration": 2, "score": 2 * trial.config["lr"]}
        assert pbt.on_trial_result(runner, trial, result) == "PAUSE"
        trial.status = "PAUSED"
        assert runner.saved == [] and runner.restarted == []
        # ... and is not chosen to run again while others are behind.
    assert pbt.choose_trial_to_run(runner) is None
    # The last one perturbs all of them: the best saved, the worst given its state.
    assert pbt.on_trial_result(runner, trials[3], {"training_iteration": 2, "score": 2.0}) == (
        "PAUSE"
    )
    assert runner.saved == ["t3"]
    assert runner.restarted == [("t0", "state of t3")]
    assert trials[0].config["lr"] in (0.9, 1.0)
    assert pbt._next_perturbation_sync == 4
    trials[3].status = "PAUSED"
    # All are behind the next point now: the least trained (all equal: the first) goes.
    assert pbt.choose_trial_to_run(runner) is trials[0]

    # The asynchronous one ranks the second trial against the first at once.
    pbt, runner, trials = _population(synch=False)
    pbt.on_trial_result(runner, trials[0], {"training_iteration": 2, "score": 0.2})
    pbt.on_trial_result(runner, trials[1], {"training_iteration": 2, "score": 0.4})
    assert runner.saved == ["t1"]


def test_synchronous_pbt_does_not_wait_for_a_trial_that_ended():
    pbt, runner, trials = _population(synch=True)
    for trial in trials[:3]:
        pbt.on_trial_result(runner, trial, {"training_iteration": 2, "score": trial.config["lr"]})
        trial.status = "PAUSED"
    trials[3].status = "TERMINATED"  # stopped by its stop rule before the point
    pbt.on_trial_complete(runner, trials[3], {"training_iteration": 1, "score": 5.0})
    assert runner.saved == ["t2"] and runner.restarted == [("t0", "state of t2")]


def test_synchronous_pbt_runs_the_population_in_lockstep(tmp_path):
    order = Order()
    pbt = PopulationBasedTraining(
        time_attr="training_iteration",
        perturbation_interval=2,
        hyperparam_mutations={"lr": [0.1, 0.2, 0.5, 0.9, 1.0]},
        quantile_fraction=0.25,
        resample_probability=0.0,
        synch=True,
        seed=0,
    )
    analysis = _run(
        tmp_path,
        [0.1, 0.2, 0.9, 1.0],
        scheduler=pbt,
        metric="score",
        mode="max",
        stop={"training_iteration": 6},
        max_concurrent_trials=2,  # (fewer slots than trials: they take turns)
        callbacks=[order],
    )
    assert all(t.last_result["training_iteration"] == 6 for t in analysis.trials)
    # No trial went past a perturbation point before every trial had reached it.
    iterations = [iteration for _, iteration in order.seen]
    for point in (2, 4):
        last_at_point = max(i for i, it in enumerate(iterations) if it == point)
        first_after = min(i for i, it in enumerate(iterations) if it == point + 1)
        assert last_at_point < first_after
    # Exploits happened at those points only, and the weakest trial took the best one's
    # state there (its score is far above 6 * 0.1).
    experiment_dir = os.path.dirname(analysis.trials[0].logdir)
    with open(os.path.join(experiment_dir, "pbt_global.txt")) as f:
        rows = [json.loads(line) for line in f]
    assert rows and {row["iteration"] for row in rows} <= {2, 4}
    assert rows[0]["trial"] == analysis.trials[0].trial_id
    assert analysis.trials[0].last_result["score"] > 3.0
    assert pbt._num_perturbations == len(rows)
