"""SAC solves Pendulum-v1 with the shipped tuned example (a learning regression test)."""

import pytest

from corral.agents.sac import SACTrainer

THRESHOLD = -200.0


@pytest.mark.learning
@pytest.mark.parametrize("seed", [0, 1])
def test_sac_solves_pendulum(seed, learning):
    # 10 deterministic evaluation episodes after every iteration.
    config = {
        **learning.tuned_config("sac/pendulum-sac.yaml"),
        "seed": seed,
        "evaluation_interval": 1,
        "evaluation_num_episodes": 10,
    }
    curve = learning.train_until(SACTrainer(config=config, env="Pendulum-v1"), THRESHOLD, 20_000)
    learning.assert_solved(f"seed {seed}", curve, THRESHOLD)
