"""`fake_sampler: True`: a worker samples once, then hands out that same batch again (RLlib
1.13's benchmark of the learner alone)."""

from __future__ import annotations

import gymnasium as gym
import numpy as np

from corral.agents.callbacks import DefaultCallbacks
from corral.agents.pg.pg_torch_policy import PGTorchPolicy
from corral.agents.ppo import PPOTrainer
from corral.evaluation.rollout_worker import RolloutWorker
from corral.policy.sample_batch import SampleBatch


class _CountingEnv(gym.Env):
    """CartPole that counts its steps (in this process)."""

    steps = 0

    def __init__(self, config=None):
        self.env = gym.make("CartPole-v1")
        self.observation_space = self.env.observation_space
        self.action_space = self.env.action_space

    def reset(self, *, seed=None, options=None):
        return self.env.reset(seed=seed)

    def step(self, action):
        type(self).steps += 1
        return self.env.step(action)


def test_worker_returns_the_first_batch_again_without_stepping_its_env():
    ends = []

    class Count(DefaultCallbacks):
        def on_sample_end(self, *, samples, **kwargs):
            ends.append(samples.count)

    worker = RolloutWorker(
        env_creator=lambda ctx: _CountingEnv(),
        policy_spec=PGTorchPolicy,
        rollout_fragment_length=20,
        fake_sampler=True,
        callbacks=Count(),
        seed=1,
    )
    _CountingEnv.steps = 0
    first = worker.sample()
    stepped = _CountingEnv.steps
    assert stepped == 20 and ends == [20]
    for _ in range(3):
        again = worker.sample()
        assert isinstance(again, SampleBatch) and again is not first
        assert set(again) == set(first)
        for key in first:
            if key != SampleBatch.INFOS:
                np.testing.assert_array_equal(again[key], first[key])
    assert _CountingEnv.steps == stepped  # no env step after the first batch
    assert ends == [20]  # RLlib's fake sampler returns before the callbacks
    # What a caller replaces in its batch does not reach the stored one.
    again[SampleBatch.REWARDS] = np.zeros(20, np.float32)
    np.testing.assert_array_equal(worker.sample()[SampleBatch.REWARDS], first[SampleBatch.REWARDS])


def test_a_worker_without_it_samples_anew():
    worker = RolloutWorker(
        env_creator=lambda ctx: gym.make("CartPole-v1"),
        policy_spec=PGTorchPolicy,
        rollout_fragment_length=20,
        seed=1,
    )
    first, second = worker.sample(), worker.sample()
    assert not np.array_equal(first[SampleBatch.OBS], second[SampleBatch.OBS])


def test_ppo_trains_on_the_same_batch_every_iteration(env_name):
    trained_on = []

    class Record(DefaultCallbacks):
        def on_learn_on_batch(self, *, policy, train_batch, result, **kwargs):
            trained_on.append(np.array(train_batch[SampleBatch.OBS]))

    trainer = PPOTrainer(
        env=env_name(lambda ctx: gym.make("CartPole-v1")),
        config={
            "num_workers": 0,
            "fake_sampler": True,
            "callbacks": Record,
            "rollout_fragment_length": 64,
            "train_batch_size": 64,
            "sgd_minibatch_size": 32,
            "num_sgd_iter": 2,
            "model": {"fcnet_hiddens": [16]},
            "seed": 2,
        },
    )
    policy = trainer.get_policy()
    weights = [policy.get_weights()]
    results = []
    try:
        for _ in range(3):
            results.append(trainer.train())
            weights.append(policy.get_weights())
    finally:
        trainer.stop()
    # Each iteration trains on the very same rows, and its update moves the weights.
    assert len(trained_on) == 3
    for obs in trained_on[1:]:
        np.testing.assert_array_equal(obs, trained_on[0])
    for before, after in zip(weights, weights[1:]):
        assert any(not np.array_equal(before[k], after[k]) for k in before)
    assert [r["timesteps_total"] for r in results] == [64, 128, 192]
    for r in results:
        assert np.isfinite(r["info"]["learner"]["default_policy"]["learner_stats"]["total_loss"])
