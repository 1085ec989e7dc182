"""PPO learns in an integer ``Box`` action space: its greedy action moves onto the one
rewarded most in each of two contexts (a one-step task, so the test is quick and its
outcome clear)."""

from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from corral.agents.ppo import PPOTrainer

# Each element chooses among -1, 0, 1, 2; the best actions (one per context, the
# observation's one-hot) use both bounds and differ in every element.
SPACE = gym.spaces.Box(-1, 2, (2, 2), np.int16)
TARGETS = np.array([[[2, -1], [0, 1]], [[-1, 2], [1, 0]]], np.int16)
CONTEXTS = np.eye(2, dtype=np.float32)


class PickTheTarget(gym.Env):
    """One step per episode in a random context: the reward is the number of elements
    equal to that context's target, minus a little for each unit of distance (so every
    element has a gradient)."""

    observation_space = gym.spaces.Box(0.0, 1.0, (2,), np.float32)
    action_space = SPACE

    def __init__(self, config: Any = None) -> None:
        self.context = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.context = int(self.np_random.integers(2))
        return CONTEXTS[self.context], {}

    def step(self, action: np.ndarray):
        # The space's own dtype and shape reach the env, within its bounds.
        assert self.action_space.contains(action), (action, getattr(action, "dtype", None))
        diff = np.abs(action.astype(np.int64) - TARGETS[self.context])
        reward = float((diff == 0).sum() - 0.1 * diff.sum())
        return CONTEXTS[self.context], reward, True, False, {}


def greedy_actions(trainer: PPOTrainer) -> list[np.ndarray]:
    return [trainer.compute_single_action(obs, explore=False) for obs in CONTEXTS]


def all_on_target(actions: list[np.ndarray]) -> bool:
    return all(np.array_equal(a, t) for a, t in zip(actions, TARGETS))


@pytest.mark.learning
def test_ppo_greedy_action_moves_onto_the_best_int_box_action():
    trainer = PPOTrainer(
        config={
            "num_workers": 0,
            "seed": 0,
            "rollout_fragment_length": 200,
            "train_batch_size": 200,
            "sgd_minibatch_size": 50,
            "num_sgd_iter": 10,
            "lr": 3e-3,
            "entropy_coeff": 0.0,
            "model": {"fcnet_hiddens": [16]},
        },
        env=PickTheTarget,
    )
    try:
        assert not all_on_target(greedy_actions(trainer))  # (a test that can fail)
        for _ in range(20):
            result = trainer.train()
            greedy = greedy_actions(trainer)
            if all_on_target(greedy):
                break
        assert all(a.dtype == np.int16 and a.shape == (2, 2) for a in greedy)
        assert all_on_target(greedy), (greedy, result["episode_reward_mean"])
    finally:
        trainer.stop()
