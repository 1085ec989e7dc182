"""A DQN trainer holding a policy it does not train (another trainer's, e.g. a PPO policy
of a two-trainer workflow): prioritized replay only updates the priorities of the
policies it trains, so the untrained one needs no `compute_td_error`."""

from __future__ import annotations

import gymnasium as gym

from corral.agents.dqn import DQNTorchPolicy, DQNTrainer
from corral.agents.ppo import PPOTorchPolicy
from corral.env.multi_agent_env import make_multi_agent


def test_dqn_with_an_untrained_ppo_policy_trains():
    probe = gym.make("CartPole-v1")
    spaces = (probe.observation_space, probe.action_space)
    trainer = DQNTrainer(
        env=make_multi_agent("CartPole-v1"),
        config={
            "env_config": {"num_agents": 2},
            "num_workers": 0,
            "rollout_fragment_length": 50,
            "train_batch_size": 32,
            "learning_starts": 50,
            "prioritized_replay": True,
            "min_sample_timesteps_per_reporting": 200,
            "multiagent": {
                "policies": {
                    "ppo": (PPOTorchPolicy, *spaces, {}),
                    "dqn": (DQNTorchPolicy, *spaces, {}),
                },
                "policy_mapping_fn": lambda agent_id, *args, **kwargs: ["ppo", "dqn"][agent_id],
                "policies_to_train": ["dqn"],
            },
            "seed": 0,
        },
    )
    try:
        before = trainer.get_weights(["ppo"])["ppo"]
        result = trainer.train()
        assert list(result["info"]["learner"]) == ["dqn"]
        after = trainer.get_weights(["ppo"])["ppo"]
        assert all((before[k] == after[k]).all() for k in before)
    finally:
        trainer.stop()
