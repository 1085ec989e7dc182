"""DD-PPO solves CartPole-v1 with 2 rollout workers that are its learners, on local
processes and on Ray actors (a learning regression test).

The bar: a greedy evaluation return (10 episodes) of 450 within 100,000 env steps, with
`tuned_examples/ddppo/cartpole-ddppo.yaml` (seeds 0-5 reached 475 within 2,048-21,504
steps, 3-10 s on 2 cores). The Ray run uses CI's local Ray (`ray.init(num_cpus=2)`).
"""

import pytest

from corral.agents.ppo import DDPPOTrainer

THRESHOLD = 450.0
MAX_ENV_STEPS = 100_000


def _solves(learning, name, seed, **overrides):
    config = learning.tuned_config("ddppo/cartpole-ddppo.yaml")
    trainer = DDPPOTrainer(
        config={**config, "seed": seed, "log_level": "ERROR", **overrides}, env="CartPole-v1"
    )
    curve = learning.train_until(trainer, THRESHOLD, MAX_ENV_STEPS)
    learning.assert_solved(f"{name}, seed {seed}", curve, THRESHOLD)


@pytest.mark.learning
@pytest.mark.parametrize("seed", [0, 1])
def test_ddppo_solves_cartpole(learning, seed):
    _solves(learning, "DD-PPO", seed)


@pytest.mark.learning
def test_ddppo_solves_cartpole_on_ray(learning, local_ray):
    _solves(learning, "DD-PPO (ray)", 0, backend="ray")
