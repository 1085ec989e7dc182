"""`Trainer.add_policy(policy_state=...)` (RLlib 1.13's argument): every copy of the new
policy, in the driver and in the remote workers, starts from the given state; and
`RolloutWorker.get_policies_to_train()`."""

from __future__ import annotations

import numpy as np

from corral.agents.ppo import PPOTrainer
from corral.env.multi_agent_env import make_multi_agent

TwoCartPoles = make_multi_agent("CartPole-v1")


def test_added_policy_starts_from_the_given_state_everywhere():
    trainer = PPOTrainer(
        env=TwoCartPoles,
        config={
            "num_workers": 1,
            "rollout_fragment_length": 16,
            "train_batch_size": 32,
            "sgd_minibatch_size": 16,
            "num_sgd_iter": 1,
            "model": {"fcnet_hiddens": [8]},
            "seed": 0,
            "env_config": {"num_agents": 2},
            "multiagent": {
                "policies": {"p0", "p1"},
                "policy_mapping_fn": lambda agent_id, episode, worker, **kw: f"p{agent_id}",
            },
        },
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
