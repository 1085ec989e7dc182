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


def _run(learning, seed=0, **overrides):
    config = learning.tuned_config("appo/cartpole-appo.yaml")
    trainer = APPOTrainer(
        config={**config, "seed": seed, "log_level": "ERROR", **overrides}, env="CartPole-v1"
    )
    return learning.train_until(trainer, THRESHOLD, MAX_ENV_STEPS)


def _solves(learning, name, **overrides):
    """APPO's learner runs asynchronously to its workers, so a seed does not fix a run,
    and now and then one collapses before the bar (1 of 11 local runs in one session:
    66.7 after 500,000 steps; the others solved within 101,200-371,800). A run that
    misses gets one more try with another seed: broken learning fails both."""
    curve = _run(learning, **overrides)
    if curve[-1][1] < THRESHOLD:
        print(f"{name}: seed 0 missed ({curve[-1]}); one more run with seed 1")
        curve = _run(learning, seed=1, **overrides)
    learning.assert_solved(name, curve, THRESHOLD)


@pytest.mark.learning
def test_appo_solves_cartpole(learning):
    _solves(learning, "APPO")


@pytest.mark.learning
def test_appo_solves_cartpole_on_ray(learning, local_ray):
    _solves(learning, "APPO (ray)", backend="ray")
