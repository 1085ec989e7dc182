"""Ray Tune 1.13's names that RLlib 1.x users' Tune code calls: the callback hooks of
the loop, ``ExperimentAnalysis``'s reading and ranking, ``Trainable``'s helpers, the
schedulers' state, the stoppers and ``with_parameters``."""

import json
import math
import os

import pytest

from corral import tune
from corral.tune import Trainable
from corral.tune.result import DEBUG_METRICS, NODE_IP, TRIAL_ID, WARMUP_TIME
from corral.tune.schedulers import AsyncHyperBandScheduler, PopulationBasedTraining
from corral.tune.stopper import (
    CombinedStopper,
    ExperimentPlateauStopper,
    FunctionStopper,
    MaximumIterationStopper,
    NoopStopper,
    Stopper,
    TimeoutStopper,
    TrialPlateauStopper,
)
from corral.tune.stopping import stop_condition
from corral.tune.trial import Trial
from corral.tune.trial_runner import TrialLoop


@pytest.fixture(autouse=True)
def results_dir(tmp_path_factory, monkeypatch):
    path = tmp_path_factory.mktemp("results")
    monkeypatch.setenv("CORRAL_RESULTS_DIR", str(path))
    return path


class Counter(Trainable):
    def setup(self, config):
        self.count = config.get("start", 0)

    def step(self):
        self.count += self.config.get("increment", 1)
        scores = self.config.get("score")
        score = scores[min(self.iteration, len(scores) - 1)] if scores else self.count
        return {"count": self.count, "score": score}

    def save_checkpoint(self, tmp_checkpoint_dir):
        return {"count": self.count}

    def load_checkpoint(self, checkpoint):
        self.count = checkpoint["count"]


class Recorder(tune.Callback):
    def __init__(self):
        self.events = []

    def setup(self, stop=None, num_samples=None, total_num_samples=None, **info):
        self.events.append(("setup", stop, num_samples, total_num_samples))

    def on_step_begin(self, iteration, trials, **info):
        self.events.append(("step_begin", iteration))

    def on_step_end(self, iteration, trials, **info):
        self.events.append(("step_end", iteration))

    def on_trial_start(self, iteration, trials, trial, **info):
        self.events.append(("start", iteration))

    def on_trial_restore(self, iteration, trials, trial, **info):
        self.events.append(("restore", iteration))

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self.events.append(("result", result["count"]))

    def on_checkpoint(self, iteration, trials, trial, checkpoint, **info):
        self.events.append(("checkpoint", os.path.basename(checkpoint)))

    def on_trial_save(self, iteration, trials, trial, **info):
        self.events.append(("save", os.path.basename(trial.checkpoint)))

    def on_trial_complete(self, iteration, trials, trial, **info):
        self.events.append(("complete", iteration))

    def on_experiment_end(self, trials, **info):
        self.events.append(("experiment_end", [t.status for t in trials]))


# -- 1. callback hooks -----------------------------------------------------------------


def test_callbacks_see_setup_each_step_each_save_and_the_experiment_end_in_order(tmp_path):
    recorder = Recorder()
    stop = {"count": 2}
    tune.run(
        Counter,
        stop=stop,
        checkpoint_freq=1,
        local_dir=str(tmp_path),
        verbose=0,
        callbacks=[recorder],
    )
    assert recorder.events == [
        ("setup", stop, 1, 1),
        ("step_begin", 0),
        ("start", 0),
        ("result", 1),
        ("checkpoint", "checkpoint_000001"),
        ("save", "checkpoint_000001"),
        ("step_end", 1),
        ("step_begin", 1),
        ("result", 2),
        ("checkpoint", "checkpoint_000002"),
        ("save", "checkpoint_000002"),
        ("complete", 2),
        ("step_end", 2),
        ("experiment_end", ["TERMINATED"]),
    ]


