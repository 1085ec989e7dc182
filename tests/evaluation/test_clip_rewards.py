"""`clip_rewards`: applied to the sampled reward column, never to the reported returns."""

import gymnasium as gym
import numpy as np
import pytest

from corral.agents.ppo import PPOTrainer
from corral.evaluation.sampler import reward_clip_bounds
from corral.policy.sample_batch import SampleBatch


class RampRewardEnv(gym.Env):
    """Rewards -3, -2, ..., 2 over a 6-step episode."""

    observation_space = gym.spaces.Box(-1.0, 1.0, (1,), np.float32)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config=None):
        self.t = 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.zeros(1, np.float32), {}

    def step(self, action):
        reward = float(self.t - 3)
        self.t += 1
        return np.zeros(1, np.float32), reward, self.t >= 6, False, {}


def sampled(clip_rewards):
    trainer = PPOTrainer(
        env=RampRewardEnv,
        config={
            "num_workers": 0,
            "rollout_fragment_length": 6,
            "train_batch_size": 6,
            "sgd_minibatch_size": 6,
            "num_sgd_iter": 1,
            "clip_rewards": clip_rewards,
            "model": {"fcnet_hiddens": [4]},
        },
    )
    try:
        worker = trainer.workers.local_worker()
        batch = worker.sampler.sample()
        returns = [m.episode_reward for m in worker.get_metrics()]
        return batch[SampleBatch.REWARDS].tolist(), returns
    finally:
        trainer.stop()


@pytest.mark.parametrize(
    ("clip_rewards", "expected"),
    [
        (None, [-3, -2, -1, 0, 1, 2]),
        (False, [-3, -2, -1, 0, 1, 2]),
        (True, [-1, -1, -1, 0, 1, 1]),
        (1.5, [-1.5, -1.5, -1, 0, 1, 1.5]),
        ((-2.0, 0.5), [-2, -2, -1, 0, 0.5, 0.5]),
    ],
)
def test_reward_column_is_clipped_returns_are_not(clip_rewards, expected):
    rewards, returns = sampled(clip_rewards)
    assert rewards == expected
    assert returns == [-3.0]


def test_bounds_rules():
    class FakeAtari:
        class spec:  # noqa: N801 - mimics gymnasium's EnvSpec attribute
            id = "ALE/Pong-v5"

    assert reward_clip_bounds(None, FakeAtari()) == (None, 0.0)
    assert reward_clip_bounds(None, RampRewardEnv()) is None
    assert reward_clip_bounds(0, RampRewardEnv()) is None
    with pytest.raises(ValueError, match="clip_rewards='x'"):
        reward_clip_bounds("x", RampRewardEnv())
    with pytest.raises(ValueError, match="low bound"):
        reward_clip_bounds((1.0, -1.0), RampRewardEnv())
