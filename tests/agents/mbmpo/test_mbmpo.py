"""MBMPOTrainer: real data on the driver fits the ensemble, each remote worker imagines
episodes with its own model, MAML meta-updates on them; RLlib 1.13's result keys,
checkpoints that carry the ensemble, and config errors that name the bad value."""

from __future__ import annotations

import numpy as np
import pytest

from corral.agents.mbmpo import DEFAULT_CONFIG, MBMPOTrainer
from corral.agents.mbmpo.mbmpo import (
    NUM_MODEL_STEPS_SAMPLED,
    fit_dynamics,
    post_process_samples,
    sync_stats,
)
from corral.agents.mbmpo.utils import LinearFeatureBaseline, calculate_gae_advantages
from corral.agents.registry import get_trainer_class
from corral.agents.trainer import Trainer
from corral.env.random_env import RandomEnv
from corral.env.vector_env import VectorEnvWrapper, VectorizedGymEnv
from corral.env.wrappers.model_vector_env import ModelVectorEnv
from corral.policy.sample_batch import SampleBatch
from corral.utils.error import UnsupportedSpaceException

SMALL = {
    "num_workers": 2,
    "num_envs_per_worker": 2,
    "rollout_fragment_length": 10,
    "horizon": 10,
    "env_config": {"horizon": 10},
    "num_maml_steps": 2,
    "maml_optimizer_steps": 2,
    "seed": 0,
    "model": {"fcnet_hiddens": [16]},
    "dynamics_model": {
        "ensemble_size": 2,
        "fcnet_hiddens": [16],
        "train_epochs": 5,
        "batch_size": 32,
    },
    "exploration_config": {"random_timesteps": 40},
}
# Real steps per round: rollout_fragment_length x num_envs_per_worker.
ROUND = 20
PROBE_OBS = np.array([[0.1, -0.2], [0.3, 0.0]], np.float32)
PROBE_ACTIONS = np.array([[0.5, 0.5], [-1.0, 0.2]], np.float32)


def _predict_all(model) -> list[np.ndarray]:
    out = []
    for i in range(model.num_models):
        model.sample_index = i
        out.append(model.predict_model_batches(PROBE_OBS, PROBE_ACTIONS))
    return out


def _remote_view(worker):
    """What a remote worker holds: its env, its model's index and predictions."""
    model = worker.get_policy().dynamics_model
    return (
        type(worker.async_env.worker_env()).__name__,
        model.sample_index,
        model.predict_model_batches(PROBE_OBS, PROBE_ACTIONS),
        worker.get_policy().exploration.random_timesteps,
    )


@pytest.fixture
def trainer():
    trainer = MBMPOTrainer(config=SMALL, env="Navigation2D")
    yield trainer
    trainer.stop()


def test_registered_and_default_config():
    assert get_trainer_class("MBMPO") is MBMPOTrainer
    assert DEFAULT_CONFIG["dynamics_model"]["ensemble_size"] == 5
    assert DEFAULT_CONFIG["num_maml_steps"] == 10
    assert DEFAULT_CONFIG["maml_optimizer_steps"] == 8
    assert DEFAULT_CONFIG["horizon"] == 200
    assert DEFAULT_CONFIG["batch_mode"] == "complete_episodes"


def test_iterations_report_real_and_imagined_episodes(trainer):
    first = trainer.train()
    # The first iteration fits on two random rounds, then reports the round after training.
    assert first["timesteps_total"] == 3 * ROUND
    assert first["episodes_this_iter"] == 2 and first["episode_len_mean"] == 10
    # Each MAML round: 2 workers x 2 sampling rounds (before and after adaptation).
    assert first[NUM_MODEL_STEPS_SAMPLED] == 2 * 2 * 2 * ROUND
    for i in range(2):
        for j in range(2):
            for stat in ("mean", "min", "max"):
                assert np.isfinite(first[f"MAMLIter{i}_DynaTrajInner_{j}_episode_reward_{stat}"])
    stats = first["info"]["learner"]["default_policy"]["learner_stats"]
    assert {"total_loss", "policy_loss", "inner_kl", "cur_kl_coeff"} <= set(stats)
    dynamics = first["info"]["dynamics_model"]
    assert 1 <= dynamics["epochs"] <= 5 and len(dynamics["valid_loss"]) == 2
    second = trainer.train()
    assert second["timesteps_total"] == 4 * ROUND
    assert second[NUM_MODEL_STEPS_SAMPLED] == 2 * first[NUM_MODEL_STEPS_SAMPLED]
    assert second["episodes_total"] == 4


