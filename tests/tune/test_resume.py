"""``tune.run(resume=...)``: a run stopped part-way (Ctrl-C, a crash, its time budget)
goes on from ``experiment_state.json`` and its trials' checkpoints."""

from __future__ import annotations

import json
import os

import pytest

from corral import tune
from corral.tune import Trainable
from corral.tune.experiment_state import STATE_FILE


class Counter(Trainable):
    """Adds `lr` to its score each iteration. While `Counter.interrupt_at` is set, the
    step that would reach that iteration raises KeyboardInterrupt (a Ctrl-C of the run)."""

    interrupt_at: tuple | None = None  # (lr, iteration)
    fail_lr: float | None = None  # this lr's trial raises (a failure of its own)
    built: list = []

    def setup(self, config):
        Counter.built.append(config["lr"])
        self.score = 0.0

    def step(self):
        if Counter.interrupt_at == (self.config["lr"], self.iteration + 1):
            raise KeyboardInterrupt
        if Counter.fail_lr == self.config["lr"]:
            raise RuntimeError("a failure of its own")
        self.score += self.config["lr"]
        return {"score": self.score}

    def save_checkpoint(self, checkpoint_dir):
        return {"score": self.score}

    def load_checkpoint(self, checkpoint):
        self.score = checkpoint["score"]


@pytest.fixture(autouse=True)
def _reset(monkeypatch):
    monkeypatch.setattr(Counter, "interrupt_at", None)
    monkeypatch.setattr(Counter, "fail_lr", None)
    monkeypatch.setattr(Counter, "built", [])


def _run(tmp_path, config=None, **kwargs):
    options = {
        "config": config or {"lr": tune.grid_search([1.0, 2.0, 3.0])},
        "stop": {"training_iteration": 4},
        "checkpoint_freq": 1,
        "local_dir": str(tmp_path),
        "name": "exp",
        "verbose": 0,
        **kwargs,
    }
    return tune.run(Counter, **options)


def _saved(tmp_path) -> list[dict]:
    with open(tmp_path / "exp" / STATE_FILE) as f:
        return json.load(f)["trials"]


def test_an_interrupted_run_resumes_where_it_stopped(tmp_path):
    # The first trial finishes; Ctrl-C comes in the second trial's 3rd iteration (after
    # its checkpoint of iteration 2); the third never starts.
    Counter.interrupt_at = (2.0, 3)
    with pytest.raises(KeyboardInterrupt):
        _run(tmp_path)
    saved = _saved(tmp_path)
    assert [t["status"] for t in saved] == ["TERMINATED", "RUNNING", "PENDING"]
    assert saved[1]["checkpoint"].endswith("checkpoint_000002")

    Counter.interrupt_at = None
    Counter.built = []
    analysis = _run(tmp_path, resume=True)
    second = analysis.trials[1]
    # The finished trial is not run again; the interrupted one goes on from its
    # checkpoint of iteration 2, in its own folder with its own id; the third starts.
    assert Counter.built == [2.0, 3.0]
    assert [t.status for t in analysis.trials] == ["TERMINATED"] * 3
    assert [t.last_result["score"] for t in analysis.trials] == [4.0, 8.0, 12.0]
    assert second.last_result["training_iteration"] == 4
    assert second.trial_id == saved[1]["trial_id"]
    assert os.path.relpath(second.logdir, tmp_path / "exp") == saved[1]["logdir"]
    with open(os.path.join(second.logdir, "result.json")) as f:
        iterations = [json.loads(line)["training_iteration"] for line in f]
    assert iterations == [1, 2, 3, 4]
    assert analysis.get_best_trial("score", "max").config["lr"] == 3.0

    # A finished experiment resumed again runs nothing.
    Counter.built = []
    again = _run(tmp_path, resume=True)
    assert Counter.built == []
    assert [t.last_result["score"] for t in again.trials] == [4.0, 8.0, 12.0]


def test_errored_trials_stay_errored_unless_errored_only(tmp_path):
    Counter.fail_lr = 2.0
    analysis = _run(tmp_path, raise_on_failed_trial=False)
    assert [t.status for t in analysis.trials] == ["TERMINATED", "ERROR", "TERMINATED"]

    Counter.fail_lr = None
    Counter.built = []
    analysis = _run(tmp_path, resume=True, raise_on_failed_trial=False)
    assert Counter.built == []
    assert [t.status for t in analysis.trials] == ["TERMINATED", "ERROR", "TERMINATED"]

    analysis = _run(tmp_path, resume="ERRORED_ONLY")
    assert Counter.built == [2.0]
    assert [t.status for t in analysis.trials] == ["TERMINATED"] * 3
    assert analysis.trials[1].last_result["score"] == 8.0


def test_drawn_values_come_back_from_the_state(tmp_path):
    config = {"lr": tune.uniform(1.0, 2.0), "mode": tune.choice(["a", "b", "c"])}
    Counter.interrupt_at = None
    first = _run(tmp_path, config=config, num_samples=2, seed=1, stop={"training_iteration": 1})
    drawn = [(t.config["lr"], t.config["mode"]) for t in first.trials]
    # Resuming draws afresh (another seed), then takes the saved values back.
    again = _run(
        tmp_path, config=config, num_samples=2, seed=2, resume=True, stop={"training_iteration": 1}
    )
    assert [(t.config["lr"], t.config["mode"]) for t in again.trials] == drawn
    assert [t.evaluated_params["lr"] for t in again.trials] == [lr for lr, _ in drawn]


def test_resume_errors(tmp_path):
    with pytest.raises(ValueError, match="holds no experiment_state.json"):
        _run(tmp_path, resume=True)
    analysis = _run(tmp_path, resume="AUTO", stop={"training_iteration": 1})
    assert len(analysis.trials) == 3
    with pytest.raises(ValueError, match="holds 3 trials, this call's config"):
        _run(tmp_path, config={"lr": tune.grid_search([1.0, 2.0])}, resume=True)
    with pytest.raises(ValueError, match="does not give"):
        _run(tmp_path, config={"lr": tune.grid_search([1.0, 2.0, 5.0])}, resume=True)
    with pytest.raises(NotImplementedError, match="resume='REMOTE'"):
        _run(tmp_path, resume="REMOTE")
    with pytest.raises(ValueError, match="resume must be"):
        _run(tmp_path, resume="sometimes")


def test_a_state_file_pointing_outside_the_experiment_is_not_followed(tmp_path):
    _run(tmp_path, stop={"training_iteration": 1})
    path = tmp_path / "exp" / STATE_FILE
    state = json.loads(path.read_text())
    state["trials"][0]["status"] = "PENDING"
    state["trials"][0]["checkpoint"] = "../../elsewhere/checkpoint_000001"
    path.write_text(json.dumps(state))
    Counter.built = []
    analysis = _run(tmp_path, resume=True, stop={"training_iteration": 2})
    # The path was dropped: the trial started afresh (it did not restore from outside);
    # the finished ones were not run again.
    assert Counter.built == [1.0]
    assert analysis.trials[0].last_result["score"] == 2.0