def test_step_counter_runs_over_all_trials_and_the_state_records_it(tmp_path):
    recorder = Recorder()
    analysis = tune.run(
        Counter,
        config={"start": tune.grid_search([0, 10])},
        stop={"training_iteration": 2},
        local_dir=str(tmp_path),
        name="exp",
        verbose=0,
        callbacks=[recorder],
    )
    assert recorder.events[0] == ("setup", {"training_iteration": 2}, 1, 2)
    ends = [e[1] for e in recorder.events if e[0] == "step_end"]
    begins = [e[1] for e in recorder.events if e[0] == "step_begin"]
    assert begins == [0, 1, 2, 3] and ends == [1, 2, 3, 4]
    assert [e[0] for e in recorder.events].count("experiment_end") == 1
    assert analysis.runner_data()["_iteration"] == 4


def test_on_trial_restore_follows_the_start_of_a_restored_trial(tmp_path):
    first = tune.run(
        Counter, stop={"count": 2}, checkpoint_at_end=True, local_dir=str(tmp_path), verbose=0
    )
    checkpoint = first.trials[0].checkpoint
    recorder = Recorder()
    tune.run(
        Counter,
        stop={"count": 3},
        restore=checkpoint,
        local_dir=str(tmp_path),
        verbose=0,
        callbacks=[recorder],
    )
    names = [e[0] for e in recorder.events]
    assert names[:4] == ["setup", "step_begin", "start", "restore"]
    assert ("start", 2) in recorder.events and ("result", 3) in recorder.events


def test_on_trial_restore_when_a_failed_trial_recovers_from_its_checkpoint(tmp_path):
    class FailsOnce(Counter):
        failed = False

        def step(self):
            if self.iteration == 2 and not FailsOnce.failed:
                FailsOnce.failed = True
                raise RuntimeError("once")
            return super().step()

    recorder = Recorder()
    analysis = tune.run(
        FailsOnce,
        stop={"training_iteration": 3},
        checkpoint_freq=1,
        max_failures=1,
        local_dir=str(tmp_path),
        verbose=0,
        callbacks=[recorder],
    )
    assert analysis.trials[0].status == "TERMINATED"
    names = [e[0] for e in recorder.events]
    assert names.count("start") == 2 and names.count("restore") == 1
    assert names.index("restore") == names.index("start", names.index("start") + 1) + 1


def test_no_experiment_end_when_an_error_ends_the_run(tmp_path):
    class Refuses(Recorder):
        def on_trial_result(self, iteration, trials, trial, result, **info):
            raise RuntimeError("no")

    recorder = Refuses()
    with pytest.raises(RuntimeError, match="no"):
        tune.run(Counter, stop={"count": 2}, local_dir=str(tmp_path), callbacks=[recorder])
    assert "experiment_end" not in [e[0] for e in recorder.events]
    assert "step_end" not in [e[0] for e in recorder.events]


def test_the_corral_train_loop_calls_the_step_hooks():
    recorder = Recorder()
    loop = TrialLoop(stop_condition({"count": 2}), callbacks=[recorder])
    trainable = Counter()
    loop.run(Trial("Counter", {}, "t0"), trainable)
    assert [e for e in recorder.events if e[0].startswith("step")] == [
        ("step_begin", 0),
        ("step_end", 1),
        ("step_begin", 1),
        ("step_end", 2),
    ]
    assert loop.steps == 2


def test_a_callback_with_only_the_old_hooks_still_runs(tmp_path):
    class Old(tune.Callback):
        def __init__(self):
            self.results = 0

        def on_trial_result(self, iteration, trials, trial, result, **info):
            self.results += 1

    old = Old()
    tune.run(Counter, stop={"count": 3}, local_dir=str(tmp_path), verbose=0, callbacks=[old])
    assert old.results == 3


# -- 2. ExperimentAnalysis -------------------------------------------------------------


def _scored_run(tmp_path, name="exp"):
    # Three trials with scores per iteration: a has the best last, b the best peak and
    # average, c a NaN last.
    return tune.run(
        Counter,
        config={
            "score": tune.grid_search(
                [[1.0, 2.0, 9.0], [10.0, 10.0, 3.0], [0.0, 0.0, float("nan")]]
            )
        },
        stop={"training_iteration": 3},
        local_dir=str(tmp_path),
        name=name,
        verbose=0,
    )


