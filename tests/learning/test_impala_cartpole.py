"""IMPALA solves CartPole-v1 with 2 remote workers (learning regression test).

The bar of the issue: a greedy evaluation return (10 episodes) of 450 within 500,000 env
steps, with `tuned_examples/impala/cartpole-impala.yaml` (seeds 0-5 solved at 20,000 to
120,000 steps, median 25,000).
"""

import pytest

from corral.agents.impala import ImpalaTrainer

THRESHOLD = 450.0
MAX_ENV_STEPS = 500_000


@pytest.mark.learning
def test_impala_solves_cartpole(learning):
    config = learning.tuned_config("impala/cartpole-impala.yaml")
    trainer = ImpalaTrainer(config={**config, "seed": 0, "log_level": "ERROR"}, env="CartPole-v1")
    curve = learning.train_until(trainer, THRESHOLD, MAX_ENV_STEPS)
    learning.assert_solved("IMPALA", curve, THRESHOLD)
