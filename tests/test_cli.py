"""The `corral` command line: parsing, error paths, experiment files, one real train+evaluate."""

from __future__ import annotations

import io
import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest

from corral import cli
from corral.cli import common as cli_common
from corral.tune.result import (
    DONE,
    EPISODE_REWARD_MAX,
    EPISODE_REWARD_MEAN,
    EPISODE_REWARD_MIN,
    EVALUATION,
    EXPR_RESULT_FILE,
    TIME_THIS_ITER_S,
    TIME_TOTAL_S,
    TIMESTEPS_THIS_ITER,
    TIMESTEPS_TOTAL,
    TRAINER_RESULT_KEYS,
    TRAINING_ITERATION,
)

REPO = Path(__file__).resolve().parents[1]
CARTPOLE_YAML = REPO / "tuned_examples" / "ppo" / "cartpole-ppo.yaml"
SMALL_PPO = {
    "num_workers": 0,
    "train_batch_size": 256,
    "rollout_fragment_length": 64,
    "sgd_minibatch_size": 64,
    "num_sgd_iter": 2,
}


@pytest.fixture(autouse=True)
def results_dir(tmp_path, monkeypatch):
    """Keeps every trial folder out of $HOME."""
    path = tmp_path / "default_results"
    monkeypatch.setenv("CORRAL_RESULTS_DIR", str(path))
    return path


def train_args(*extra: str) -> list[str]:
    return ["train", "--run", "PPO", "--env", "CartPole-v1", *extra]


def specs_of(argv: list[str]) -> list[cli.TrainSpec]:
    return cli.train_specs(cli.build_parser().parse_args(argv))


# -- parsing and usage errors ------------------------------------------------------------


def test_help_does_not_import_torch():
    code = (
        "import sys; from corral.cli import main; rc = main(['--help']); "
        "assert rc == 0, rc; assert 'torch' not in sys.modules, 'torch imported'; "
        "assert 'numpy' not in sys.modules, 'numpy imported'"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    assert "train" in proc.stdout and "evaluate" in proc.stdout


def test_no_subcommand_is_a_usage_error(capsys):
    assert cli.main([]) == 2
    assert "required" in capsys.readouterr().err


@pytest.mark.parametrize("flag", ["--config", "--stop"])
def test_invalid_json_exits_2_with_message(flag, capsys):
    assert cli.main(train_args(flag, '{"lr": 0.1,')) == 2
    err = capsys.readouterr().err
    assert f"argument {flag}: invalid JSON" in err
    assert "Traceback" not in err


def test_json_that_is_not_an_object_is_rejected(capsys):
    assert cli.main(train_args("--config", "[1, 2]")) == 2
    assert "expected a JSON object" in capsys.readouterr().err


def test_unknown_algorithm_lists_available_ones(capsys):
    assert cli.main(["train", "--run", "PPOO", "--env", "CartPole-v1", "--stop", "{}"]) == 2
    err = capsys.readouterr().err
    assert "Unknown algorithm 'PPOO'" in err
    assert "available" in err and "PPO" in err
    assert "Traceback" not in err


def test_unknown_stop_key_suggests_the_close_one(capsys):
    assert cli.main(train_args("--stop", '{"episode_reward_meen": 100}')) == 2
    err = capsys.readouterr().err
    assert "unknown stop key 'episode_reward_meen'" in err
    assert "did you mean episode_reward_mean" in err


@pytest.mark.parametrize("stop", ['{"training_iteration": "10"}', '{"timesteps_total": true}'])
def test_stop_values_must_be_numbers(stop, capsys):
    assert cli.main(train_args("--stop", stop)) == 2
    assert "must be a number" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["train", "--env", "CartPole-v1"], "no algorithm given"),
        (["train", "--run", "PPO"], "no env given"),
        (train_args("--checkpoint-freq", "-1"), "expected an integer >= 0"),
        (["evaluate", "ckpt", "--episodes", "0"], "expected an integer >= 1"),
        (["evaluate", "ckpt", "--render", "--video-dir", "v"], "not allowed with"),
    ],
)
def test_missing_or_bad_arguments(argv, message, capsys):
    assert cli.main(argv) == 2
    assert message in capsys.readouterr().err