def test_best_trial_scopes_and_nan_filtering(tmp_path):
    analysis = _scored_run(tmp_path)
    a, b, c = analysis.trials
    assert analysis.get_best_trial("score", "max", scope="last") is a
    assert analysis.get_best_trial("score", "max", scope="all") is b
    assert analysis.get_best_trial("score", "max", scope="avg") is b
    assert analysis.get_best_trial("score", "min", scope="last") is b
    assert analysis.get_best_config("score", "max", scope="all") == b.config
    # NaN is left out by default (c's average is NaN; its lowest value, 0, is not);
    # taken, a NaN stays best only if met first (Ray's order).
    assert analysis.get_best_trial("score", "min", scope="last-5-avg") is a
    assert analysis.get_best_trial("score", "min", scope="all") is c
    assert analysis.get_best_trial("score", "min", scope="last") is b
    with_nan = tune.ExperimentAnalysis(trials=[c, a, b])
    assert with_nan.get_best_trial("score", "max", filter_nan_and_inf=False) is c
    assert with_nan.get_best_trial("score", "max") is a
    with pytest.raises(ValueError, match="scope"):
        analysis.get_best_trial("score", "max", scope="first")


def test_analysis_reads_an_experiment_folder_back(tmp_path):
    run = _scored_run(tmp_path)
    folder = os.path.join(str(tmp_path), "exp")
    for path in (folder, os.path.join(folder, "experiment_state.json")):
        analysis = tune.ExperimentAnalysis(path, default_metric="score", default_mode="max")
        assert [t.trial_id for t in analysis.trials] == [t.trial_id for t in run.trials]
        assert [t.config["score"][0] for t in analysis.trials] == [1.0, 10.0, 0.0]
        assert {t.status for t in analysis.trials} == {"TERMINATED"}
        assert analysis.best_trial.trial_id == run.trials[0].trial_id
        assert analysis.get_best_trial(scope="all").trial_id == run.trials[1].trial_id
        frames = analysis.trial_dataframes
        assert sorted(len(df) for df in frames.values()) == [3, 3, 3]
        assert analysis.results_df.loc[run.trials[0].trial_id, "score"] == 9.0
    stats = analysis.stats()
    assert stats["timestamp"] >= stats["start_time"] > 0
    runner = analysis.runner_data()
    assert runner["_iteration"] == 9 and runner["_scheduler_alg"] == "FIFOScheduler"


def test_fetch_trial_dataframes_and_set_filetype(tmp_path):
    analysis = _scored_run(tmp_path)
    csv_frames = analysis.fetch_trial_dataframes()
    assert set(csv_frames) == {t.logdir for t in analysis.trials}
    first = csv_frames[analysis.trials[0].logdir]
    assert list(first["count"]) == [1, 2, 3]
    assert first["trial_id"].iloc[0] == analysis.trials[0].trial_id
    assert analysis.set_filetype("json") is True
    json_frame = analysis.trial_dataframes[analysis.trials[0].logdir]
    assert list(json_frame["count"]) == [1, 2, 3]
    assert "config/score" in json_frame.columns  # nested keys joined by "/"
    with pytest.raises(ValueError, match="file_type"):
        analysis.set_filetype("parquet")


def test_a_folder_of_experiments_is_read_by_session(tmp_path):
    _scored_run(tmp_path, name="one")
    tune.run(Counter, stop={"count": 1}, local_dir=str(tmp_path), name="two", verbose=0)
    analysis = tune.ExperimentAnalysis(str(tmp_path))
    assert len(analysis.trials) == 4
    stats, runners = analysis.stats(), analysis.runner_data()
    # Both runs may start in the same second: then one session name holds both.
    assert 1 <= len(stats) <= 2 and set(stats) == set(runners)
    assert all("_iteration" in data for data in runners.values())


