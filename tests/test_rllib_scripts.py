"""RLlib 1.13's script modules (`ray.rllib.evaluate`, `.rollout`, `.train`, `.scripts`)
as corral modules, on corral's command line code."""

from __future__ import annotations

import json
import os
import pickle
import shelve
import sys

import gymnasium
import numpy as np
import pytest

from corral import evaluate, register_env, scripts, train
from corral.env.multi_agent_env import make_multi_agent

TINY = {
    "num_workers": 0,
    "seed": 0,
    "model": {"fcnet_hiddens": [8]},
    "train_batch_size": 50,
    "rollout_fragment_length": 50,
}


def _pg(env="CartPole-v1", **config):
    from corral.agents.pg import PGTrainer

    return PGTrainer(config={**TINY, **config}, env=env)


@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    trainer = _pg()
    try:
        trainer.train()
        return trainer.save(str(tmp_path_factory.mktemp("pg")))
    finally:
        trainer.stop()


def _run_evaluate(argv):
    parser = evaluate.create_parser()
    evaluate.run(parser.parse_args(argv), parser)


def test_keep_going_stops_at_either_limit():
    assert evaluate.keep_going(0, 0, 0, 0)  # no limits
    assert not evaluate.keep_going(10, 10, 0, 0)
    assert evaluate.keep_going(9, 10, 3, 0)
    assert not evaluate.keep_going(5, 10, 2, 2)
    assert evaluate.keep_going(100, 0, 1, 2)


def test_default_mapping_and_default_policy():
    mapping = evaluate.DefaultMapping(lambda key: key * 2)
    assert mapping[3] == 6 and dict(mapping) == {3: 6}
    assert evaluate.default_policy_agent_mapping("any agent") == "default_policy"


def test_rollout_saver_pickles_episodes_and_tracks_progress(tmp_path):
    out = tmp_path / "rollouts.pkl"
    progress = tmp_path / "__progress_rollouts.pkl"
    with evaluate.RolloutSaver(
        str(out), write_update_file=True, target_episodes=2, save_info=True
    ) as saver:
        assert saver.outfile == str(out) and out.exists()
        for episode in range(2):
            saver.begin_rollout()
            saver.append_step(episode, 1, episode + 1, 1.0, False, {"i": 0})
            saver.append_step(episode + 1, 0, episode + 2, 0.5, True, {"i": 1})
            saver.end_rollout()
            assert progress.read_text() == f"{episode + 1} / 2 episodes completed\n"
    assert not progress.exists()
    with open(out, "rb") as f:
        rollouts = pickle.load(f)
    assert rollouts == [
        [[0, 1, 1, 1.0, False, {"i": 0}], [1, 0, 2, 0.5, True, {"i": 1}]],
        [[1, 1, 2, 1.0, False, {"i": 0}], [2, 0, 3, 0.5, True, {"i": 1}]],
    ]


def test_rollout_saver_shelve_and_no_outfile(tmp_path):
    out = str(tmp_path / "rollouts.db")
    with evaluate.RolloutSaver(out, use_shelve=True, target_steps=3) as saver:
        for _ in range(3):
            saver.begin_rollout()
            saver.append_step("o", "a", "o2", 1.0, True, {})
            saver.end_rollout()
        assert saver._get_progress() == "3 / 3 steps completed"
    with shelve.open(out) as rollouts:
        assert rollouts["num_episodes"] == 3
        assert rollouts["2"] == [["o", "a", "o2", 1.0, True]]
    # Without an outfile it only counts.
    with evaluate.RolloutSaver() as saver:
        saver.begin_rollout()
        saver.append_step(0, 0, 0, 0.0, True, {})
        saver.end_rollout()
    assert saver._get_progress() == "1 episodes completed"
    with pytest.raises(OSError), evaluate.RolloutSaver(str(tmp_path / "missing" / "x.pkl")):
        pass


def test_evaluate_run_pickles_the_rollouts(checkpoint, tmp_path, capsys):
    out = tmp_path / "rollouts.pkl"
    _run_evaluate(
        [checkpoint, "--run", "PG", "--env", "CartPole-v1", "--steps", "30", "--out", str(out)]
    )
    with open(out, "rb") as f:
        rollouts = pickle.load(f)
    steps = [step for episode in rollouts for step in episode]
    assert len(steps) == 30
    for obs, action, next_obs, reward, done in steps:
        assert np.shape(obs) == (4,) and np.shape(next_obs) == (4,)
        assert action in (0, 1) and reward == 1.0 and isinstance(done, bool)
    for episode in rollouts:  # each step's next_obs is the next step's obs
        for step, following in zip(episode, episode[1:], strict=False):
            np.testing.assert_array_equal(step[2], following[0])
    # Episodes that ended by themselves end with done; the one --steps cut does not.
    assert all(episode[-1][4] for episode in rollouts[:-1])
    assert not any(step[4] for episode in rollouts for step in episode[:-1])
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("Ep")]
    assert len(printed) == len(rollouts) and printed[0].startswith("Episode #0: reward: ")


