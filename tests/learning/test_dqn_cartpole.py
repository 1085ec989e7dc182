"""DQN solves CartPole-v1 with the shipped tuned example (a learning regression test)."""

from pathlib import Path

import pytest
import yaml

from corral.agents.dqn import DQNTrainer

TUNED = Path(__file__).parents[2] / "tuned_examples" / "dqn" / "cartpole-dqn.yaml"
MAX_ENV_STEPS = 100_000
THRESHOLD = 450.0


def tuned_config() -> dict:
    (experiment,) = yaml.safe_load(TUNED.read_text()).values()
    return experiment["config"]


@pytest.mark.learning
@pytest.mark.parametrize("seed", [0, 1])
def test_dqn_solves_cartpole(seed):
    config = {
        **tuned_config(),
        "seed": seed,
        # 20 greedy evaluation episodes every 2 iterations (2,048 env steps).
        "evaluation_interval": 2,
        "evaluation_num_episodes": 20,
        "evaluation_config": {"explore": False},
    }
    trainer = DQNTrainer(config=config, env="CartPole-v1")
    curve = []
    try:
        while True:
            result = trainer.train()
            if "evaluation" in result:
                curve.append(
                    (result["timesteps_total"], result["evaluation"]["episode_reward_mean"])
                )
                if curve[-1][1] >= THRESHOLD:
                    break
            if result["timesteps_total"] >= MAX_ENV_STEPS:
                break
    finally:
        trainer.stop()
    steps, reward = curve[-1]
    print(f"seed {seed}: evaluation return {reward:.1f} after {steps} env steps; curve {curve}")
    assert reward >= THRESHOLD, f"seed {seed}: only {reward:.1f} after {steps} steps: {curve}"
