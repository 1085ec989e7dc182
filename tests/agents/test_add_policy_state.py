"""`Trainer.add_policy(policy_state=...)` (RLlib 1.13's argument): every copy of the new
policy, in the driver and in the remote workers, starts from the given state; and
`RolloutWorker.get_policies_to_train()`."""

from __future__ import annotations

import numpy as np

from corral.agents.ppo import PPOTrainer
from tests.fixtures.two_cartpoles import TwoCartPoles, trainer_config


def test_added_policy_starts_from_the_given_state_everywhere():
    trainer = PPOTrainer(
        env=TwoCartPoles,
        config=trainer_config(),
    )
    try:
        trainer.train()
        source = trainer.get_policy("p0")
        copy = trainer.add_policy(
            "p0_copy",
            type(source),
            policy_state=source.get_state(),
            policies_to_train=["p0", "p1"],
        )
        wanted = source.get_weights()
        assert all(np.array_equal(copy.get_weights()[k], v) for k, v in wanted.items())
        copies = trainer.workers.foreach_worker(lambda w: w.get_policy("p0_copy").get_weights())
        (remote,) = copies[1:]  # (the first is the driver's)
        assert all(np.array_equal(remote[k], v) for k, v in wanted.items())
        local = trainer.workers.local_worker()
        assert local.get_policies_to_train() == {"p0", "p1"}
    finally:
        trainer.stop()
