"""RNNSAC learns CartPole with hidden velocities (StatelessCartPole) with discrete actions:
its LSTM actor and critics have to infer them from the replayed sequences (a feed-forward
SAC stays far below the bar)."""

import pytest

from corral.agents.sac import RNNSACTrainer

TUNED = "sac/stateless-cartpole-rnnsac.yaml"
MAX_ENV_STEPS = 20_000
# RLlib 1.13's example stops at a mean return of 65.
THRESHOLD = 65.0


@pytest.mark.learning
def test_rnnsac_learns_stateless_cartpole(learning):
    config = {
        **learning.tuned_config(TUNED),
        "seed": 0,
        # 10 greedy evaluation episodes every 2 iterations (2,000 env steps).
        "evaluation_interval": 2,
        "evaluation_num_episodes": 10,
        "evaluation_config": {"explore": False},
    }
    assert config["policy_model"]["use_lstm"] and config["Q_model"]["use_lstm"]
    trainer = RNNSACTrainer(config=config, env="corral.env.stateless_cartpole.StatelessCartPole")
    curve = learning.train_until(trainer, THRESHOLD, MAX_ENV_STEPS)
    learning.assert_solved("RNNSAC on StatelessCartPole", curve, THRESHOLD)
