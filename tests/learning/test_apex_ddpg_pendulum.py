"""Ape-X DDPG learns Pendulum-v1 with two workers and worker-side priorities, with the
shipped tuned example (a learning regression test)."""

import pytest

from corral.agents.ddpg import ApexDDPGTrainer

THRESHOLD = -400.0


@pytest.mark.learning
@pytest.mark.parametrize("seed", [0, 1])
def test_apex_ddpg_learns_pendulum(seed, learning):
    # 10 deterministic evaluation episodes after every iteration (1,024 env steps).
    config = {
        **learning.tuned_config("ddpg/pendulum-apex-ddpg.yaml"),
        "seed": seed,
        "evaluation_interval": 1,
        "evaluation_num_episodes": 10,
    }
    trainer = ApexDDPGTrainer(config=config, env="Pendulum-v1")
    # Ape-X's defaults the tuned example keeps: the workers prioritize, each with its
    # own noise, and the returns are 3-step.
    assert trainer.config["worker_side_prioritization"] and trainer.config["n_step"] == 3
    assert trainer.config["exploration_config"]["type"] == "PerWorkerOrnsteinUhlenbeckNoise"
    curve = learning.train_until(trainer, THRESHOLD, 20_000)
    learning.assert_solved(f"seed {seed}", curve, THRESHOLD)
