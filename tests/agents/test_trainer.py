"""Trainer lifecycle: config errors, determinism, results, logging, workers, checkpoints."""

import json
import os

import numpy as np
import pytest

from corral.agents.ppo import PPOTrainer
from corral.agents.registry import get_trainer_class
from corral.evaluation.backend import WorkerFailure
from corral.utils.error import EnvError

SMALL = {
    "num_workers": 0,
    "rollout_fragment_length": 25,
    "num_envs_per_worker": 2,
    "train_batch_size": 100,
    "sgd_minibatch_size": 50,
    "num_sgd_iter": 2,
    "model": {"fcnet_hiddens": [16, 16]},
}


@pytest.fixture
def trainer():
    t = PPOTrainer(config={**SMALL, "seed": 3}, env="CartPole-v1")
    yield t
    t.stop()


def test_unknown_config_key_suggests_close_ones():
    with pytest.raises(ValueError, match="num_worker.*num_workers"):
        PPOTrainer(config={"num_worker": 1}, env="CartPole-v1")


def test_unknown_env_id_is_named():
    with pytest.raises(EnvError, match="CartPol-v1.*CartPole-v1"):
        PPOTrainer(config=SMALL, env="CartPol-v1")


def test_not_implemented_key_is_named():
    with pytest.raises(NotImplementedError, match="eager_tracing"):
        PPOTrainer(config={**SMALL, "eager_tracing": True}, env="CartPole-v1")


def test_other_frameworks_are_refused():
    with pytest.raises(ValueError, match="torch"):
        PPOTrainer(config={**SMALL, "framework": "tf"}, env="CartPole-v1")


def test_num_learners_must_be_an_int():
    with pytest.raises(ValueError, match="num_learners"):
        PPOTrainer(config={**SMALL, "num_learners": 1.5}, env="CartPole-v1")


def test_result_keys(trainer):
    result = trainer.train()
    for key in [
        "episode_reward_mean",
        "episode_reward_min",
        "episode_reward_max",
        "episode_len_mean",
        "episodes_this_iter",
        "episodes_total",
        "timesteps_this_iter",
        "timesteps_total",
        "agent_timesteps_total",
        "training_iteration",
        "time_this_iter_s",
        "time_total_s",
        "num_healthy_workers",
        "custom_metrics",
        "hist_stats",
        "sampler_perf",
        "policy_reward_mean",
    ]:
        assert key in result, key
    stats = result["info"]["learner"]["default_policy"]["learner_stats"]
    assert {"total_loss", "policy_loss", "vf_loss"} <= set(stats)
    assert all(np.isfinite(v) for v in stats.values())
    assert result["timesteps_total"] == result["timesteps_this_iter"] == 100
    assert result["training_iteration"] == 1
    assert result["sampler_perf"]["mean_env_wait_ms"] > 0


def test_logdir_and_files(trainer):
    trainer.train()
    trainer.train()
    name = os.path.basename(trainer.logdir)
    assert name.startswith("PPO_CartPole-v1_")
    assert os.path.dirname(trainer.logdir) == os.environ["CORRAL_RESULTS_DIR"]
    with open(os.path.join(trainer.logdir, "result.json")) as f:
        lines = f.read().splitlines()
    assert [json.loads(line)["training_iteration"] for line in lines] == [1, 2]
    with open(os.path.join(trainer.logdir, "progress.csv")) as f:
        header = f.readline()
    assert "info/learner/default_policy/learner_stats/total_loss" in header


# Small configs of the other built-in trainers for the same-seed test (no wall-clock
# minimum per iteration: A2C's `min_iter_time_s` of 10 s and the off-policy trainers' of
# 1 s make the number of steps in an iteration depend on the clock).
SEEDED = {
    "PPO": ("CartPole-v1", SMALL),
    "PG": ("CartPole-v1", {"rollout_fragment_length": 50, "train_batch_size": 100}),
    "A2C": ("CartPole-v1", {"rollout_fragment_length": 20, "train_batch_size": 40}),
    "DQN": (
        "CartPole-v1",
        {"learning_starts": 64, "train_batch_size": 32, "rollout_fragment_length": 4},
    ),
    "SAC": (
        "Pendulum-v1",
        {
            "learning_starts": 64,
            "train_batch_size": 32,
            "Q_model": {"fcnet_hiddens": [16]},
            "policy_model": {"fcnet_hiddens": [16]},
        },
    ),
    "TD3": (
        "Pendulum-v1",
        {
            "learning_starts": 64,
            "train_batch_size": 32,
            "actor_hiddens": [16],
            "critic_hiddens": [16],
        },
    ),
}