def test_analysis_arguments(tmp_path):
    run = _scored_run(tmp_path)

    class SyncConfig:
        def __init__(self, upload_dir=None):
            self.upload_dir = upload_dir

    folder = os.path.join(str(tmp_path), "exp")
    assert len(tune.ExperimentAnalysis(folder, sync_config=SyncConfig()).trials) == 3
    with pytest.raises(ValueError, match="upload_dir"):
        tune.ExperimentAnalysis(folder, sync_config=SyncConfig("s3://bucket"))
    with pytest.raises(ValueError, match="holds no experiment_state.json"):
        tune.ExperimentAnalysis(str(tmp_path / "nothing"))
    with pytest.raises(ValueError, match="default_mode"):
        tune.ExperimentAnalysis(folder, default_mode="best")
    # corral's earlier form, and an analysis without a state.
    from_trials = tune.ExperimentAnalysis(run.trials, default_metric="score", default_mode="max")
    assert from_trials.best_trial is run.trials[0]
    with pytest.raises(ValueError, match="state"):
        from_trials.stats()
    assert isinstance(tune.Analysis(folder), tune.ExperimentAnalysis)


# -- 3. Trainable ----------------------------------------------------------------------


def test_trainable_auto_filled_metrics_ip_state_and_actor():
    trainable = Counter()
    result = trainable.train()
    assert trainable.get_current_ip() == result[NODE_IP]
    assert result[TRIAL_ID] == "default" and result[WARMUP_TIME] >= 0
    filled = trainable.get_auto_filled_metrics(time_this_iter=0.5)
    assert filled["time_this_iter_s"] == 0.5 and filled["iterations_since_restore"] == 1
    assert set(trainable.get_auto_filled_metrics(debug_metrics_only=True)) == set(DEBUG_METRICS)
    assert trainable.is_actor() is False
    assert trainable.uses_cloud_checkpointing is False
    assert trainable.trial_resources == "default"
    state = trainable.get_state()
    assert state["iteration"] == 1 and state["last_result"]["count"] == 1
    assert state["experiment_id"] == result["experiment_id"]
    trainable.stop()
    with pytest.raises(ValueError, match="remote_checkpoint_dir"):
        Counter(remote_checkpoint_dir="s3://bucket/trial")


def test_train_buffered_stops_at_the_buffer_length_or_a_done_result():
    trainable = Counter()
    results = trainable.train_buffered(buffer_time_s=60.0, max_buffer_length=3)
    assert [r["count"] for r in results] == [1, 2, 3]
    assert len(trainable.train_buffered(buffer_time_s=0.0)) == 1  # at least one

    class DoneAtSix(Counter):
        def step(self):
            return {**super().step(), "done": self.count >= 6}

    done = DoneAtSix()
    assert [r["count"] for r in done.train_buffered(buffer_time_s=60.0)] == list(range(1, 7))
    trainable.stop()
    done.stop()


def test_delete_checkpoint_and_restore_with_a_node_ip(tmp_path):
    trainable = Counter()
    trainable.train()
    path = trainable.save(str(tmp_path))
    other = Counter()
    other.restore(path, checkpoint_node_ip="10.0.0.1")
    assert other.count == 1 and other.iteration == 1
    trainable.delete_checkpoint(os.path.join(path, "checkpoint_state.json"))
    assert not os.path.exists(path)
    trainable.delete_checkpoint(path)  # gone already: nothing happens
    assert os.path.isdir(str(tmp_path))
    trainable.stop()
    other.stop()


def test_reset_keeps_the_trainable_unless_reset_config_says_it_can(tmp_path):
    trainable = Counter()
    trainable.train()
    assert trainable.reset_config({"start": 5}) is False
    assert trainable.reset({"increment": 2}) is False
    assert trainable.config == {"increment": 2} and trainable.iteration == 1

    class Resettable(Counter):
        def reset_config(self, new_config):
            self.count = new_config.get("start", 0)
            return True

    resettable = Resettable()
    resettable.train()
    logdir = str(tmp_path / "new_logs")
    os.makedirs(logdir)
    from corral.tune.logger import UnifiedLogger

    assert resettable.reset({"start": 7}, logger_creator=lambda c: UnifiedLogger(c, logdir))
    result = resettable.train()
    assert result["count"] == 8 and result["training_iteration"] == 1
    assert resettable.logdir == logdir
    with open(os.path.join(logdir, "result.json")) as f:
        assert json.loads(f.readline())["count"] == 8
    trainable.stop()
    resettable.stop()