def test_unknown_env_is_reported_without_traceback(capsys):
    argv = train_args("--stop", '{"training_iteration": 1}', "--config", json.dumps(SMALL_PPO))
    argv[argv.index("CartPole-v1")] = "CartPol-v1"
    assert cli.main(argv) == 2
    err = capsys.readouterr().err
    assert "Unknown env 'CartPol-v1'" in err
    assert "Traceback" not in err


def test_default_stop_is_100_iterations_with_a_note(capsys):
    [spec] = specs_of(train_args())
    assert spec.stop == {"training_iteration": 100}
    assert "no stop criterion given" in capsys.readouterr().err


def test_flags_fill_the_spec(tmp_path):
    argv = train_args(
        "--config",
        '{"lr": 0.01}',
        "--seed",
        "3",
        "-vv",
        "--stop",
        '{"evaluation/episode_reward_mean": 100}',
        "--checkpoint-freq",
        "5",
        "--checkpoint-at-end",
        "--local-dir",
        str(tmp_path),
    )
    [spec] = specs_of(argv)
    assert spec.run == "PPO" and spec.env == "CartPole-v1"
    assert spec.config == {"lr": 0.01, "seed": 3, "log_level": "DEBUG"}
    assert spec.stop == {"evaluation/episode_reward_mean": 100}
    assert (spec.checkpoint_freq, spec.checkpoint_at_end) == (5, True)
    assert spec.local_dir == str(tmp_path)


def test_grid_search_and_num_samples_make_one_trial_each(tmp_path):
    config_file = tmp_path / "exp.yaml"
    config_file.write_text(
        "grid:\n  run: PPO\n  env: CartPole-v1\n  num_samples: 2\n"
        "  config:\n    lr:\n      grid_search: [0.01, 0.001]\n    gamma: 0.9\n"
    )
    specs = specs_of(["train", "-f", str(config_file), "--stop", '{"training_iteration": 1}'])
    assert [(s.name, s.config["lr"]) for s in specs] == [
        ("grid_0_lr=0.01", 0.01),
        ("grid_1_lr=0.001", 0.001),
        ("grid_2_lr=0.01", 0.01),
        ("grid_3_lr=0.001", 0.001),
    ]
    # All of them in one experiment folder under --local-dir, as RLlib's trials were.
    assert {s.experiment for s in specs} == {"grid"}
    assert all(s.config["gamma"] == 0.9 for s in specs)
    [one] = specs_of(train_args("--num-samples", "1", "--experiment-name", "mine", "--torch"))
    assert one.name == "mine" and one.config == {"framework": "torch"}


def test_rllib_1_13_train_flags(capsys):
    assert specs_of(train_args("--framework", "tf"))[0].config["framework"] == "tf"
    assert specs_of(train_args("--eager"))[0].config["framework"] == "tf2"
    parser = cli.build_parser()
    args = parser.parse_args(train_args("--ray-num-cpus", "8", "--local-mode"))
    cli.check_rllib_1_13_flags(args)
    assert "--ray-num-cpus, --local-mode have no effect" in capsys.readouterr().err
    for flags, message in [
        (("--max-failures", "3"), "--max-failures 3: Ray Tune's"),
        (("--resources-per-trial", '{"cpus": 2}'), "Unknown resources_per_trial key 'cpus'"),
    ]:
        with pytest.raises(cli_common.UsageError, match=message):
            cli.check_rllib_1_13_flags(parser.parse_args(train_args(*flags)))
    cli.check_rllib_1_13_flags(parser.parse_args(train_args("--max-failures", "0")))


# -- experiment files ------------------------------------------------------------------