def test_workers_imagine_with_their_own_synced_model(trainer):
    trainer.train()
    local = trainer.workers.local_worker()
    assert isinstance(local.async_env, VectorizedGymEnv)  # the driver samples the real env
    driver = _predict_all(local.get_policy().dynamics_model)
    assert not np.allclose(driver[0], driver[1])
    views = [w.apply(_remote_view).result() for w in trainer.workers.remote_workers()]
    for index, (env_name, member, predicted, random_timesteps) in enumerate(views):
        assert env_name == ModelVectorEnv.__name__
        assert member == index  # worker i steps model (i - 1) % ensemble_size
        np.testing.assert_allclose(predicted, driver[member], rtol=1e-6)
        assert random_timesteps == 0  # only the driver acts at random
    assert local.get_policy().exploration.random_timesteps == 40
    remote_env = trainer.workers.remote_workers()[0].apply(lambda w: type(w.async_env)).result()
    assert remote_env is VectorEnvWrapper


def test_recreated_workers_get_the_ensemble(trainer):
    trainer.train()
    driver = _predict_all(trainer.workers.local_worker().get_policy().dynamics_model)
    new = trainer.workers.recreate_worker(2)
    _, member, fresh, _ = new.apply(_remote_view).result()
    assert not np.allclose(fresh, driver[member])  # a new worker's ensemble is untrained
    # What the next iteration does first: workers the ensemble was not sent to get it.
    trainer._sync_ensemble_if_needed()
    _, _, predicted, _ = new.apply(_remote_view).result()
    np.testing.assert_allclose(predicted, driver[member], rtol=1e-6)


def test_evaluation_runs_in_the_real_env():
    config = {**SMALL, "evaluation_interval": 1, "evaluation_num_workers": 1}
    config["evaluation_config"] = {"explore": False}
    trainer = MBMPOTrainer(config=config, env="Navigation2D")
    try:
        result = trainer.train()
        assert np.isfinite(result["evaluation"]["episode_reward_mean"])
        (worker,) = trainer.evaluation_workers.remote_workers()
        assert worker.apply(lambda w: type(w.async_env)).result() is VectorizedGymEnv
    finally:
        trainer.stop()


def test_checkpoint_restores_the_ensemble(tmp_path):
    trainer = MBMPOTrainer(config=SMALL, env="Navigation2D")
    try:
        trainer.train()
        path = trainer.save(str(tmp_path))
        saved = trainer.workers.local_worker().get_policy().dynamics_model
        expected = _predict_all(saved)
        buffer = saved.replay_buffer["obs"].copy()
    finally:
        trainer.stop()
    restored = Trainer.from_checkpoint(path)
    try:
        assert isinstance(restored, MBMPOTrainer)
        model = restored.workers.local_worker().get_policy().dynamics_model
        for got, want in zip(_predict_all(model), expected):
            np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(model.replay_buffer["obs"], buffer)
        views = [w.apply(_remote_view).result() for w in restored.workers.remote_workers()]
        for _, member, predicted, _ in views:
            np.testing.assert_array_equal(predicted, expected[member])
        # Fitted already: the next iteration samples one real round, not the first two.
        assert restored.train()["timesteps_total"] == 4 * ROUND
    finally:
        restored.stop()


def test_discrete_actions_train_on_cartpole():
    trainer = MBMPOTrainer(
        config={**SMALL, "env_config": {}, "dynamics_model": {**SMALL["dynamics_model"]}},
        env="CartPoleWithReward",
    )
    try:
        result = trainer.train()
        assert result["timesteps_total"] >= 3 * ROUND
        buffer = trainer.workers.local_worker().get_policy().dynamics_model.replay_buffer
        assert buffer["actions"].shape[1] == 2  # one-hot
    finally:
        trainer.stop()


def test_models_learn_env_space_actions():
    config = {**SMALL, "env_config": {}, "num_workers": 1}
    trainer = MBMPOTrainer(config=config, env="PendulumWithReward")
    try:
        trainer.train()
        actions = (
            trainer.workers.local_worker().get_policy().dynamics_model.replay_buffer["actions"]
        )
        # Pendulum's torque is in [-2, 2]; the policy acts in [-1, 1] (normalize_actions).
        assert np.abs(actions).max() > 1.0 and np.abs(actions).max() <= 2.0
    finally:
        trainer.stop()