def test_trial_resources_inside_tune_run(tmp_path):
    seen = []

    class Sees(Counter):
        def step(self):
            seen.append(self.trial_resources)
            return super().step()

    tune.run(
        Sees,
        stop={"count": 1},
        resources_per_trial={"cpu": 2},
        local_dir=str(tmp_path),
        verbose=0,
    )
    assert seen[0].required_resources == {"CPU": 2}
    seen.clear()
    tune.run(Sees, stop={"count": 1}, local_dir=str(tmp_path), verbose=0)
    assert seen[0].bundles == [{"CPU": 1}]


# -- 4. schedulers ---------------------------------------------------------------------


def test_asha_save_and_restore_as_json(tmp_path):
    def feed(scheduler, trials, values):
        return [
            scheduler.on_trial_result(None, t, {"training_iteration": 1, "loss": v})
            for t, v in zip(trials, values)
        ]

    scheduler = AsyncHyperBandScheduler(
        metric="loss", mode="min", max_t=9, reduction_factor=3, brackets=2, seed=1
    )
    trials = [Trial("T", {}, f"t{i}") for i in range(4)]
    for trial in trials:
        scheduler.on_trial_add(None, trial)
    feed(scheduler, trials[:2], [1.0, 2.0])
    path = str(tmp_path / "asha.json")
    scheduler.save(path)
    with open(path) as f:
        assert json.load(f)["num_stopped"] == scheduler._num_stopped
    restored = AsyncHyperBandScheduler()
    restored.restore(path)
    assert restored.metric == "loss" and restored._max_t == 9
    assert feed(restored, trials[2:], [0.5, 3.0]) == feed(scheduler, trials[2:], [0.5, 3.0])
    assert restored.debug_string() == scheduler.debug_string()
    assert restored._rng.random() == scheduler._rng.random()
    (tmp_path / "bad.json").write_text('{"format_version": 1}')
    with pytest.raises(ValueError, match="not a state"):
        restored.restore(str(tmp_path / "bad.json"))
    assert restored.metric == "loss"  # unchanged


def test_pbt_reset_stats_and_last_scores():
    pbt = PopulationBasedTraining(
        metric="score", mode="min", perturbation_interval=1, hyperparam_mutations={"lr": [1, 2]}
    )
    trials = [Trial("T", {"lr": 1}, f"t{i}") for i in range(3)]
    runner = type("Runner", (), {"get_trials": lambda self: trials})()
    for trial in trials:
        pbt.on_trial_add(runner, trial)
    trials[2].status = "TERMINATED"
    for trial, score in zip(trials, [3.0, 1.0, 2.0]):
        pbt._state[trial.trial_id].last_score = -score  # as a result at a perturbation
    assert pbt.last_scores(trials) == [-3.0, -1.0]
    pbt._num_checkpoints, pbt._num_perturbations = 4, 2
    pbt.reset_stats()
    assert "0 checkpoints, 0 perturbs" in pbt.debug_string()


# -- 5. stoppers and other names -------------------------------------------------------