def test_tuned_cartpole_example_loads_with_its_settings():
    experiments = cli.load_experiments(str(CARTPOLE_YAML))
    assert list(experiments) == ["cartpole-ppo"]
    spec = experiments["cartpole-ppo"]
    assert (spec["run"], spec["env"]) == ("PPO", "CartPole-v1")
    assert spec["stop"] == {"timesteps_total": 100000, "evaluation/episode_reward_mean": 475}
    config = spec["config"]
    assert config["optimizer"] == {"eps": 1e-5}  # a float, not the string YAML 1.1 makes of 1e-5
    assert config["lr_schedule"] == [[0, 0.0025], [100000, 0.0]]
    assert config["model"] == {
        "fcnet_hiddens": [64, 64],
        "fcnet_activation": "tanh",
        "vf_share_layers": False,
    }
    expected = {
        "num_workers": 0,
        "num_envs_per_worker": 8,
        "rollout_fragment_length": 64,
        "train_batch_size": 512,
        "sgd_minibatch_size": 256,
        "num_sgd_iter": 8,
        "lr": 0.0025,
        "gamma": 0.98,
        "lambda": 0.8,
        "clip_param": 0.2,
        "kl_coeff": 0.0,
        "entropy_coeff": 0.0,
        "vf_loss_coeff": 0.5,
        "vf_clip_param": 10000.0,
        "grad_clip": 0.5,
        "evaluation_interval": 2,
        "evaluation_num_episodes": 10,
        "evaluation_config": {"explore": False},
    }
    assert {k: config[k] for k in expected} == expected


def test_tuned_cartpole_config_is_accepted_by_ppo():
    from corral.agents.ppo import PPOTrainer

    config = cli.load_experiments(str(CARTPOLE_YAML))["cartpole-ppo"]["config"]
    merged = PPOTrainer.merge_trainer_configs(PPOTrainer.get_default_config(), config)
    PPOTrainer._validate_config(merged)
    assert merged["model"]["fcnet_hiddens"] == [64, 64]


def test_explicit_flags_override_the_file():
    argv = [
        "train",
        "-f",
        str(CARTPOLE_YAML),
        "--env",
        "Acrobot-v1",
        "--stop",
        '{"training_iteration": 3}',
        "--config",
        '{"lr": 0.0005, "model": {"fcnet_hiddens": [32]}}',
        "--checkpoint-at-end",
    ]
    [spec] = specs_of(argv)
    assert (spec.name, spec.run, spec.env) == ("cartpole-ppo", "PPO", "Acrobot-v1")
    assert spec.stop == {"training_iteration": 3}
    assert spec.config["lr"] == 0.0005
    assert spec.config["num_sgd_iter"] == 8  # from the file
    # --config is merged into nested dicts, not replacing them.
    assert spec.config["model"] == {
        "fcnet_hiddens": [32],
        "fcnet_activation": "tanh",
        "vf_share_layers": False,
    }
    assert spec.checkpoint_at_end is True


def test_file_values_apply_when_no_flag_is_given(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text(
        "a:\n  run: PPO\n  env: CartPole-v1\n  checkpoint_freq: 2\n  checkpoint_at_end: true\n"
        f"  local_dir: {tmp_path}\n  stop: {{training_iteration: 4}}\n"
        "b:\n  run: PPO\n  config: {env: Pendulum-v1}\n"
    )
    a, b = specs_of(["train", "-f", str(path), "--no-checkpoint-at-end"])
    assert (a.checkpoint_freq, a.checkpoint_at_end, a.local_dir) == (2, False, str(tmp_path))
    assert a.stop == {"training_iteration": 4}
    assert b.env == "Pendulum-v1"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1, 2]", "must map experiment names to specs"),
        ("x: {run: PPO, resume: true}", "unsupported keys ['resume']"),
        ("x: {run: PPO, config: [1]}", "'config' must be a mapping"),
        ("x: {run: PPO, checkpoint_freq: -2}", "'checkpoint_freq' must be an int >= 0"),
        ("x: [unclosed", "is not valid YAML"),
    ],
)
def test_bad_experiment_files(tmp_path, text, message):
    path = tmp_path / "bad.yaml"
    path.write_text(text)
    with pytest.raises(cli.ExperimentFileError, match="bad.yaml") as info:
        cli.load_experiments(str(path))
    assert message in str(info.value)


