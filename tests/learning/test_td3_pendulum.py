"""TD3 solves Pendulum-v1 with the shipped tuned example (a learning regression test)."""

import pytest

from corral.agents.ddpg import TD3Trainer

THRESHOLD = -200.0


@pytest.mark.learning
@pytest.mark.parametrize("seed", [0, 1])
def test_td3_solves_pendulum(seed, learning):
    # 10 deterministic evaluation episodes after every iteration.
    config = {
        **learning.tuned_config("ddpg/pendulum-td3.yaml"),
        "seed": seed,
        "evaluation_interval": 1,
        "evaluation_num_episodes": 10,
    }
    curve = learning.train_until(TD3Trainer(config=config, env="Pendulum-v1"), THRESHOLD, 30_000)
    learning.assert_solved(f"seed {seed}", curve, THRESHOLD)
