"""PPO solves CartPole-v1 with the shipped tuned example (a learning regression test)."""

import pytest

from corral.agents.ppo import PPOTrainer

THRESHOLD = 475.0


@pytest.mark.learning
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ppo_solves_cartpole(seed, learning):
    tuned = learning.tuned_config("ppo/cartpole-ppo.yaml")
    config = {
        **tuned,
        "seed": seed,
        # 20 deterministic evaluation episodes every 2,048 env steps.
        "evaluation_interval": max(1, 2048 // tuned["train_batch_size"]),
        "evaluation_num_episodes": 20,
        "evaluation_config": {"explore": False},
    }
    curve = learning.train_until(PPOTrainer(config=config, env="CartPole-v1"), THRESHOLD, 100_000)
    learning.assert_solved(f"seed {seed}", curve, THRESHOLD)