def test_missing_experiment_file_exits_2(tmp_path, capsys):
    assert cli.main(["train", "-f", str(tmp_path / "nope.yaml")]) == 2
    assert "cannot read experiment file" in capsys.readouterr().err


# -- stop criteria and progress --------------------------------------------------------


def test_stop_criteria_follow_nested_keys_and_ignore_nan():
    stop = {"evaluation/episode_reward_mean": 100, "timesteps_total": 1000}
    assert not cli.should_stop(stop, {"timesteps_total": 10})
    assert not cli.should_stop(stop, {"timesteps_total": 10, "evaluation": {}})
    assert cli.should_stop(
        stop, {"timesteps_total": 10, "evaluation": {"episode_reward_mean": 100}}
    )
    assert cli.should_stop(stop, {"timesteps_total": 1000})
    assert not cli.should_stop({"episode_reward_mean": 0}, {"episode_reward_mean": math.nan})
    assert cli.should_stop({}, {"done": True})


def test_progress_is_one_line_per_iteration_off_a_terminal():
    stream = io.StringIO()
    display = cli.ProgressDisplay(stream)
    for i in (1, 2):
        display.update(fake_result(i))
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[1] == (
        "iter 2 | steps 2,000 | reward 20.0 [2.0, 40.0] | eval 30.0 | 500 steps/s | 0:01:05"
    )


class FakeTerminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_rewrites_one_line_on_a_terminal():
    stream = FakeTerminal()
    display = cli.ProgressDisplay(stream)
    display.update(fake_result(1))
    display.update(fake_result(2))
    display.message("Checkpoint saved: x")
    text = stream.getvalue()
    assert text.count("\r") == 2 and text.count("\n") == 2
    assert text.endswith("\nCheckpoint saved: x\n")


def test_no_progress_shows_nothing():
    stream = FakeTerminal()
    cli.ProgressDisplay(stream, enabled=False).update(fake_result(1))
    assert stream.getvalue() == ""


def fake_result(iteration: int, reward: float | None = None) -> dict:
    reward = 10.0 * iteration if reward is None else reward
    return {
        TRAINING_ITERATION: iteration,
        TIMESTEPS_TOTAL: 1000 * iteration,
        TIMESTEPS_THIS_ITER: 1000,
        TIME_THIS_ITER_S: 2.0,
        TIME_TOTAL_S: 65.0,
        EPISODE_REWARD_MEAN: reward,
        EPISODE_REWARD_MIN: 1.0 * iteration,
        EPISODE_REWARD_MAX: 20.0 * iteration,
        EVALUATION: {EPISODE_REWARD_MEAN: 15.0 * iteration},
        DONE: False,
    }


# -- the training loop, with a stand-in trainer --------------------------------------------


class ScriptedTrainer:
    """Plays back results; raises KeyboardInterrupt at `interrupt_at` like a Ctrl-C would."""

    instances: list[ScriptedTrainer] = []
    interrupt_at: int | None = None

    def __init__(self, config, env, logger_creator=None):
        self.config = {"evaluation_interval": 1, **config}
        self.logdir = logger_creator(config).logdir if logger_creator else "/nowhere"
        self.iteration = 0
        self.saved: list[str] = []
        self.stopped = False
        ScriptedTrainer.instances.append(self)

    def train(self) -> dict:
        if self.iteration + 1 == self.interrupt_at:
            raise KeyboardInterrupt
        self.iteration += 1
        return fake_result(self.iteration, reward=math.nan if self.iteration == 1 else None)

    def save(self) -> str:
        self.saved.append(os.path.join(self.logdir, f"checkpoint_{self.iteration:06d}"))
        return self.saved[-1]

    def stop(self) -> None:
        self.stopped = True


@pytest.fixture
def scripted(monkeypatch):
    ScriptedTrainer.instances = []
    ScriptedTrainer.interrupt_at = None
    monkeypatch.setattr(cli_common, "get_trainer_class", lambda name: ScriptedTrainer)
    return ScriptedTrainer