def test_evaluate_run_takes_run_and_env_from_the_checkpoint(checkpoint, capsys):
    # And --episodes bounds the rollout (steps 0: no limit).
    _run_evaluate([checkpoint, "--episodes", "2", "--steps", "0"])
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("Ep")]
    assert [line.split(":")[0] for line in printed] == ["Episode #0", "Episode #1"]


def test_evaluate_run_without_checkpoint_rolls_out_a_new_trainer(tmp_path, capsys):
    out = tmp_path / "r.pkl"
    _run_evaluate(["--run", "PG", "--env", "CartPole-v1", "--steps", "12", "--out", str(out)])
    with open(out, "rb") as f:
        assert sum(len(e) for e in pickle.load(f)) == 12


def test_evaluate_run_mistakes_end_in_parser_error(checkpoint, tmp_path, capsys):
    for argv, message in [
        ([checkpoint, "--use-shelve"], "--use-shelve needs an output file"),
        ([checkpoint, "--track-progress"], "--track-progress needs an output file"),
        (["--env", "CartPole-v1"], "--run (the algorithm) is needed"),
        (["--run", "PG"], "--env is needed without a checkpoint"),
        ([str(tmp_path)], "checkpoint"),
        ([checkpoint, "--run", "NoSuchAlgo"], "NoSuchAlgo"),
    ]:
        with pytest.raises(SystemExit) as e:
            _run_evaluate(argv)
        assert e.value.code == 2
        assert message in capsys.readouterr().err


def test_evaluate_never_loads_a_params_pkl(checkpoint, tmp_path):
    # RLlib read the config from a pickle next to the checkpoint; corral runs nothing a
    # checkpoint's neighbour files say.
    marker = tmp_path / "executed"

    class Payload:
        def __reduce__(self):
            return (os.mkdir, (str(marker),))

    # In the trial folder, where RLlib wrote it (corral refuses files added to the
    # checkpoint folder itself).
    checkpoint_dir = checkpoint if os.path.isdir(checkpoint) else os.path.dirname(checkpoint)
    planted = os.path.join(os.path.dirname(checkpoint_dir), "params.pkl")
    with open(planted, "wb") as f:
        pickle.dump(Payload(), f)
    try:
        _run_evaluate([checkpoint, "--steps", "5"])
    finally:
        os.remove(planted)
    assert not marker.exists()


def test_rollout_feeds_the_saver_from_the_trainers_policy(tmp_path, capsys):
    trainer = _pg()
    out = tmp_path / "r.pkl"
    try:
        with evaluate.RolloutSaver(str(out), target_steps=50) as saver:
            assert evaluate.rollout(trainer, "CartPole-v1", num_steps=50, saver=saver) is None
        # Without a saver (and env name: the trainer's env), episodes are only printed.
        evaluate.rollout(trainer, None, num_steps=0, num_episodes=2)
    finally:
        trainer.stop()
    with open(out, "rb") as f:
        rollouts = pickle.load(f)
    assert sum(len(e) for e in rollouts) == 50
    printed = [line for line in capsys.readouterr().out.splitlines() if line.startswith("Ep")]
    assert len(printed) == len(rollouts) + 2


def test_rollout_of_a_multi_agent_trainer(tmp_path):
    register_env("corral_test_scripts_ma", lambda ctx: make_multi_agent("CartPole-v1")(ctx))
    trainer = _pg(
        "corral_test_scripts_ma",
        env_config={"num_agents": 2},
        multiagent={
            "policies": {"p0", "p1"},
            "policy_mapping_fn": lambda agent_id, *args, **kwargs: f"p{agent_id}",
        },
    )
    out = tmp_path / "ma.pkl"
    try:
        with evaluate.RolloutSaver(str(out)) as saver:
            evaluate.rollout(trainer, "corral_test_scripts_ma", 0, num_episodes=1, saver=saver)
    finally:
        trainer.stop()
    with open(out, "rb") as f:
        [episode] = pickle.load(f)
    obs, action, next_obs, reward, done = episode[0]
    assert set(obs) == set(action) == set(reward) == {0, 1}
    assert episode[-1][4] is True and not any(step[4] for step in episode[:-1])


class _OldApiCorridor(gymnasium.Env):
    """An RLlib 1.x env: ``reset() -> obs`` and 4-tuple steps (the old gym API)."""

    observation_space = gymnasium.spaces.Box(0.0, 3.0, (1,), np.float32)
    action_space = gymnasium.spaces.Discrete(2)

    def __init__(self, config=None):
        self.pos = 0.0

    def reset(self):
        self.pos = 0.0
        return np.array([self.pos], np.float32)

    def step(self, action):
        self.pos += 1.0
        done = self.pos >= 3.0
        return np.array([self.pos], np.float32), 1.0, done, {}


