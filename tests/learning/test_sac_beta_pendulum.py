"""SAC with `_use_beta_distribution` learns Pendulum-v1 (a random policy scores about
-1200 to -1600; the squashed Gaussian's tuned example, with the Beta instead)."""

import pytest

from corral.agents.sac import SACTrainer

THRESHOLD = -600.0


@pytest.mark.learning
def test_sac_with_a_beta_distribution_learns_pendulum(learning):
    config = {
        **learning.tuned_config("sac/pendulum-sac.yaml"),
        "_use_beta_distribution": True,
        "seed": 0,
        "evaluation_interval": 1,
        "evaluation_num_episodes": 5,
    }
    trainer = SACTrainer(config=config, env="Pendulum-v1")
    curve = learning.train_until(trainer, THRESHOLD, 8192)
    learning.assert_solved("beta", curve, THRESHOLD)