def test_training_stops_at_the_criterion_and_checkpoints(scripted, tmp_path, capsys):
    argv = train_args(
        "--stop",
        '{"evaluation/episode_reward_mean": 45}',
        "--checkpoint-freq",
        "2",
        "--checkpoint-at-end",
        "--local-dir",
        str(tmp_path),
    )
    assert cli.main(argv) == 0
    [trainer] = scripted.instances
    assert trainer.iteration == 3 and trainer.stopped
    assert [os.path.basename(p) for p in trainer.saved] == [
        "checkpoint_000002",
        "checkpoint_000003",
    ]
    # The trial folder is named like the default one, in <--local-dir>/<experiment>/ (RLlib
    # 1.13's `rllib train` layout; the experiment of the flags is "default").
    assert os.path.dirname(trainer.logdir) == str(tmp_path / "default")
    assert os.path.basename(trainer.logdir).startswith("ScriptedTrainer_CartPole-v1_")
    out, err = capsys.readouterr()
    assert err.count("iter ") == 3 and "reward n/a" in err
    assert "Training finished after 3 iterations (3,000 timesteps" in out
    assert "best episode_reward_mean: 30.00 (iteration 3)" in out
    assert "best evaluation/episode_reward_mean: 45.00" in out
    assert f"last checkpoint: {trainer.saved[-1]}" in out


def test_ctrl_c_saves_when_asked_stops_and_exits_130(scripted, capsys):
    scripted.interrupt_at = 3
    argv = train_args("--stop", '{"training_iteration": 10}', "--checkpoint-at-end")
    assert cli.main(argv) == 130
    [trainer] = scripted.instances
    assert trainer.stopped
    assert [os.path.basename(p) for p in trainer.saved] == ["checkpoint_000002"]
    out, err = capsys.readouterr()
    assert "Interrupted" in err
    assert "Training interrupted after 2 iterations" in out


def test_ctrl_c_without_checkpoint_at_end_saves_nothing(scripted):
    scripted.interrupt_at = 2
    assert cli.main(train_args("--stop", '{"training_iteration": 10}')) == 130
    [trainer] = scripted.instances
    assert trainer.saved == [] and trainer.stopped


def test_evaluation_stop_key_needs_evaluation(scripted, monkeypatch, capsys):
    monkeypatch.setattr(ScriptedTrainer, "train", lambda self: pytest.fail("must not train"))
    argv = train_args(
        "--stop",
        '{"evaluation/episode_reward_mean": 1}',
        "--config",
        '{"evaluation_interval": null}',
    )
    assert cli.main(argv) == 2
    assert "need evaluation results" in capsys.readouterr().err
    assert scripted.instances[0].stopped


# -- evaluate: checkpoint lookup and config -----------------------------------------------


