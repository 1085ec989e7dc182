"""``corral train --scheduler NAME --scheduler-config JSON`` and ``--resume``: the
experiment runs through ``tune.run``, as ``rllib train`` 1.13 ran it through Ray Tune."""

from __future__ import annotations

import json

import pytest

from corral import cli, tune
from corral.cli import common as cli_common
from corral.tune import Trainable
from corral.tune.experiment_state import STATE_FILE

SMALL_PPO = {
    "num_workers": 0,
    "train_batch_size": 128,
    "rollout_fragment_length": 64,
    "sgd_minibatch_size": 64,
    "num_sgd_iter": 1,
    "model": {"fcnet_hiddens": [16]},
}


class CliCounter(Trainable):
    """Adds `lr` to its score each iteration; raises KeyboardInterrupt (a Ctrl-C) in the
    step that would reach `interrupt_at` = (lr, iteration)."""

    interrupt_at: tuple | None = None
    built: list = []

    def setup(self, config):
        CliCounter.built.append(config["lr"])
        self.score = 0.0

    def step(self):
        if CliCounter.interrupt_at == (self.config["lr"], self.iteration + 1):
            raise KeyboardInterrupt
        self.score += self.config["lr"]
        return {"score": self.score, "episode_reward_mean": self.score}

    def save_checkpoint(self, checkpoint_dir):
        return {"score": self.score}

    def load_checkpoint(self, checkpoint):
        self.score = checkpoint["score"]


@pytest.fixture
def counter(monkeypatch):
    """`--run CliCounter` trains `CliCounter` (registered with tune, known to the CLI)."""
    monkeypatch.setattr(CliCounter, "interrupt_at", None)
    monkeypatch.setattr(CliCounter, "built", [])
    tune.register_trainable("CliCounter", CliCounter)
    real = cli_common.get_trainer_class
    monkeypatch.setattr(
        cli_common,
        "get_trainer_class",
        lambda name: CliCounter if name == "CliCounter" else real(name),
    )
    return CliCounter


def _counter_args(tmp_path, *extra):
    return [
        "train",
        "--run",
        "CliCounter",
        "--env",
        "CartPole-v1",
        "--config",
        '{"lr": {"grid_search": [1.0, 2.0]}}',
        "--stop",
        '{"training_iteration": 3}',
        "--checkpoint-freq",
        "1",
        "--local-dir",
        str(tmp_path),
        "--experiment-name",
        "exp",
        "--no-progress",
        *extra,
    ]


def _saved(tmp_path):
    return json.loads((tmp_path / "exp" / STATE_FILE).read_text())["trials"]


def test_scheduler_flags_train_ppo_through_tune_run(tmp_path, capsys):
    argv = [
        "train",
        "--run",
        "PPO",
        "--env",
        "CartPole-v1",
        "--config",
        json.dumps({**SMALL_PPO, "lr": {"grid_search": [1e-3, 1e-2]}}),
        "--stop",
        '{"training_iteration": 2}',
        "--scheduler",
        "ASHA",
        "--scheduler-config",
        '{"metric": "episode_reward_mean", "mode": "max", "max_t": 2, "grace_period": 1}',
        "--local-dir",
        str(tmp_path),
        "--experiment-name",
        "asha",
        "--checkpoint-at-end",
    ]
    assert cli.main(argv) == 0
    out, err = capsys.readouterr()
    saved = json.loads((tmp_path / "asha" / STATE_FILE).read_text())["trials"]
    assert [row["status"] for row in saved] == ["TERMINATED", "TERMINATED"]
    assert [row["evaluated_params"] for row in saved] == [{"lr": 1e-3}, {"lr": 1e-2}]
    for row in saved:
        assert row["checkpoint"].startswith(row["logdir"] + "/checkpoint_")
        assert f"Trial PPO_{row['trial_id']}" in out
    assert out.count("Training finished after") == 2
    assert "0_lr=0.001: iter 1" in err and "1_lr=0.01: iter 1" in err


def test_resume_flag_goes_on_with_an_interrupted_experiment(counter, tmp_path, capsys):
    # With nothing to resume, --resume starts the experiment (through tune.run).
    counter.interrupt_at = (2.0, 2)
    assert cli.main(_counter_args(tmp_path, "--resume")) == 130
    err = capsys.readouterr().err
    assert "holds no experiment to resume; starting it" in err
    assert "`corral train ... --resume`" in err
    assert [row["status"] for row in _saved(tmp_path)] == ["TERMINATED", "RUNNING"]

    counter.interrupt_at = None
    counter.built = []
    assert cli.main(_counter_args(tmp_path, "--resume")) == 0
    out = capsys.readouterr().out
    # The finished trial was not trained again; the interrupted one went on from its
    # checkpoint of iteration 1 to iteration 3.
    assert counter.built == [2.0]
    saved = _saved(tmp_path)
    assert [row["last_result"]["score"] for row in saved] == [3.0, 6.0]
    assert out.count("Training finished after 3 iterations") == 2
    # Another config does not resume it.
    argv = _counter_args(tmp_path, "--resume")
    argv[argv.index("--config") + 1] = '{"lr": {"grid_search": [1.0, 2.0, 3.0]}}'
    assert cli.main(argv) == 2
    assert "it holds 2 trials, this call's config and num_samples make 3" in capsys.readouterr().err


def test_synchronous_pbt_from_the_command_line(counter, tmp_path, capsys):
    config = {
        "metric": "score",
        "mode": "max",
        "time_attr": "training_iteration",
        "perturbation_interval": 1,
        "hyperparam_mutations": {"lr": [1.0, 2.0]},
        "quantile_fraction": 0.5,
        "resample_probability": 0.0,
        "synch": True,
    }
    argv = _counter_args(tmp_path, "--scheduler", "pbt", "--scheduler-config", json.dumps(config))
    assert cli.main(argv) == 0
    rows = [json.loads(line) for line in (tmp_path / "exp" / "pbt_global.txt").open()]
    # The weaker trial took the stronger one's state at each synchronised iteration.
    assert [(row["iteration"], row["target_iteration"]) for row in rows] == [(1, 1), (2, 2)]
    assert [row["last_result"]["training_iteration"] for row in _saved(tmp_path)] == [3, 3]


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (("--scheduler", "bohb"), "Unknown scheduler 'bohb'"),
        (("--scheduler", "asha"), "--scheduler asha needs a metric and a mode"),
        (
            ("--scheduler", "asha", "--scheduler-config", '{"metric": "score", "bad": 1}'),
            "unexpected keyword argument 'bad'",
        ),
        (("--scheduler-config", '{"metric": "score"}'), "--scheduler FIFO"),
    ],
)
def test_scheduler_and_resume_mistakes_are_usage_errors(counter, tmp_path, capsys, extra, message):
    assert cli.main(_counter_args(tmp_path, *extra)) == 2
    assert message in capsys.readouterr().err
    assert counter.built == []
