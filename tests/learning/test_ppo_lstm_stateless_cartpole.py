"""PPO with an LSTM solves CartPole with hidden velocities; without it PPO cannot.

Issue #6's learning requirement, on the shipped tuned example: the LSTM run reaches a mean
training return of 150 within 200,000 env steps, and the same config without the LSTM stays
clearly below after as many env steps as the LSTM run needed.
"""

from pathlib import Path

import pytest
import yaml

from corral.agents.ppo import PPOTrainer

TUNED = Path(__file__).parents[2] / "tuned_examples" / "ppo" / "stateless-cartpole-lstm-ppo.yaml"
MAX_ENV_STEPS = 200_000
THRESHOLD = 150.0
FEEDFORWARD_CEILING = 100.0


def tuned_experiment() -> dict:
    (experiment,) = yaml.safe_load(TUNED.read_text()).values()
    return experiment


def train(config: dict, env: str, max_steps: int, threshold: float | None) -> list:
    """(env steps, training episode_reward_mean) per iteration, until `threshold` or
    `max_steps`."""
    trainer = PPOTrainer(config=config, env=env)
    curve = []
    try:
        while True:
            result = trainer.train()
            curve.append((result["timesteps_total"], result["episode_reward_mean"]))
            if threshold is not None and curve[-1][1] >= threshold:
                break
            if curve[-1][0] >= max_steps:
                break
    finally:
        trainer.stop()
    return curve


def summary(curve: list) -> str:
    return ", ".join(f"{steps}: {reward:.1f}" for steps, reward in curve[::10] + curve[-1:])


@pytest.mark.learning
def test_ppo_lstm_solves_stateless_cartpole_and_feedforward_does_not():
    experiment = tuned_experiment()
    config = {**experiment["config"], "seed": 0}
    assert config["model"]["use_lstm"]

    lstm_curve = train(config, experiment["env"], MAX_ENV_STEPS, THRESHOLD)
    steps, reward = lstm_curve[-1]
    print(f"LSTM: {reward:.1f} after {steps} env steps; curve {summary(lstm_curve)}")
    assert reward >= THRESHOLD, f"LSTM: only {reward:.1f} after {steps} steps: {lstm_curve}"

    feedforward = {**config, "model": {**config["model"], "use_lstm": False}}
    ff_curve = train(feedforward, experiment["env"], steps, None)
    ff_steps, ff_reward = ff_curve[-1]
    print(f"no LSTM: {ff_reward:.1f} after {ff_steps} env steps; curve {summary(ff_curve)}")
    assert ff_steps >= steps
    assert ff_reward < FEEDFORWARD_CEILING, (
        f"without the LSTM PPO reached {ff_reward:.1f} after {ff_steps} steps: the env "
        f"leaks the velocities? {ff_curve}"
    )