def test_evaluate_reports_a_missing_checkpoint(tmp_path, capsys):
    assert cli.main(["evaluate", str(tmp_path / "checkpoint_000001")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_evaluate_reports_a_folder_that_is_not_a_checkpoint(tmp_path, capsys):
    assert cli.main(["evaluate", str(tmp_path)]) == 2
    assert "is not a checkpoint: no trainer_state.json" in capsys.readouterr().err


def test_video_without_moviepy_fails_before_loading_anything(tmp_path, monkeypatch, capsys):
    import importlib.util

    find_spec = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name == "moviepy" else find_spec(name, *a),
    )
    assert cli.main(["evaluate", str(tmp_path), "--video-dir", str(tmp_path / "v")]) == 2
    assert "--video-dir needs moviepy: pip install moviepy" in capsys.readouterr().err


def test_stored_config_drops_what_json_could_not_keep():
    from corral.agents.ppo import PPOTrainer

    params = {
        "env": "CartPole-v1",
        "lr": 0.01,
        "callbacks": "my_project.callbacks.MyCallbacks",
        "simple_optimizer": False,
        "evaluation_config": {"callbacks": "my_project.callbacks.Other"},
        "multiagent": {
            "policies": {"default_policy": [None, "Box(-1.0, 1.0, (4,), float32)", None, {}]},
            "policy_mapping_fn": "my_project.mapping",
            "count_steps_by": "env_steps",
        },
    }
    config = cli.usable_params(params, PPOTrainer.get_default_config())
    assert config == {
        "lr": 0.01,
        "multiagent": {
            "policies": {"default_policy": [None, None, None, {}]},
            "count_steps_by": "env_steps",
        },
    }
    assert params["multiagent"]["policy_mapping_fn"] == "my_project.mapping"  # input unchanged


def test_multi_agent_checkpoints_are_refused():
    params = {"multiagent": {"policies": {"p0": [None, None, None, {}], "p1": None}}}
    with pytest.raises(cli.UsageError, match="single-agent"):
        cli.usable_params(params, {})


# -- end to end --------------------------------------------------------------------------


def test_train_then_evaluate_cartpole(tmp_path, capsys):
    local_dir = tmp_path / "trials"
    argv = train_args(
        "--stop",
        '{"training_iteration": 2}',
        "--config",
        json.dumps(SMALL_PPO),
        "--checkpoint-at-end",
        "--local-dir",
        str(local_dir),
    )
    assert cli.main(argv) == 0
    out, err = capsys.readouterr()
    assert err.count("iter ") == 2
    [trial] = (local_dir / "default").iterdir()
    assert trial.name.startswith("PPO_CartPole-v1_")
    checkpoint = trial / "checkpoint_000002"
    assert (trial / "params.json").is_file() and checkpoint.is_dir()
    assert "Training finished after 2 iterations (512 timesteps" in out
    assert f"last checkpoint: {checkpoint}" in out
    # Every key a stop criterion may name without a section is in every real result, so
    # the loop's stop rule never meets a validated key missing.
    results = [json.loads(line) for line in (trial / EXPR_RESULT_FILE).read_text().splitlines()]
    assert [sorted(TRAINER_RESULT_KEYS - set(r)) for r in results] == [[], []]

    assert cli.main(["evaluate", str(checkpoint), "--episodes", "2", "--seed", "0"]) == 0
    out, _ = capsys.readouterr()
    lines = out.splitlines()
    episodes = [line for line in lines if line.startswith("Episode ")]
    assert [line.split(":")[0] for line in episodes] == ["Episode 1", "Episode 2"]
    rewards = [float(line.split("reward ")[1].split(",")[0]) for line in episodes]
    assert all(r >= 1 for r in rewards)
    assert lines[-1] == f"Mean reward over 2 episodes: {sum(rewards) / 2:.2f}"
    # Evaluating writes no trial folder anywhere.
    assert list(local_dir.iterdir()) == [trial.parent]
    assert list(trial.parent.iterdir()) == [trial]
    assert not os.path.exists(os.environ["CORRAL_RESULTS_DIR"])


# -- the demo's verdict and the live display's estimate -------------------------------------


def _outcome(stop, met, **result):
    return cli.TrainOutcome(
        logdir="/x",
        last_result={"timesteps_total": 12288, "time_total_s": 6.14, **result},
        env="CartPole-v1",
        stop=stop,
        config={"evaluation_config": {"explore": False}},
        met=met,
        best_eval_reward=430.0,
    )


def test_solved_line_names_the_evaluation_that_met_the_goal():
    stop = {"evaluation/episode_reward_mean": 475, "timesteps_total": 100000}
    outcome = _outcome(
        stop,
        ("evaluation/episode_reward_mean", 500.0),
        evaluation={"episodes_this_iter": 10},
    )
    assert cli.solved_line(outcome) == (
        "Solved CartPole-v1: evaluation return 500.0 (10 episodes, greedy) after 12,288 env "
        "steps, 6.1 s of training"
    )


def test_not_solved_when_another_criterion_ended_the_run():
    stop = {"evaluation/episode_reward_mean": 475, "timesteps_total": 12288}
    outcome = _outcome(stop, ("timesteps_total", 12288))
    assert cli.solved_line(outcome).startswith(
        "Not solved: best evaluation/episode_reward_mean 430.0 < 475 after 12,288 env steps"
    )
    assert cli.solved_line(_outcome({"timesteps_total": 5}, ("timesteps_total", 5))) is None


def test_time_left_follows_the_nearest_steady_criterion():
    result = {"timesteps_total": 1000, "training_iteration": 2, "time_total_s": 10.0}
    assert cli.time_left({"timesteps_total": 5000}, result) == pytest.approx(40.0)
    assert cli.time_left({"timesteps_total": 5000, "training_iteration": 4}, result) == 10.0
    assert cli.time_left({"episode_reward_mean": 475}, result) is None


def test_display_keeps_the_last_evaluation_and_shows_the_time_left():
    stream = io.StringIO()
    display = cli.ProgressDisplay(stream, stop={"timesteps_total": 4000})
    display.update(fake_result(1))
    without_eval = fake_result(2)
    del without_eval["evaluation"]
    display.update(without_eval)
    last = stream.getvalue().splitlines()[-1]
    assert "eval 15.0" in last and "left" in last


# -- corral plot and corral config ----------------------------------------------------------


def _write_trial(folder: Path, rows: list[dict]) -> Path:
    folder.mkdir(parents=True)
    with open(folder / "result.json", "w") as f:
        for row in rows:
            f.write(json.dumps(row) + "\n")
    return folder


def test_plot_draws_several_runs_with_evaluation(tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="corral plot needs the `plot` extra (matplotlib)")
    runs = [
        _write_trial(
            tmp_path / name,
            [
                {
                    "timesteps_total": 512 * i,
                    "time_total_s": 0.5 * i,
                    "training_iteration": i,
                    "episode_reward_mean": 20.0 * i + shift,
                    "episode_reward_min": 10.0 * i,
                    "episode_reward_max": 30.0 * i,
                    **({"evaluation": {"episode_reward_mean": 25.0 * i}} if i % 2 == 0 else {}),
                    "config": {"lr": 0.1},
                }
                for i in range(1, 9)
            ],
        )
        for name, shift in (("run_a", 0), ("run_b", 5))
    ]
    out = tmp_path / "curve.png"
    assert cli.main(["plot", *map(str, runs), "-o", str(out), "--x", "time"]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and out.stat().st_size > 5000
    assert f"Wrote {out}" in capsys.readouterr().out


def test_plot_reads_progress_csv_and_names_a_missing_key(tmp_path, capsys):
    pytest.importorskip("matplotlib", reason="corral plot needs the `plot` extra (matplotlib)")
    trial = tmp_path / "trial"
    trial.mkdir()
    (trial / "progress.csv").write_text(
        "timesteps_total,episode_reward_mean\n100,1.0\n200,2.0\n300,nan\n"
    )
    assert cli.main(["plot", str(trial), "-o", str(tmp_path / "a.png")]) == 0
    assert cli.main(["plot", str(trial), "--y", "info/learner/loss"]) == 2
    assert "no run reports 'info/learner/loss'" in capsys.readouterr().err
    assert cli.main(["plot", str(tmp_path / "empty")]) == 2


def test_plot_of_an_offline_run_draws_its_evaluation_return(tmp_path):
    # Offline trainers report no training episodes, only evaluation ones.
    pytest.importorskip("matplotlib", reason="corral plot needs the `plot` extra (matplotlib)")
    rows = [
        {
            "timesteps_total": 1000 * i,
            "time_total_s": 1.0 * i,
            "training_iteration": i,
            "evaluation": {"episode_reward_mean": 50.0 * i},
        }
        for i in range(1, 5)
    ]
    run = _write_trial(tmp_path / "bc", rows)
    out = tmp_path / "bc.png"
    assert cli.main(["plot", str(run), "-o", str(out)]) == 0
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_config_prints_a_key_with_its_documentation(capsys):
    assert cli.main(["config", "PPO", "lr"]) == 0
    assert capsys.readouterr().out == "lr = 5e-05\n    Learning rate.\n"
    assert cli.main(["config", "PPO", "model.fcnet_hiddens"]) == 0
    assert "model.fcnet_hiddens = [256, 256]" in capsys.readouterr().out
    assert cli.main(["config", "PPO", "lrr"]) == 2
    assert "did you mean lr" in capsys.readouterr().err


def test_every_default_config_key_is_documented():
    from corral.agents.config_docs import config_docs
    from corral.agents.registry import _ALGORITHMS, get_trainer_class

    for name in _ALGORITHMS:
        trainer_class = get_trainer_class(name)
        docs = config_docs(trainer_class)
        defaults = trainer_class.get_default_config()
        keys = [*defaults, *(f"model.{k}" for k in defaults["model"])]
        assert [k for k in keys if not docs.get(k)] == [], name


# -- the console script as a user runs it -------------------------------------------------------


def test_console_script_train_evaluate_plot_config(tmp_path):
    pytest.importorskip("matplotlib", reason="corral plot needs the `plot` extra (matplotlib)")
    script = Path(sys.executable).with_name("corral")
    if not script.exists():
        pytest.skip(f"no console script next to {sys.executable} (package not installed)")
    env = {**os.environ, "CORRAL_RESULTS_DIR": str(tmp_path / "results")}

    def run(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [str(script), *argv], capture_output=True, text=True, timeout=300, env=env
        )

    local = tmp_path / "trials"
    trained = run(
        "train", "--run", "PPO", "--env", "CartPole-v1", "--config", json.dumps(SMALL_PPO),
        "--stop", '{"training_iteration": 2}', "--checkpoint-at-end", "--local-dir", str(local),
    )  # fmt: skip
    assert trained.returncode == 0, trained.stderr[-2000:]
    [trial] = (local / "default").iterdir()
    checkpoint = trial / "checkpoint_000002"
    assert f"last checkpoint: {checkpoint}" in trained.stdout

    evaluated = run("evaluate", str(checkpoint), "--episodes", "2")
    assert evaluated.returncode == 0, evaluated.stderr[-2000:]
    assert evaluated.stdout.splitlines()[-1].startswith("Mean reward over 2 episodes: ")

    png = tmp_path / "curve.png"
    plotted = run("plot", str(trial), "-o", str(png))
    assert plotted.returncode == 0, plotted.stderr[-2000:]
    assert png.stat().st_size > 0

    config = run("config", "PPO", "lr")
    assert (config.returncode, config.stdout) == (0, "lr = 5e-05\n    Learning rate.\n")
    bad = run("train", "--run", "NOPE", "--env", "CartPole-v1")
    assert bad.returncode == 2 and "Unknown algorithm" in bad.stderr


def test_a_goal_below_the_envs_threshold_is_not_called_solved():
    stop = {"episode_reward_mean": 150}
    line = cli.solved_line(_outcome(stop, ("episode_reward_mean", 150.7)))
    assert line.startswith(
        "Reached episode_reward_mean >= 150 on CartPole-v1 (its reward threshold is 475): "
        "training return 150.7"
    )


def test_keep_checkpoints_num_and_restore(tmp_path, capsys):
    local = tmp_path / "trials"
    argv = train_args(
        "--config", json.dumps(SMALL_PPO), "--stop", '{"training_iteration": 3}',
        "--checkpoint-freq", "1", "--keep-checkpoints-num", "2", "--local-dir", str(local),
        "--no-progress",
    )  # fmt: skip
    assert cli.main(argv) == 0
    [trial] = (local / "default").iterdir()
    kept = sorted(p.name for p in trial.iterdir() if p.name.startswith("checkpoint_"))
    assert kept == ["checkpoint_000002", "checkpoint_000003"]
    capsys.readouterr()
    argv = train_args(
        "--config", json.dumps(SMALL_PPO), "--stop", '{"training_iteration": 4}',
        "--restore", str(trial / "checkpoint_000003"), "--local-dir", str(tmp_path / "again"),
        "--no-progress",
    )  # fmt: skip
    assert cli.main(argv) == 0
    out, err = capsys.readouterr()
    assert "(iteration 3)" in err and "Training finished after 4 iterations" in out


def test_evaluate_takes_rllib_1_x_no_render_flag():
    parser = cli.build_parser()
    assert parser.parse_args(["evaluate", "ckpt", "--no-render"]).render is False
    assert parser.parse_args(["evaluate", "ckpt", "--render"]).render is True
    assert parser.parse_args(["evaluate", "ckpt"]).render is False