def test_rollout_converts_an_old_gym_api_env_as_the_workers_do(tmp_path, capsys):
    register_env("corral_test_scripts_old_api", lambda ctx: _OldApiCorridor(ctx))
    trainer = _pg("corral_test_scripts_old_api")
    out = tmp_path / "old.pkl"
    try:
        with evaluate.RolloutSaver(str(out)) as saver:
            evaluate.rollout(trainer, "corral_test_scripts_old_api", 0, num_episodes=2, saver=saver)
    finally:
        trainer.stop()
    with open(out, "rb") as f:
        episodes = pickle.load(f)
    assert [len(e) for e in episodes] == [3, 3]
    assert [e[-1][4] for e in episodes] == [True, True]
    assert "Episode #1: reward: 3.0" in capsys.readouterr().out


def test_rollout_carries_a_recurrent_policys_state(tmp_path):
    trainer = _pg(model={"fcnet_hiddens": [8], "use_lstm": True, "lstm_cell_size": 8})
    out = tmp_path / "lstm.pkl"
    try:
        with evaluate.RolloutSaver(str(out)) as saver:
            evaluate.rollout(trainer, "CartPole-v1", num_steps=20, saver=saver)
    finally:
        trainer.stop()
    with open(out, "rb") as f:
        steps = [s for e in pickle.load(f) for s in e]
    assert len(steps) == 20 and all(s[1] in (0, 1) for s in steps)


def test_the_rollout_module_warns_and_reexports(caplog, monkeypatch):
    monkeypatch.delitem(sys.modules, "corral.rollout", raising=False)
    import corral.rollout as rollout_module

    assert "`rllib rollout` has been deprecated. Use `rllib evaluate`" in caplog.text
    assert rollout_module.RolloutSaver is evaluate.RolloutSaver
    assert rollout_module.rollout is evaluate.rollout and rollout_module.run is evaluate.run


def _train_argv(tmp_path):
    config = {**TINY, "num_workers": 0}
    return [
        "--run",
        "PG",
        "--env",
        "CartPole-v1",
        "--config",
        json.dumps(config),
        "--stop",
        '{"training_iteration": 1}',
        "--local-dir",
        str(tmp_path),
        "--checkpoint-at-end",
        "--no-progress",
    ]


def test_train_run_trains_the_flags_experiment(tmp_path, capsys):
    parser = train.create_parser()
    assert train.run(parser.parse_args(_train_argv(tmp_path)), parser) == 0
    checkpoints = [
        d for _, dirs, _ in os.walk(tmp_path) for d in dirs if d.startswith("checkpoint_")
    ]
    assert checkpoints == ["checkpoint_000001"]
    assert "Checkpoint saved" in capsys.readouterr().err
    # A mistake ends in parser.error.
    with pytest.raises(SystemExit) as e:
        train.run(parser.parse_args(["--run", "NoSuchAlgo", "--env", "CartPole-v1"]), parser)
    assert e.value.code == 2 and "NoSuchAlgo" in capsys.readouterr().err


def test_train_create_parser_takes_a_parser_creator():
    made = []

    def creator(**kwargs):
        made.append(kwargs)
        return __import__("argparse").ArgumentParser(**kwargs)

    parser = train.create_parser(creator)
    assert made and made[0]["epilog"] == train.EXAMPLE_USAGE
    args = parser.parse_args(["--run", "PPO", "--env", "CartPole-v1", "-vv", "--torch"])
    assert (args.run, args.env, args.verbose, args.torch) == ("PPO", "CartPole-v1", 2, True)


def test_scripts_cli_dispatches_train_and_evaluate(tmp_path, monkeypatch, capsys, caplog):
    monkeypatch.setattr(sys, "argv", ["rllib", "train", *_train_argv(tmp_path / "t")])
    scripts.cli()
    [checkpoint] = [
        os.path.join(root, d)
        for root, dirs, _ in os.walk(tmp_path / "t")
        for d in dirs
        if d.startswith("checkpoint_")
    ]
    for command in ("evaluate", "rollout"):
        out = tmp_path / f"{command}.pkl"
        argv = ["rllib", command, checkpoint, "--steps", "7", "--out", str(out)]
        monkeypatch.setattr(sys, "argv", argv)
        caplog.clear()
        scripts.cli()
        with open(out, "rb") as f:
            assert sum(len(e) for e in pickle.load(f)) == 7
        assert ("`rllib rollout` has been deprecated" in caplog.text) == (command == "rollout")
    # No command: the help.
    monkeypatch.setattr(sys, "argv", ["rllib"])
    capsys.readouterr()
    scripts.cli()
    assert "train" in capsys.readouterr().out and "rollout" in scripts.EXAMPLE_USAGE


def test_evaluate_run_with_a_seed_repeats_itself(checkpoint, tmp_path):
    def rolled_out(name):
        out = tmp_path / name
        _run_evaluate([checkpoint, "--steps", "20", "--seed", "3", "--out", str(out)])
        with open(out, "rb") as f:
            return [step for episode in pickle.load(f) for step in episode]

    first, second = rolled_out("a.pkl"), rolled_out("b.pkl")
    assert len(first) == len(second) == 20
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a[0], b[0])
        assert a[1] == b[1]
