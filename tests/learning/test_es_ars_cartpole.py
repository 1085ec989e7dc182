"""ES and ARS reach the bars of their tuned examples on CartPole-v1 (learning
regression tests): a mean evaluation return (`episode_reward_mean`, the unperturbed
weights' episodes) of 150 within 500,000 env steps; each takes under a minute on 2 CPUs.
"""

import time
from pathlib import Path

import pytest
import yaml

from corral.agents.registry import get_trainer_class

TUNED_EXAMPLES = Path(__file__).parents[2] / "tuned_examples"


def run_tuned_example(relative_path: str, seed: int) -> tuple[float, float, int, float]:
    (spec,) = yaml.safe_load((TUNED_EXAMPLES / relative_path).read_text()).values()
    stop = spec["stop"]
    trainer = get_trainer_class(spec["run"])(
        config={**spec["config"], "seed": seed, "log_level": "ERROR"}, env=spec["env"]
    )
    start = time.monotonic()
    try:
        while True:
            result = trainer.train()
            if (
                result["episode_reward_mean"] >= stop["episode_reward_mean"]
                or result["timesteps_total"] >= stop["timesteps_total"]
            ):
                break
    finally:
        trainer.stop()
    return (
        result["episode_reward_mean"],
        stop["episode_reward_mean"],
        result["timesteps_total"],
        time.monotonic() - start,
    )


@pytest.mark.learning
@pytest.mark.parametrize(
    "relative_path", ["es/cartpole-es.yaml", "ars/cartpole-ars.yaml"], ids=["ES", "ARS"]
)
def test_reaches_the_tuned_example_bar(relative_path):
    reward, bar, steps, seconds = run_tuned_example(relative_path, seed=0)
    print(f"{relative_path}: {reward:.1f} after {steps} env steps, {seconds:.0f} s")
    assert reward >= bar, f"{relative_path}: {reward:.1f} < {bar} after {steps} steps"
