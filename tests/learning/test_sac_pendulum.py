"""SAC solves Pendulum-v1 with the shipped tuned example (a learning regression test)."""

from pathlib import Path

import pytest
import yaml

from corral.agents.sac import SACTrainer

TUNED = Path(__file__).parents[2] / "tuned_examples" / "sac" / "pendulum-sac.yaml"
MAX_ENV_STEPS = 20_000
THRESHOLD = -200.0


def tuned_config() -> dict:
    (experiment,) = yaml.safe_load(TUNED.read_text()).values()
    return experiment["config"]


@pytest.mark.learning
@pytest.mark.parametrize("seed", [0, 1])
def test_sac_solves_pendulum(seed):
    # 10 deterministic evaluation episodes after every 1,000 env steps.
    config = {
        **tuned_config(),
        "seed": seed,
        "evaluation_interval": 1,
        "evaluation_num_episodes": 10,
    }
    trainer = SACTrainer(config=config, env="Pendulum-v1")
    curve = []
    try:
        while True:
            result = trainer.train()
            curve.append((result["timesteps_total"], result["evaluation"]["episode_reward_mean"]))
            if curve[-1][1] >= THRESHOLD or result["timesteps_total"] >= MAX_ENV_STEPS:
                break
    finally:
        trainer.stop()
    steps, reward = curve[-1]
    print(f"seed {seed}: evaluation return {reward:.1f} after {steps} env steps; curve {curve}")
    assert reward >= THRESHOLD, f"seed {seed}: only {reward:.1f} after {steps} steps: {curve}"
