"""Search spaces, checkpoint keeping and the analysis helpers of `corral.tune.run`."""

import os

import pytest

from corral import tune
from corral.tune import Trainable


@pytest.fixture(autouse=True)
def results_dir(tmp_path_factory, monkeypatch):
    monkeypatch.setenv("CORRAL_RESULTS_DIR", str(tmp_path_factory.mktemp("results")))


class Score(Trainable):
    """Reports `score`, which follows the config's `curve` (a list) iteration by iteration."""

    def setup(self, config):
        self.curve = config.get("curve", [1, 2, 3])

    def step(self):
        return {"score": self.curve[self.iteration % len(self.curve)]}

    def save_checkpoint(self, checkpoint_dir):
        return {"iteration": self.iteration}

    def load_checkpoint(self, checkpoint):
        pass


def test_domains_are_drawn_per_trial_and_grid_combinations_repeat(tmp_path):
    analysis = tune.run(
        Score,
        config={
            "lr": tune.loguniform(1e-4, 1e-1),
            "gamma": tune.choice([0.9, 0.99]),
            "batch": tune.randint(16, 32),
            "clip": tune.uniform(0.1, 0.3),
            "double_lr": tune.sample_from(lambda spec: spec.config.lr * 2),
            "mode": tune.grid_search(["a", "b"]),
        },
        num_samples=3,
        stop={"training_iteration": 1},
        local_dir=str(tmp_path),
        verbose=0,
        seed=0,
    )
    configs = [t.config for t in analysis.trials]
    assert len(configs) == 6 and [c["mode"] for c in configs] == ["a", "b"] * 3
    for c in configs:
        assert 1e-4 <= c["lr"] <= 1e-1 and c["gamma"] in (0.9, 0.99)
        assert 16 <= c["batch"] < 32 and 0.1 <= c["clip"] <= 0.3
        assert c["double_lr"] == pytest.approx(2 * c["lr"])
    assert len({c["lr"] for c in configs}) == 6  # a fresh draw for every trial


def test_draws_follow_the_seed(tmp_path):
    def lrs(seed):
        analysis = tune.run(
            Score,
            config={"lr": tune.uniform(0, 1)},
            num_samples=2,
            stop={"training_iteration": 1},
            local_dir=str(tmp_path),
            verbose=0,
            seed=seed,
        )
        return [t.config["lr"] for t in analysis.trials]

    assert lrs(3) == lrs(3) != lrs(4)


def test_bad_domains_are_named():
    with pytest.raises(ValueError, match="loguniform"):
        tune.loguniform(0, 1)
    with pytest.raises(ValueError, match="choice"):
        tune.choice([])


def test_keep_checkpoints_num_keeps_the_best_and_the_newest(tmp_path):
    analysis = tune.run(
        Score,
        config={"curve": [5, 1, 9, 2, 3]},  # scores of iterations 1..5
        stop={"training_iteration": 5},
        checkpoint_freq=1,
        keep_checkpoints_num=2,
        checkpoint_score_attr="score",
        local_dir=str(tmp_path),
        verbose=0,
    )
    [trial] = analysis.trials
    kept = sorted(os.path.basename(p) for p, _ in trial.checkpoints)
    # Best two by score: iterations 1 (5) and 3 (9); the newest (5) is never deleted.
    assert kept == ["checkpoint_000001", "checkpoint_000003", "checkpoint_000005"]
    on_disk = sorted(f for f in os.listdir(trial.logdir) if f.startswith("checkpoint_"))
    assert on_disk == kept
    assert os.path.basename(analysis.get_best_checkpoint(trial, "score", "max")) == (
        "checkpoint_000003"
    )
    # Without a metric (none given to tune.run either): Tune 1.13's "training_iteration".
    assert os.path.basename(analysis.get_best_checkpoint(trial, mode="max")) == (
        "checkpoint_000005"
    )


def test_min_prefix_ranks_the_lowest_best(tmp_path):
    analysis = tune.run(
        Score,
        config={"curve": [5, 1, 9, 2]},
        stop={"training_iteration": 4},
        checkpoint_freq=1,
        keep_checkpoints_num=1,
        checkpoint_score_attr="min-score",
        local_dir=str(tmp_path),
        verbose=0,
    )
    kept = sorted(os.path.basename(p) for p, _ in analysis.trials[0].checkpoints)
    assert kept == ["checkpoint_000002", "checkpoint_000004"]


def test_dataframe_has_a_row_per_trial(tmp_path):
    pandas = pytest.importorskip("pandas", reason="ExperimentAnalysis.dataframe needs pandas")
    analysis = tune.run(
        Score,
        config={"curve": tune.grid_search([[1, 7, 2], [3, 4, 5]])},
        stop={"training_iteration": 3},
        local_dir=str(tmp_path),
        verbose=0,
    )
    frame = analysis.dataframe()
    assert isinstance(frame, pandas.DataFrame) and list(frame["score"]) == [2, 5]
    assert list(analysis.dataframe(metric="score", mode="max")["score"]) == [7, 5]
