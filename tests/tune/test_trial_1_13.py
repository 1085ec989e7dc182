"""Ray Tune 1.13's ``Trial`` API in corral's embedded runner, and the deprecated
``tune`` names (``track``, ``durable``, ``DurableTrainable``, ``make_checkpoint_dir``,
``save_checkpoint``)."""

from __future__ import annotations

import json
import os

import pytest

from corral import tune
from corral.tune.trial import Location, Trial


class _Counter(tune.Trainable):
    def setup(self, config):
        self.n = 0

    def step(self):
        self.n += 1
        return {"score": self.n}

    def save_checkpoint(self, checkpoint_dir):
        return {"n": self.n}

    def load_checkpoint(self, checkpoint):
        self.n = checkpoint["n"]


class _Seen(tune.Callback):
    def __init__(self):
        self.seen = []

    def on_trial_result(self, iteration, trials, trial, result, **info):
        self.seen.append(
            (
                trial.should_stop(result),
                trial.should_checkpoint(),
                trial.has_reported_at_least_once,
                trial.runner is not None,
                trial.node_ip,
                trial.start_time is not None,
            )
        )


def test_trial_defaults_and_ids():
    trial = Trial("PPO")
    assert trial.config == {} and len(trial.trial_id) == 8
    assert Trial.generate_id() != Trial.generate_id()
    assert not trial.has_reported_at_least_once and trial.node_ip is None
    assert trial.remote_checkpoint_dir is None and trial.uses_cloud_checkpointing is False
    assert not trial.is_saving and not trial.is_restoring and not trial.has_checkpoint()
    assert repr(trial) == str(trial) == f"PPO_{trial.trial_id}"
    again = Trial("PPO", {"lr": 1}, "abc", experiment_tag="0_lr=1").reset()
    assert again.trial_id != "abc" and again.config == {"lr": 1}
    assert again.experiment_tag == "0_lr=1" and again.status == Trial.PENDING


def test_settings_of_tune_run_are_refused_on_the_trial():
    Trial("T", checkpoint_freq=0, max_failures=0, log_to_file=False, export_formats=[])
    with pytest.raises(ValueError, match=r"tune.run\(checkpoint_freq=...\)"):
        Trial("T", checkpoint_freq=5)
    with pytest.raises(ValueError, match=r"tune.run\(stop=...\)"):
        Trial("T", stopping_criterion={"score": 3})
    with pytest.raises(ValueError, match="not built"):
        Trial("T", remote_checkpoint_dir="s3://bucket")
    with pytest.raises(TypeError, match="bogus"):
        Trial("T", bogus=1)


def test_setters_failures_and_checkpoints(tmp_path):
    trial = Trial("T", {}, "t0", local_dir=str(tmp_path), experiment_tag="1_x=2")
    trial.init_logdir()
    assert os.path.dirname(trial.logdir) == str(tmp_path) and os.path.isdir(trial.logdir)
    trial.set_status(Trial.RUNNING)
    assert trial.start_time is not None
    trial.set_config({"a": 1})
    trial.set_experiment_tag("2_x=3")
    trial.set_location(Location("10.0.0.1", 42))
    assert (trial.config, trial.experiment_tag, trial.node_ip) == ({"a": 1}, "2_x=3", "10.0.0.1")
    trial.write_error_log()  # nothing
    assert trial.num_failures == 0 and trial.should_recover() is False
    trial.write_error_log(RuntimeError("boom"))
    assert trial.num_failures == 1
    with open(trial.error_file, encoding="utf-8") as f:
        assert "boom" in f.read()
    trial.update_last_result({"training_iteration": 1, "score": 2.0})
    trial.on_checkpoint(str(tmp_path / "checkpoint_000001"))
    assert trial.has_checkpoint() and trial.checkpoints[-1][1]["score"] == 2.0
    trial.clear_checkpoint()
    assert not trial.has_checkpoint()
    state = json.loads(trial.get_json_state())
    assert state["trial_id"] == "t0" and state["num_failures"] == 1
    with pytest.raises(RuntimeError, match="not restoring"):
        trial.on_restore()
    with pytest.raises(NotImplementedError, match="resources_per_trial"):
        Trial("T").update_resources({"cpu": 2})
    with pytest.raises(ValueError, match="while Trial is running"):
        trial.update_resources({"cpu": 2})
    assert Trial("T", stub=True).get_trainable_cls() is None
    tune.register_trainable("_trial_1_13_counter", _Counter)
    assert Trial("_trial_1_13_counter").get_trainable_cls() is _Counter


def test_a_running_trial_reads_tune_runs_settings(tmp_path):
    seen = _Seen()
    analysis = tune.run(
        _Counter,
        stop={"score": 3},
        checkpoint_freq=2,
        max_failures=2,
        local_dir=str(tmp_path),
        callbacks=[seen],
    )
    (trial,) = analysis.trials
    assert trial.stopping_criterion == {"score": 3}
    assert (trial.checkpoint_freq, trial.max_failures) == (2, 2) and trial.should_recover()
    stops, checkpoints, reported, built, ips, started = zip(*seen.seen)
    assert stops == (False, False, True) and checkpoints == (False, True, False)
    assert all(reported) and all(built) and all(started) and ips[0] is not None
    assert trial.runner is None  # its trainable was stopped
    assert trial.has_checkpoint() and trial.checkpoints[-1][1]["training_iteration"] == 2


def test_deprecated_tune_names():
    from corral.tune import (
        DurableTrainable,
        durable,
        make_checkpoint_dir,
        save_checkpoint,
        track,
    )

    with pytest.raises(DeprecationWarning, match="durable"):
        durable(_Counter)
    with pytest.raises(DeprecationWarning, match="DurableTrainable"):
        DurableTrainable()
    with pytest.raises(DeprecationWarning, match="checkpoint_dir"):
        make_checkpoint_dir(1)
    with pytest.raises(DeprecationWarning, match="checkpoint_dir"):
        save_checkpoint("x")
    with pytest.raises(DeprecationWarning, match="tune.report"):
        track.log(score=1)