def test_fit_dynamics_samples_the_global_worker_and_sync_stats(trainer):
    local = trainer.workers.local_worker()
    policy = local.get_policy()
    metrics = fit_dynamics(policy, "default_policy")
    # The first fit samples twice (RLlib's initial exploration).
    assert metrics["num_steps_sampled"] == 2 * ROUND
    sync_stats(trainer.workers)
    norms = policy.dynamics_model.normalizations
    remote = trainer.workers.remote_workers()[0].apply(
        lambda w: w.get_policy().dynamics_model.normalizations
    )
    np.testing.assert_allclose(remote.result()["obs"][0], norms["obs"][0])


def test_post_process_samples_uses_a_linear_baseline():
    rng = np.random.default_rng(0)
    rewards = rng.normal(size=12).astype(np.float32)
    obs = rng.normal(size=(12, 2)).astype(np.float32)
    batch = SampleBatch(
        {
            SampleBatch.OBS: obs,
            SampleBatch.REWARDS: rewards,
            SampleBatch.EPS_ID: np.array([1] * 5 + [2] * 7),
            SampleBatch.ADVANTAGES: np.zeros(12, np.float32),
        }
    )
    samples, split = post_process_samples([batch], {"gamma": 0.9, "lambda": 0.95})
    assert split == [12] and samples[0] is batch
    paths = calculate_gae_advantages(
        [
            {"rewards": rewards[:5], "observations": obs[:5]},
            {"rewards": rewards[5:], "observations": obs[5:]},
        ],
        0.9,
        0.95,
    )
    raw = np.concatenate([p["advantages"] for p in paths])
    np.testing.assert_allclose(batch["advantages"], (raw - raw.mean()) / raw.std(), rtol=1e-4)
    assert batch["advantages"].dtype == np.float32


def test_linear_feature_baseline_fits_linear_returns():
    obs = np.linspace(-1, 1, 30).reshape(-1, 1)
    t = np.arange(30) / 100.0
    path = {"observations": obs, "rewards": np.zeros(30), "returns": 2.0 * obs[:, 0] - t + 0.5}
    baseline = LinearFeatureBaseline()
    assert np.all(baseline.predict(path) == 0)
    baseline.fit([path])
    np.testing.assert_allclose(baseline.predict(path), path["returns"], atol=1e-3)


class _NoReward(RandomEnv):
    pass


class _BoxEnvWithReward(RandomEnv):
    def reward(self, obs, action, obs_next):
        return np.zeros(len(obs))


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"dynamics_model": {"ensemble_size": 0}}, "dynamics_model.ensemble_size"),
        ({"dynamics_model": {"valid_split_ratio": 1.0}}, "dynamics_model.valid_split_ratio"),
        ({"dynamics_model": {"fcnet_hiddens": []}}, "dynamics_model.fcnet_hiddens"),
        ({"dynamics_model": {"train_epochs": 0}}, "dynamics_model.train_epochs"),
        ({"dynamics_model": {"custom_model": 3}}, "dynamics_model.custom_model"),
        ({"num_maml_steps": 0}, "num_maml_steps"),
        ({"inner_adaptation_steps": 0}, "inner_adaptation_steps"),
        ({"maml_optimizer_steps": 0}, "maml_optimizer_steps"),
        ({"entropy_coeff": -0.1}, "entropy_coeff"),
        ({"num_workers": 0}, "MB-MPO needs `num_workers` >= 1"),
        ({"batch_mode": "truncate_episodes"}, "'truncate_episodes'"),
        ({"create_env_on_driver": False}, "`create_env_on_driver` must be True, got False"),
        ({"custom_vector_env": "model"}, "custom_vector_env"),
    ],
)
def test_bad_config_names_the_value(overrides, named):
    with pytest.raises((ValueError, TypeError), match=named.replace("[", r"\[")):
        MBMPOTrainer(config={**SMALL, **overrides}, env="Navigation2D")


def test_env_without_reward_is_refused():
    with pytest.raises(ValueError, match=r"does not have a `reward\(obs, action, obs_next\)`"):
        MBMPOTrainer(config={**SMALL, "env_config": {}}, env=_NoReward)


def test_image_observations_are_refused_naming_the_space():
    import gymnasium as gym

    space = gym.spaces.Box(0, 255, (8, 8, 3), np.uint8)
    env_config = {"observation_space": space, "action_space": gym.spaces.Discrete(2)}
    with pytest.raises(UnsupportedSpaceException, match=r"Box\(0, 255, \(8, 8, 3\), uint8\)"):
        MBMPOTrainer(config={**SMALL, "env_config": env_config}, env=_BoxEnvWithReward)