@pytest.mark.parametrize("name", sorted(SEEDED))
def test_same_seed_same_results(name):
    env, config = SEEDED[name]
    config = {
        "model": {"fcnet_hiddens": [16]},
        **config,
        "num_workers": 0,
        "seed": 42,
        "timesteps_per_iteration": 150,
        "min_iter_time_s": 0,
        "min_time_s_per_reporting": 0,
    }

    def run():
        t = get_trainer_class(name)(config=config, env=env)
        try:
            results = [t.train() for _ in range(2)]
            weights = t.get_weights()["default_policy"]
        finally:
            t.stop()
        return results, weights

    (r1, w1), (r2, w2) = run(), run()
    # (NaN before the first finished episode: assert_array_equal takes NaN for NaN.)
    np.testing.assert_array_equal(
        [(r["timesteps_total"], r["episode_reward_mean"]) for r in r1],
        [(r["timesteps_total"], r["episode_reward_mean"]) for r in r2],
    )
    for k in w1:
        np.testing.assert_array_equal(w1[k], w2[k])


def test_timesteps_per_iteration_and_min_iter_time(trainer):
    trainer.config["timesteps_per_iteration"] = 250
    result = trainer.train()
    assert result["timesteps_this_iter"] == 300


def test_remote_workers_sample_and_get_weights():
    t = PPOTrainer(config={**SMALL, "num_workers": 2, "seed": 1}, env="CartPole-v1")
    try:
        assert t.workers.local_worker().sampler is None  # no env on the driver
        result = t.train()
        assert result["num_healthy_workers"] == 2
        assert result["timesteps_this_iter"] == 100
        local = t.get_weights()["default_policy"]
        remote = t.workers.remote_workers()[0].call("get_weights").result(30)["default_policy"]
        for k in local:
            np.testing.assert_array_equal(local[k], remote[k])
        pids = [w.pid for w in t.workers.remote_workers()]
    finally:
        t.stop()
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_worker_error_carries_its_traceback():
    def creator(ctx):
        import gymnasium as gym

        class Bad(gym.Wrapper):
            def step(self, action):
                raise RuntimeError("boom in the env")

        return Bad(gym.make("CartPole-v1"))

    from corral import register_env

    register_env("exploding_step_env", creator)
    t = PPOTrainer(config={**SMALL, "num_workers": 1}, env="exploding_step_env")
    try:
        with pytest.raises(WorkerFailure, match=r"(?s)worker 1.*boom in the env.*traceback"):
            t.train()
    finally:
        t.stop()


def test_save_and_restore_roundtrip(trainer, tmp_path):
    trainer.train()
    path = trainer.save(str(tmp_path))
    obs = np.array([0.01, -0.02, 0.03, 0.04], np.float32)
    action = trainer.compute_single_action(obs, explore=False)
    fresh = PPOTrainer(config={**SMALL, "seed": 3}, env="CartPole-v1")
    try:
        fresh.restore(path)
        assert fresh.iteration == 1
        assert fresh.compute_single_action(obs, explore=False) == action
        for k, v in trainer.get_weights()["default_policy"].items():
            np.testing.assert_array_equal(fresh.get_weights()["default_policy"][k], v)
        result = fresh.train()
        assert result["training_iteration"] == 2
        assert result["timesteps_total"] == 200
    finally:
        fresh.stop()


def test_a_run_s_params_json_given_back_as_config_builds_the_trainer(tmp_path):
    """RLlib 1.x scripts load a trial's params.json and pass it as a config again (e.g.
    RLlib 1.13's rnnsac_stateless_cartpole example); classes in it are their names."""
    from corral.agents.callbacks import DefaultCallbacks
    from corral.agents.pg import PGTrainer

    class Marked(DefaultCallbacks):
        pass

    first = PGTrainer(config={"env": "CartPole-v1", "num_workers": 0})
    try:
        with open(os.path.join(first.logdir, "params.json")) as f:
            params = json.load(f)
    finally:
        first.stop()
    assert params["callbacks"] == "corral.agents.callbacks.DefaultCallbacks"
    again = PGTrainer(config=params)
    try:
        assert type(again.callbacks) is DefaultCallbacks
    finally:
        again.stop()
    # Only classes of modules already imported; nothing is imported for a config.
    with pytest.raises(ValueError, match="'callbacks'.*corral_never_imported.Callbacks"):
        PGTrainer(config={**params, "callbacks": "corral_never_imported.Callbacks"})
    with pytest.raises(ValueError, match="callbacks"):  # (nor a class local to a function)
        PGTrainer(config={**params, "callbacks": Marked.__module__ + ".Marked"})
