"""LinUCB and linear Thompson sampling learn a linear contextual bandit (learning tests).

The env is RLlib 1.13's `LinearDiscreteEnv` (8 Gaussian context features, 4 arms whose
payoffs are `x^T theta_arm` with unit-norm thetas, reward noise 0.01), on Gymnasium. A
uniformly random choice has a regret of about 0.37 per step. Both trainers run with
RLlib 1.13's defaults (one update per step, 100 steps per iteration) until their regret
over the last 500 steps is below a tenth of that; their greedy choices on new contexts
must then be (almost) the best arms. A few seconds each on 2 CPUs.
"""

import time

import gymnasium as gym
import numpy as np
import pytest

from corral.agents.registry import get_trainer_class

RANDOM_REGRET = 0.37
# Mean regret per step over the last 500 training steps (exploring).
REGRET_BAR = RANDOM_REGRET / 10
# Mean regret per step of the greedy (explore=False) choices on new contexts.
GREEDY_REGRET_BAR = 0.01


class LinearDiscreteEnv(gym.Env):
    """Contexts ~ N(0, 1/9 I) in 8 dimensions; arm i pays `x^T theta_i` plus N(0, 0.01^2);
    `info["regret"]` is the best arm's payoff minus the chosen one's. One step per episode."""

    def __init__(self, config=None):
        rng = np.random.default_rng(7)  # the arms are the same in every env copy
        thetas = rng.uniform(-1, 1, (4, 8))
        self.thetas = thetas / np.linalg.norm(thetas, axis=1, keepdims=True)
        self.observation_space = gym.spaces.Box(-10, 10, (8,), np.float32)
        self.action_space = gym.spaces.Discrete(4)
        self.context = np.zeros(8, np.float32)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        self.context = self.np_random.normal(scale=1 / 3, size=8).astype(np.float32)
        return self.context, {}

    def step(self, action):
        payoffs = self.thetas @ self.context
        regret = float(payoffs.max() - payoffs[action])
        reward = float(payoffs[action] + self.np_random.normal(scale=0.01))
        return self.context, reward, True, False, {"regret": regret}


def greedy_regret(trainer, n=500) -> float:
    """Mean regret of the policy's greedy choices on `n` new contexts."""
    env = LinearDiscreteEnv()
    contexts = np.random.default_rng(123).normal(scale=1 / 3, size=(n, 8)).astype(np.float32)
    actions, _, _ = trainer.get_policy().compute_actions(contexts, explore=False)
    payoffs = contexts @ env.thetas.T
    return float(np.mean(payoffs.max(axis=1) - payoffs[np.arange(n), actions]))


@pytest.mark.learning
@pytest.mark.parametrize("name", ["BanditLinUCB", "BanditLinTS"])
def test_linear_bandit_reaches_low_regret(name):
    trainer = get_trainer_class(name)(
        config={"seed": 0, "log_level": "ERROR"}, env=LinearDiscreteEnv
    )
    start = time.perf_counter()
    regrets = [0.0]  # cumulative regret after each iteration
    try:
        while True:
            result = trainer.train()
            stats = result["info"]["learner"]["default_policy"]["learner_stats"]
            regrets.append(stats["cumulative_regret"])
            recent = (regrets[-1] - regrets[max(0, len(regrets) - 6)]) / 500
            if len(regrets) > 5 and recent < REGRET_BAR:
                break
            if result["timesteps_total"] >= 6000:
                break
        greedy = greedy_regret(trainer)
    finally:
        trainer.stop()
    per_iteration = np.round(np.diff(regrets) / 100, 4).tolist()
    print(
        f"{name}: regret/step {recent:.4f} over the last 500 of {result['timesteps_total']} "
        f"steps, greedy {greedy:.4f}, {time.perf_counter() - start:.1f} s; per "
        f"iteration {per_iteration}"
    )
    assert recent < REGRET_BAR, per_iteration
    assert greedy < GREEDY_REGRET_BAR
