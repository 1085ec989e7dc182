"""`corral evaluate` on checkpoints of every algorithm, single- and multi-agent."""

from __future__ import annotations

import gymnasium as gym
import pytest

from corral import cli, register_env
from corral.env.multi_agent_env import make_multi_agent

TINY = {"num_workers": 0, "seed": 0, "model": {"fcnet_hiddens": [8]}}


def _checkpoint(trainer_cls, env, config, tmp_path):
    trainer = trainer_cls(config={**TINY, **config}, env=env)
    try:
        trainer.train()
        return trainer.save(str(tmp_path))
    finally:
        trainer.stop()


def _episodes(out: str) -> list[str]:
    return [line for line in out.splitlines() if line.startswith("Episode ")]


@pytest.mark.parametrize(
    "algorithm, env, config",
    [
        ("DQN", "CartPole-v1", {"learning_starts": 10, "timesteps_per_iteration": 50}),
        ("SAC", "Pendulum-v1", {"learning_starts": 10, "timesteps_per_iteration": 50}),
        ("TD3", "Pendulum-v1", {"learning_starts": 10, "timesteps_per_iteration": 50}),
        ("PG", "CartPole-v1", {"train_batch_size": 50, "rollout_fragment_length": 50}),
        # Algorithms that cannot be built without remote workers (`min_num_workers`).
        (
            "DDPPO",
            "CartPole-v1",
            {
                "num_workers": 1,
                "num_envs_per_worker": 1,
                "rollout_fragment_length": 50,
                "sgd_minibatch_size": 50,
                "num_sgd_iter": 1,
            },
        ),
        (
            "MAML",
            "Navigation2D",
            {"num_workers": 1, "rollout_fragment_length": 20, "inner_adaptation_steps": 1},
        ),
    ],
)
def test_evaluate_checkpoints_of_each_algorithm(algorithm, env, config, tmp_path, capsys):
    from corral.agents.registry import get_trainer_class

    path = _checkpoint(get_trainer_class(algorithm), env, config, tmp_path)
    assert cli.main(["evaluate", path, "--episodes", "1", "--steps", "30"]) == 0
    out = capsys.readouterr().out
    [episode] = _episodes(out)
    assert int(episode.split("length ")[1].split()[0]) <= 30
    assert out.splitlines()[-1].startswith("Mean reward over 1 episodes")


@pytest.fixture
def multi_agent_checkpoint(tmp_path):
    from corral.agents.ppo import PPOTrainer

    register_env("corral_test_ma_cartpole", lambda ctx: make_multi_agent("CartPole-v1")(ctx))
    config = {
        "env_config": {"num_agents": 2},
        "train_batch_size": 100,
        "rollout_fragment_length": 50,
        "sgd_minibatch_size": 50,
        "num_sgd_iter": 1,
        "multiagent": {
            "policies": {"0", "1"},
            "policy_mapping_fn": lambda agent_id, *args, **kwargs: str(agent_id),
        },
    }
    return _checkpoint(PPOTrainer, "corral_test_ma_cartpole", config, tmp_path)


def test_evaluate_a_multi_agent_checkpoint(multi_agent_checkpoint, capsys):
    # The mapping function was code: agents act with the policy named like them.
    assert cli.main(["evaluate", multi_agent_checkpoint, "--episodes", "2"]) == 0
    assert len(_episodes(capsys.readouterr().out)) == 2
    # Or every agent with the policy picked.
    assert cli.main(["evaluate", multi_agent_checkpoint, "--episodes", "1", "--policy", "1"]) == 0
    assert cli.main(["evaluate", multi_agent_checkpoint, "--policy", "nope"]) == 2
    assert "--policy 'nope'" in capsys.readouterr().err


