"""MB-MPO learns Navigation2D from little real data (learning regression test): with the
tuned example's settings, the meta-policy's return in the real env improves clearly over
the first iterations (about 5000 real env steps; under 60 s on 2 CPUs)."""

import time

import numpy as np
import pytest

from corral.agents.mbmpo import MBMPOTrainer

ITERATIONS = 25


@pytest.mark.learning
def test_real_return_improves(learning):
    config = learning.tuned_config("mbmpo/navigation2d-mbmpo.yaml")
    trainer = MBMPOTrainer(config={**config, "seed": 0, "log_level": "ERROR"}, env="Navigation2D")
    start = time.monotonic()
    returns = []
    try:
        for _ in range(ITERATIONS):
            result = trainer.train()
            returns.append(result["episode_reward_mean"])
    finally:
        trainer.stop()
    first, last = np.mean(returns[:5]), np.mean(returns[-5:])
    print(
        f"real return: {first:.2f} (first 5 iterations) -> {last:.2f} (last 5), "
        f"{result['timesteps_total']} real env steps; {time.monotonic() - start:.0f} s"
    )
    # A random policy scores about -8; going straight to the goal and staying, about -0.5.
    assert last - first >= 3.0, returns
    assert last >= -2.5, returns
