"""R2D2 learns CartPole with hidden velocities (StatelessCartPole): its LSTM Q-network has to
infer them from the replayed sequences (a feed-forward learner stays far below the bar)."""

import pytest

from corral.agents.dqn import R2D2Trainer

TUNED = "r2d2/stateless-cartpole-r2d2.yaml"
MAX_ENV_STEPS = 40_000
THRESHOLD = 100.0


@pytest.mark.learning
def test_r2d2_learns_stateless_cartpole(learning):
    config = {
        **learning.tuned_config(TUNED),
        "seed": 0,
        # 10 greedy evaluation episodes every 2 iterations (2,000 env steps).
        "evaluation_interval": 2,
        "evaluation_num_episodes": 10,
        "evaluation_config": {"explore": False},
    }
    assert config["model"]["use_lstm"]
    trainer = R2D2Trainer(config=config, env="corral.env.stateless_cartpole.StatelessCartPole")
    curve = learning.train_until(trainer, THRESHOLD, MAX_ENV_STEPS)
    learning.assert_solved("R2D2 on StatelessCartPole", curve, THRESHOLD)