def test_steps_bound_the_whole_rollout(tmp_path, capsys):
    from corral.agents.ppo import PPOTrainer

    path = _checkpoint(
        PPOTrainer,
        "CartPole-v1",
        {"train_batch_size": 64, "rollout_fragment_length": 64, "sgd_minibatch_size": 32},
        tmp_path,
    )
    assert cli.main(["evaluate", path, "--episodes", "50", "--steps", "25"]) == 0
    episodes = _episodes(capsys.readouterr().out)
    lengths = [int(e.split("length ")[1].split()[0]) for e in episodes]
    assert sum(lengths) == 25 and "cut by --steps" in episodes[-1]


def _ppo_checkpoint(tmp_path):
    from corral.agents.ppo import PPOTrainer

    config = {"train_batch_size": 64, "rollout_fragment_length": 64, "sgd_minibatch_size": 32}
    return _checkpoint(PPOTrainer, "CartPole-v1", config, tmp_path)


def test_out_writes_the_evaluated_steps_for_json_reader(tmp_path, capsys):
    import numpy as np

    from corral.offline import JsonReader

    path = _ppo_checkpoint(tmp_path)
    out_dir = tmp_path / "rollouts"
    args = ["evaluate", path, "--episodes", "3", "--steps", "40", "--out", str(out_dir)]
    assert cli.main(args) == 0
    stdout = capsys.readouterr().out
    episodes = _episodes(stdout)
    lengths = [int(e.split("length ")[1].split()[0]) for e in episodes]
    assert f"Episodes written to {out_dir}" in stdout
    batches = list(JsonReader(str(out_dir)).read_all_files())
    # One batch per episode (the last one cut by --steps), a row per step evaluated.
    assert [b.count for b in batches] == lengths and sum(lengths) == 40
    for batch in batches:
        assert len(set(batch["eps_id"])) == 1
        np.testing.assert_array_equal(batch["t"], np.arange(batch.count))
        np.testing.assert_array_equal(batch["obs"][1:], batch["new_obs"][:-1])
        assert batch["obs"].shape == (batch.count, 4) and batch["obs"].dtype == np.float32
        assert set(batch["actions"]) <= {0, 1}
    assert len({b["eps_id"][0] for b in batches}) == len(batches)
    # Episodes that ended by themselves end with done; the --steps-cut one does not.
    ended = [not e.endswith("(cut by --steps)") for e in episodes]
    assert [bool(b["dones"][-1]) for b in batches] == ended
    assert not any(b["dones"][:-1].any() for b in batches)
    # And an offline algorithm trains from them (`input`: the folder).
    from corral.agents.marwil import MARWILTrainer

    space = gym.make("CartPole-v1")
    marwil = MARWILTrainer(
        config={
            **TINY,
            "input": str(out_dir),
            "observation_space": space.observation_space,
            "action_space": space.action_space,
            "train_batch_size": 16,
        }
    )
    try:
        result = marwil.train()
    finally:
        marwil.stop()
    assert result["info"]["num_env_steps_sampled"] > 0


def test_out_writes_multi_agent_episodes_by_policy(multi_agent_checkpoint, tmp_path, capsys):
    from corral.offline import JsonReader
    from corral.policy.sample_batch import MultiAgentBatch

    out_dir = tmp_path / "ma_rollouts"
    args = ["evaluate", multi_agent_checkpoint, "--episodes", "2", "--out", str(out_dir)]
    assert cli.main(args) == 0
    assert len(_episodes(capsys.readouterr().out)) == 2
    batches = list(JsonReader(str(out_dir)).read_all_files())
    assert len(batches) == 2 and all(isinstance(b, MultiAgentBatch) for b in batches)
    for batch in batches:
        assert set(batch.policy_batches) == {"0", "1"}
        assert all(len(set(p["eps_id"])) == 1 for p in batch.policy_batches.values())
        # Each agent acts every env step until its own episode ends.
        assert max(p.count for p in batch.policy_batches.values()) == batch.count


def test_out_refuses_a_uri(tmp_path, capsys):
    path = str(tmp_path / "no_checkpoint_needed")
    assert cli.main(["evaluate", path, "--out", "s3://bucket/rollouts"]) == 2
    assert "--out 's3://bucket/rollouts'" in capsys.readouterr().err
