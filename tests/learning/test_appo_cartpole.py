"""APPO solves CartPole-v1 with 2 remote workers, on local processes and on Ray actors
(learning regression test).

The bar of the issue: a greedy evaluation return (10 episodes) of 450 within 500,000 env
steps, with `tuned_examples/appo/cartpole-appo.yaml`. The Ray run uses CI's local Ray
(`ray.init(num_cpus=2)`, as tests/evaluation/test_ray_backend.py).
"""

import pytest

from corral.agents.ppo import APPOTrainer

THRESHOLD = 450.0
MAX_ENV_STEPS = 500_000


def _run(learning, **overrides):
    config = learning.tuned_config("appo/cartpole-appo.yaml")
    trainer = APPOTrainer(
        config={**config, "seed": 0, "log_level": "ERROR", **overrides}, env="CartPole-v1"
    )
    return learning.train_until(trainer, THRESHOLD, MAX_ENV_STEPS)


@pytest.mark.learning
def test_appo_solves_cartpole(learning):
    learning.assert_solved("APPO", _run(learning), THRESHOLD)


@pytest.mark.learning
def test_appo_solves_cartpole_on_ray(learning, local_ray):
    learning.assert_solved("APPO (ray)", _run(learning, backend="ray"), THRESHOLD)
