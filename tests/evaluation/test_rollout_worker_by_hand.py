"""A `RolloutWorker` built by hand with RLlib 1.13's keywords, and its worker-level
`learn_on_batch` / `compute_gradients` / `apply_gradients`."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from corral.agents.callbacks import DefaultCallbacks
from corral.agents.pg.pg_torch_policy import PGTorchPolicy
from corral.evaluation.rollout_worker import RolloutWorker
from corral.policy.policy import PolicySpec
from corral.policy.sample_batch import MultiAgentBatch, SampleBatch


def cartpole(ctx):
    return gym.make("CartPole-v1")


def test_rllib_1_13_keywords_build_a_worker_that_samples_and_learns():
    episodes = []

    class Count(DefaultCallbacks):
        def on_episode_end(self, *, episode, **kwargs):
            episodes.append(episode.length)

    worker = RolloutWorker(
        env_creator=cartpole,
        policy_spec=PGTorchPolicy,
        rollout_fragment_length=30,
        num_envs=2,
        batch_mode="complete_episodes",
        callbacks=Count(),  # an instance, as RLlib 1.13 passes it
        policy_config={"lr": 0.01, "model": {"fcnet_hiddens": [8]}},
        seed=3,
    )
    batch = worker.sample()
    assert isinstance(batch, SampleBatch) and batch.count >= 30
    assert episodes and sum(episodes) == batch.count  # complete episodes only
    assert worker.config["num_envs_per_worker"] == 2 and worker.async_env.num_envs == 2
    policy = worker.get_policy()
    assert policy.config["lr"] == 0.01
    before = {k: v.copy() for k, v in policy.get_weights().items()}
    info = worker.learn_on_batch(batch)
    assert set(info) == {"default_policy"} and "learner_stats" in info["default_policy"]
    after = policy.get_weights()
    assert any(not np.array_equal(before[k], after[k]) for k in before)


def test_rllib_1_13_defaults_of_a_hand_built_worker():
    worker = RolloutWorker(env_creator=cartpole, policy_spec=PGTorchPolicy)
    assert worker.config["rollout_fragment_length"] == 100  # the worker's default, not 200
    assert worker.sample().count == 100


def test_worker_gradients_computed_then_applied_match_learn_on_batch():
    def build():
        return RolloutWorker(
            env_creator=cartpole,
            policy_spec={"p": PolicySpec(PGTorchPolicy)},
            policy_mapping_fn=lambda agent_id, episode, worker, **kw: "p",
            rollout_fragment_length=20,
            seed=1,
        )

    a, b = build(), build()
    multi = a.sample()  # a single-agent env's batch, under the policy the mapping names
    assert isinstance(multi, MultiAgentBatch) and set(multi.policy_batches) == {"p"}
    grads, info = a.compute_gradients(multi)
    assert set(grads) == set(info) == {"p"}
    a.apply_gradients(grads)
    b.set_weights(build().get_weights())  # the same seed: the same start
    b.learn_on_batch(multi)
    for key, value in a.get_policy("p").get_weights().items():
        np.testing.assert_allclose(value, b.get_policy("p").get_weights()[key], rtol=1e-5)


def test_bad_hand_built_worker_arguments_are_named():
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) \['num_env'\]"):
        RolloutWorker(env_creator=cartpole, policy_spec=PGTorchPolicy, num_env=2)
    with pytest.raises(TypeError, match="needs its policies"):
        RolloutWorker(env_creator=cartpole)
    with pytest.raises(TypeError, match="not both"):
        RolloutWorker(env_creator=cartpole, policy_specs={}, config={}, num_envs=2)


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"rollout_fragment_length": 0}, ValueError, r"RolloutWorker\(rollout_fragment_length=0\)"),
        ({"num_envs": 0}, ValueError, r"RolloutWorker\(num_envs=0\).*num_envs_per_worker"),
        ({"batch_mode": "episodes"}, ValueError, r"RolloutWorker\(batch_mode='episodes'\)"),
        ({"seed": -1}, ValueError, r"RolloutWorker\(seed=-1\)"),
        ({"clip_rewards": "yes"}, TypeError, r"RolloutWorker\(clip_rewards='yes'\)"),
        (
            {"remote_worker_envs": True, "num_envs": 2, "remote_env_batch_wait_ms": -10},
            ValueError,
            r"RolloutWorker\(remote_env_batch_wait_ms=-10\)",
        ),
    ],
)
def test_hand_built_worker_keywords_are_checked_as_a_trainer_checks_its_config(
    kwargs, error, match
):
    with pytest.raises(error, match=match):
        RolloutWorker(env_creator=cartpole, policy_spec=PGTorchPolicy, **kwargs)
