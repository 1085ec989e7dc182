"""IMPALA solves CartPole-v1 with 2 remote workers, on local processes and on Ray actors
(learning regression test).

The bar of the issue: a greedy evaluation return (10 episodes) of 450 within 500,000 env
steps, with `tuned_examples/impala/cartpole-impala.yaml` (seeds 0-5 solved at 20,000 to
120,000 steps, median 25,000). The Ray run uses CI's local Ray (`ray.init(num_cpus=2)`,
as tests/evaluation/test_ray_backend.py).
"""

import pytest

from corral.agents.impala import ImpalaTrainer

THRESHOLD = 450.0
MAX_ENV_STEPS = 500_000


def _run(learning, **overrides):
    config = learning.tuned_config("impala/cartpole-impala.yaml")
    trainer = ImpalaTrainer(
        config={**config, "seed": 0, "log_level": "ERROR", **overrides}, env="CartPole-v1"
    )
    return learning.train_until(trainer, THRESHOLD, MAX_ENV_STEPS)


@pytest.mark.learning
def test_impala_solves_cartpole(learning):
    learning.assert_solved("IMPALA", _run(learning), THRESHOLD)


@pytest.mark.learning
def test_impala_solves_cartpole_on_ray(learning, local_ray):
    learning.assert_solved("IMPALA (ray)", _run(learning, backend="ray"), THRESHOLD)
