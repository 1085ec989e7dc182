"""Two trainers, PPO and DQN, sharing one multi-agent env.

Four CartPoles run side by side in one `MultiAgentEnv` (`make_multi_agent`);
agents 0 and 2 are controlled by "ppo_policy", agents 1 and 3 by "dqn_policy".
Both trainers hold both policies, but each trains only its own
(`policies_to_train`); after every round each trainer copies the other's
freshly trained weights in (`get_weights` / `set_weights`), so both samplers
always act with the latest version of both policies.

    python examples/two_trainers.py [--stop-iters 10] [--smoke]
"""

from __future__ import annotations

import argparse

import gymnasium as gym

from corral.agents.dqn import DQNTorchPolicy, DQNTrainer
from corral.agents.ppo import PPOTorchPolicy, PPOTrainer
from corral.env.multi_agent_env import make_multi_agent
from corral.tune.registry import register_env

NUM_AGENTS = 4


def policy_mapping_fn(agent_id, episode, worker, **kwargs):
    return "ppo_policy" if agent_id % 2 == 0 else "dqn_policy"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stop-iters", type=int, default=10)
    parser.add_argument("--smoke", action="store_true", help="two quick rounds")
    args = parser.parse_args()
    iters = 2 if args.smoke else args.stop_iters

    register_env("multi_cartpole", lambda cfg: make_multi_agent("CartPole-v1")(cfg))
    probe = gym.make("CartPole-v1")
    obs_space, act_space = probe.observation_space, probe.action_space
    policies = {
        "ppo_policy": (PPOTorchPolicy, obs_space, act_space, {}),
        "dqn_policy": (DQNTorchPolicy, obs_space, act_space, {}),
    }
    common = {
        "env_config": {"num_agents": NUM_AGENTS},
        "num_workers": 0,
        # The same model config in both trainers, so each policy has the same layers
        # in both (PPO's default is separate value layers; the common default shares).
        "model": {"fcnet_hiddens": [64], "vf_share_layers": False},
        "seed": 0,
    }
    ppo = PPOTrainer(
        env="multi_cartpole",
        config={
            **common,
            "rollout_fragment_length": 200,
            "train_batch_size": 400,
            "sgd_minibatch_size": 128,
            "num_sgd_iter": 6,
            "lr": 1e-3,
            "multiagent": {
                "policies": policies,
                "policy_mapping_fn": policy_mapping_fn,
                "policies_to_train": ["ppo_policy"],
            },
        },
    )
    dqn = DQNTrainer(
        env="multi_cartpole",
        config={
            **common,
            "rollout_fragment_length": 50,
            "train_batch_size": 64,
            "learning_starts": 200,
            "target_network_update_freq": 500,
            "lr": 1e-3,
            "multiagent": {
                "policies": policies,
                "policy_mapping_fn": policy_mapping_fn,
                "policies_to_train": ["dqn_policy"],
            },
        },
    )
    try:
        for i in range(iters):
            r_ppo = ppo.train()
            r_dqn = dqn.train()
            # Swap the freshly trained weights.
            ppo.set_weights(dqn.get_weights(["dqn_policy"]))
            dqn.set_weights(ppo.get_weights(["ppo_policy"]))
            print(
                f"round {i + 1:2d}  "
                f"ppo_policy {r_ppo['policy_reward_mean'].get('ppo_policy', float('nan')):6.1f}  "
                f"dqn_policy {r_dqn['policy_reward_mean'].get('dqn_policy', float('nan')):6.1f}"
            )
    finally:
        ppo.stop()
        dqn.stop()
    print(
        f"Done after {iters} rounds: PPO sampled {r_ppo['timesteps_total']} env steps, "
        f"DQN {r_dqn['timesteps_total']}"
    )


if __name__ == "__main__":
    main()