def test_stoppers_stop_trials_and_the_experiment(tmp_path):
    analysis = tune.run(
        Counter, stop=MaximumIterationStopper(3), local_dir=str(tmp_path), verbose=0
    )
    assert analysis.trials[0].last_result["training_iteration"] == 3

    class AfterFour(Stopper):
        def __init__(self):
            self.results = 0

        def __call__(self, trial_id, result):
            self.results += 1
            return False

        def stop_all(self):
            return self.results >= 4

    analysis = tune.run(
        Counter,
        config={"start": tune.grid_search([0, 10, 20])},
        stop=CombinedStopper(AfterFour(), MaximumIterationStopper(3)),
        checkpoint_at_end=True,
        local_dir=str(tmp_path),
        verbose=0,
    )
    iterations = [t.last_result.get("training_iteration") for t in analysis.trials]
    assert iterations == [3, 1, None]
    assert [t.status for t in analysis.trials] == ["TERMINATED"] * 3
    assert analysis.trials[1].checkpoint is not None  # stopped as at its end


def test_stopper_rules():
    plateau = TrialPlateauStopper("loss", std=0.1, num_results=3, grace_period=3)
    assert [plateau("a", {"loss": v}) for v in (5.0, 1.0, 1.0, 1.0)] == [False] * 3 + [True]
    assert plateau("b", {"loss": 1.0}) is False and plateau.stop_all() is False
    threshold = TrialPlateauStopper(
        "loss", num_results=2, grace_period=2, metric_threshold=0.5, mode="min"
    )
    assert [threshold("a", {"loss": 1.0}) for _ in range(3)] == [False] * 3
    with pytest.raises(ValueError, match="mode"):
        TrialPlateauStopper("loss", metric_threshold=1.0)
    experiment = ExperimentPlateauStopper("loss", std=0.01, top=2, mode="min", patience=2)
    assert [experiment("a", {"loss": v}) for v in (3.0, 1.0, 1.0, 1.0)] == [
        False,
        False,
        False,
        True,
    ]
    with pytest.raises(ValueError, match="top"):
        ExperimentPlateauStopper("loss", top=1)
    timeout = TimeoutStopper(0.0)
    assert timeout("a", {}) is False and timeout.stop_all() is True
    with pytest.raises(ValueError, match="timeout"):
        TimeoutStopper("soon")
    assert NoopStopper()("a", {}) is False and NoopStopper().stop_all() is False
    function = FunctionStopper(lambda trial_id, result: result["x"] > 1)
    assert function("a", {"x": 2}) is True and function.stop_all() is False
    assert FunctionStopper.is_valid_function(lambda t, r: False)
    assert not FunctionStopper.is_valid_function(NoopStopper())

    class Looks:
        def __call__(self, trial_id, result):
            return False

        def stop_all(self):
            return False

    with pytest.raises(ValueError, match="Stopper"):
        FunctionStopper.is_valid_function(Looks())
    assert tune.Stopper is Stopper


def test_with_parameters_passes_objects_to_functions_and_classes(tmp_path):
    data = {"rows": [3, 4]}

    def train_fn(config, checkpoint_dir=None, data=None):
        tune.report(total=sum(data["rows"]) * config["scale"], had_dir=checkpoint_dir is None)

    analysis = tune.run(
        tune.with_parameters(train_fn, data=data),
        config={"scale": 2},
        local_dir=str(tmp_path),
        verbose=0,
    )
    assert analysis.trials[0].last_result["total"] == 14

    class WithData(Counter):
        def setup(self, config, data=None):
            super().setup(config)
            self.count = sum(data["rows"])

    analysis = tune.run(
        tune.with_parameters(WithData, data=data),
        stop={"training_iteration": 1},
        local_dir=str(tmp_path),
        verbose=0,
    )
    assert analysis.trials[0].last_result["count"] == 8
    with pytest.raises(ValueError, match="takes no"):
        tune.with_parameters(Counter, data=data)
    with pytest.raises(ValueError, match="function trainable or a Trainable"):
        tune.with_parameters(42, data=data)


def test_placement_group_factory_is_a_resources_per_trial(tmp_path):
    request = tune.PlacementGroupFactory([{"CPU": 1}, {"CPU": 2}])
    assert request.required_resources == {"CPU": 3}
    analysis = tune.run(
        Counter,
        stop={"count": 1},
        resources_per_trial=request,
        local_dir=str(tmp_path),
        verbose=0,
    )
    assert math.isclose(analysis.trials[0].last_result["count"], 1)
