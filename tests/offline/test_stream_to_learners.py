"""MARWIL / BC with ``stream_to_learners``: a Ray Data dataset streamed to the learners
(`data_iterators`), each learner preparing the rows it reads with its own policy.

Runs on a local Ray instance; skipped when the `ray` extra is not installed.
"""

from __future__ import annotations

import copy
import functools
import gc

import gymnasium as gym
import numpy as np
import pytest

from corral.agents.marwil import BCTrainer, MARWILTrainer
from corral.offline.dataset_reader import STREAM_CONFIG_KEYS, prepare_streamed_rows
from corral.policy.sample_batch import SampleBatch

ray = pytest.importorskip("ray", reason="the `ray` extra is not installed (pip install ray)")
pytest.importorskip("ray.data")

SPACES = {
    "observation_space": gym.spaces.Box(-np.inf, np.inf, (4,), np.float32),
    "action_space": gym.spaces.Discrete(2),
}


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    gc.collect()  # Ray Data generators left in reference cycles end while Ray is up
    ray.shutdown()


def _expert(obs: np.ndarray) -> int:
    """The action to clone: push towards the side the pole falls to."""
    return int(obs[2] + 0.5 * obs[3] > 0)


@pytest.fixture(scope="module")
def expert_rows(cartpole_steps):
    """CartPole states of a random walk, labelled with the expert's actions."""
    return cartpole_steps(3000, label=_expert)[1]


def _config(dataset, **extra):
    return {
        "input": dataset,
        **SPACES,
        "stream_to_learners": True,
        "input_evaluation": [],
        "train_batch_size": 100,
        "evaluation_interval": None,
        "model": {"fcnet_hiddens": [32]},
        "seed": 0,
        **extra,
    }


def _columns(rows: list[dict]) -> dict[str, np.ndarray]:
    return {k: np.asarray([r[k] for r in rows]) for k in rows[0]}


def test_one_step_equals_an_update_on_the_rows_a_rollout_worker_would_read(expert_rows):
    # The same first train_batch_size rows, prepared as a rollout worker's DatasetReader
    # prepares them (MARWIL's discounted returns with postprocess_inputs, bootstrapped
    # from the policy's value at the fragment's cut): one streamed training step equals
    # one update on them.
    dataset = ray.data.from_items(expert_rows).repartition(1)  # one block: order kept
    streamed = MARWILTrainer(config=_config(dataset, gamma=0.9))
    reference = MARWILTrainer(config=_config(dataset, gamma=0.9, stream_to_learners=False))
    try:
        policy = reference.get_policy()
        start = policy.get_weights()
        for k, v in streamed.get_policy().get_weights().items():
            assert np.array_equal(v, start[k]), k
        read = reference.workers.local_worker().sample()
        assert read.count == 100
        np.testing.assert_array_equal(read["obs"], _columns(expert_rows[:100])["obs"])
        keep = (SampleBatch.OBS, SampleBatch.ACTIONS, SampleBatch.ADVANTAGES)
        reference.learner_group.update(
            batch=SampleBatch({k: read[k] for k in keep}), num_epochs=1, minibatch_size=None
        )

        result = streamed.train()
        assert result["info"]["num_env_steps_trained"] == 100
        expected, got = policy.get_weights(), streamed.get_policy().get_weights()
        for k in expected:
            np.testing.assert_allclose(got[k], expected[k], atol=1e-6, err_msg=k)
        assert any(not np.array_equal(got[k], start[k]) for k in got)
    finally:
        streamed.stop()
        reference.stop()


@pytest.mark.parametrize("backend", ["local", "ray"])
def test_bc_clones_the_expert_from_a_stream_split_between_two_learners(
    expert_rows, backend, cartpole_steps
):
    dataset = ray.data.from_items(expert_rows)
    trainer = BCTrainer(
        config=_config(dataset, num_learners=2, lr=1e-2, backend=backend, train_batch_size=200)
    )
    try:
        for _ in range(40):
            result = trainer.train()
        assert result["info"]["num_env_steps_trained"] == 40 * 200
        stats = result["info"]["learner"]["default_policy"]["learner_stats"]
        assert np.isfinite(stats["policy_loss"])
        held_out = _columns(cartpole_steps(1000, seed=1, label=_expert)[1])
        actions, _, _ = trainer.get_policy().compute_actions(held_out["obs"], explore=False)
        accuracy = float(np.mean(actions == held_out["actions"]))
        assert accuracy > 0.9, accuracy
        # The learners stayed in step (the driver holds learner 0's weights).
        remote = trainer.learner_group.remote_learners
        assert len(remote) == 2
    finally:
        trainer.stop()


def test_stopping_the_trainer_ends_the_stream_it_holds_open(expert_rows):
    # A pass left open would be finalised by the garbage collector at any later time,
    # possibly after ray.shutdown() and inside unrelated code.
    from corral.core.learner import training_data

    trainer = BCTrainer(config=_config(ray.data.from_items(expert_rows)))
    trainer.train()
    iterators = trainer._stream._iterators
    assert any(it in training_data._STREAMS for it in iterators)
    trainer.stop()
    assert not any(it in training_data._STREAMS for it in iterators)


