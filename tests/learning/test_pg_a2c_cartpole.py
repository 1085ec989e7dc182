"""PG and A2C reach the bars of their tuned examples on CartPole-v1 (learning regression tests).

Both stop, like RLlib's tuned examples, on the mean training return over the
last episodes (`episode_reward_mean`).
"""

from pathlib import Path

import pytest
import yaml

from corral.agents.registry import get_trainer_class

TUNED_EXAMPLES = Path(__file__).parents[2] / "tuned_examples"


def run_tuned_example(relative_path: str, seed: int) -> tuple[float, int, list]:
    (spec,) = yaml.safe_load((TUNED_EXAMPLES / relative_path).read_text()).values()
    stop = spec["stop"]
    trainer = get_trainer_class(spec["run"])(
        config={**spec["config"], "seed": seed, "log_level": "ERROR"}, env=spec["env"]
    )
    curve = []
    try:
        while True:
            result = trainer.train()
            curve.append((result["timesteps_total"], round(result["episode_reward_mean"], 1)))
            if (
                result["episode_reward_mean"] >= stop["episode_reward_mean"]
                or result["timesteps_total"] >= stop["timesteps_total"]
            ):
                break
    finally:
        trainer.stop()
    print(f"{relative_path} seed {seed}: {curve[-1]} after {len(curve)} iterations")
    return result["episode_reward_mean"], stop["episode_reward_mean"], curve


@pytest.mark.learning
@pytest.mark.parametrize(
    "relative_path", ["pg/cartpole-pg.yaml", "a2c/cartpole-a2c.yaml"], ids=["PG", "A2C"]
)
def test_reaches_the_tuned_example_bar(relative_path):
    reward, bar, curve = run_tuned_example(relative_path, seed=0)
    assert reward >= bar, f"{relative_path}: {reward:.1f} < {bar} after {curve[-1][0]} steps"
