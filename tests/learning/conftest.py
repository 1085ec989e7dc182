"""Shared pieces of the learning tests: tuned configs and the train-until-solved loop."""

from pathlib import Path

import pytest
import yaml

TUNED_EXAMPLES = Path(__file__).parents[2] / "tuned_examples"


def load_tuned_config(relative_path: str) -> dict:
    """The config of the single experiment in a tuned-example YAML file."""
    (experiment,) = yaml.safe_load((TUNED_EXAMPLES / relative_path).read_text()).values()
    return experiment["config"]


def train_until(trainer, threshold: float, max_env_steps: int) -> list[tuple[int, float]]:
    """Trains until an evaluation reaches `threshold` or the step budget is spent.

    Returns the evaluation curve [(env steps, mean evaluation return)]; the
    trainer evaluates per its `evaluation_interval`.
    """
    curve = []
    try:
        while True:
            result = trainer.train()
            if "evaluation" in result:
                evaluation = result["evaluation"]["episode_reward_mean"]
                curve.append((result["timesteps_total"], evaluation))
                if evaluation >= threshold:
                    break
            if result["timesteps_total"] >= max_env_steps:
                break
    finally:
        trainer.stop()
    return curve


def assert_solved(name: str, curve: list[tuple[int, float]], threshold: float) -> None:
    steps, reward = curve[-1]
    print(f"{name}: evaluation return {reward:.1f} after {steps} env steps; curve {curve}")
    assert reward >= threshold, f"{name}: only {reward:.1f} after {steps} steps: {curve}"


@pytest.fixture
def learning():
    """The helpers above, for tests in this folder."""

    class Helpers:
        tuned_config = staticmethod(load_tuned_config)
        train_until = staticmethod(train_until)
        assert_solved = staticmethod(assert_solved)

    return Helpers


@pytest.fixture
def local_ray():
    """A Ray of the test's own on 2 CPUs (CI's local Ray), shut down afterwards; the
    test is skipped, saying why, where the `ray` extra is not installed."""
    ray = pytest.importorskip("ray", reason="the `ray` extra is not installed")
    # address="local": a Ray of its own, even where another run's cluster is up.
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray
    ray.shutdown()