def test_actions_are_adapted_as_the_workers_readers_adapt_them():
    # clip_actions / normalize_actions apply to streamed rows as to read ones.
    box = gym.spaces.Box(-2.0, 2.0, (1,), np.float32)
    trainer = BCTrainer(
        config={
            "input": ray.data.from_items([{"obs": np.zeros(4, np.float32), "actions": [1.0]}]),
            "observation_space": SPACES["observation_space"],
            "action_space": box,
            "stream_to_learners": True,
            "normalize_actions": True,
            "postprocess_inputs": False,
            "evaluation_interval": None,
        }
    )
    try:
        prepare = functools.partial(
            prepare_streamed_rows,
            config={k: trainer.config.get(k) for k in STREAM_CONFIG_KEYS},
            shapes={},
        )
        rows = {"obs": np.zeros((2, 4), np.float32), "actions": np.array([[1.0], [3.0]])}
        batch = prepare(trainer.get_policy(), copy.deepcopy(rows))
        # Normalised from [-2, 2] to [-1, 1]; 3.0 (outside the bounds) maps past 1.
        np.testing.assert_allclose(batch["actions"][:, 0], [0.5, 1.5])
        assert batch["actions"].dtype == np.float32
    finally:
        trainer.stop()


def _pendulum_steps(n: int) -> list[dict]:
    """n Pendulum-v1 steps of uniform random actions (actions in the env's [-2, 2])."""
    env = gym.make("Pendulum-v1")
    obs, _ = env.reset(seed=0)
    env.action_space.seed(0)
    rows, eps_id = [], 0
    for _ in range(n):
        action = env.action_space.sample()
        new_obs, reward, term, trunc, _ = env.step(action)
        rows.append(
            {
                "obs": obs.astype(np.float32),
                "actions": action.astype(np.float32),
                "rewards": float(reward),
                "new_obs": new_obs.astype(np.float32),
                "terminateds": bool(term),
                "truncateds": bool(trunc),
                "eps_id": eps_id,
            }
        )
        obs = new_obs
        if term or trunc:
            (obs, _), eps_id = env.reset(), eps_id + 1
    return rows


@pytest.mark.parametrize("algo", ["CQL", "CQL_DQN"])
def test_cql_trains_on_a_stream_split_between_two_learners(algo, cartpole_steps):
    from corral.agents.cql import CQLDQNTrainer, CQLTrainer

    if algo == "CQL":
        rows, env = _pendulum_steps(600), gym.make("Pendulum-v1")
        cls, extra = CQLTrainer, {"bc_iters": 2, "num_actions": 2}
    else:
        env, rows = cartpole_steps(600, label=_expert)
        cls, extra = CQLDQNTrainer, {"target_network_update_freq": 200}
    trainer = cls(
        config={
            "input": ray.data.from_items(rows),
            "observation_space": env.observation_space,
            "action_space": env.action_space,
            "stream_to_learners": True,
            "num_learners": 2,
            "train_batch_size": 64,
            "evaluation_interval": None,
            # One training step per train() (the off-policy default reports every 1,000).
            "min_sample_timesteps_per_reporting": 0,
            "min_time_s_per_reporting": 0,
            "seed": 0,
            **extra,
        }
    )
    try:
        before = trainer.get_policy().get_weights()
        for _ in range(4):
            result = trainer.train()
        assert result["info"]["num_env_steps_trained"] == 4 * 64
        stats = result["info"]["learner"]["default_policy"]["learner_stats"]
        assert all(np.isfinite(v) for v in stats.values() if np.isscalar(v))
        after = trainer.get_policy().get_weights()
        changed = [k for k in after if not np.array_equal(before[k], after[k])]
        assert changed and any("target" not in k for k in changed)
        if algo == "CQL_DQN":  # 256 rows "sampled": one hard target update at 200
            assert result["num_target_updates"] == 1
    finally:
        trainer.stop()


def test_bad_configs_are_named(caplog, cartpole_steps):
    from corral.agents.ppo import PPOTrainer

    with pytest.raises(ValueError, match="must be a ray.data.Dataset or 'dataset'"):
        BCTrainer(config={"input": "/some/json/dir", **SPACES, "stream_to_learners": True})
    dataset = ray.data.from_items(cartpole_steps(10)[1])
    with pytest.raises(ValueError, match="`num_workers` must be 0"):
        BCTrainer(config=_config(dataset, num_workers=1))
    with pytest.raises(ValueError, match="PPO does not stream its input to the learners"):
        PPOTrainer(config=_config(dataset), env="CartPole-v1")
    with pytest.raises(ValueError, match="lack columns"):
        prepare_streamed_rows(
            None,
            {"obs": np.zeros((2, 4), np.float32)},
            config={"postprocess_inputs": False},
            shapes={},
            require=("obs", "actions"),
        )
    with caplog.at_level("WARNING", logger="corral.execution.learner_stream"):
        BCTrainer(config=_config(dataset, input_evaluation=["is"])).stop()
    assert "input_evaluation=['is'] are not computed" in caplog.text
