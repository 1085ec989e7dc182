"""A3C learns CartPole-v1 with 2 remote workers, on local processes and on Ray actors
(learning regression test).

The bar of the issue: a mean return of 150 within 200,000 env steps. A greedy evaluation
gets there within the first 10,000 steps, so the test asks more: the mean *training*
return (the stochastic policy's last 100 episodes, `episode_reward_mean`), with
`tuned_examples/a3c/cartpole-a3c.yaml`.
"""

import pytest

from corral.agents.a3c import A3CTrainer

THRESHOLD = 150.0
MAX_ENV_STEPS = 200_000


def _run(learning, **overrides):
    config = learning.tuned_config("a3c/cartpole-a3c.yaml")
    config = {**config, "evaluation_interval": None, "seed": 0, "log_level": "ERROR", **overrides}
    trainer = A3CTrainer(config=config, env="CartPole-v1")
    curve = []
    try:
        while True:
            result = trainer.train()
            curve.append((result["timesteps_total"], result["episode_reward_mean"]))
            if curve[-1][1] >= THRESHOLD or curve[-1][0] >= MAX_ENV_STEPS:
                return curve
    finally:
        trainer.stop()


def _assert_learned(name, curve):
    steps, reward = curve[-1]
    print(f"{name}: mean training return {reward:.1f} after {steps} env steps; curve {curve}")
    assert reward >= THRESHOLD, f"{name}: only {reward:.1f} after {steps} steps: {curve}"


@pytest.mark.learning
def test_a3c_learns_cartpole(learning):
    _assert_learned("A3C", _run(learning))


@pytest.mark.learning
def test_a3c_learns_cartpole_on_ray(learning, local_ray):
    _assert_learned("A3C (ray)", _run(learning, backend="ray"))
