"""Several policies in one multi-agent env: a mapping function, per-policy configs,
hand-written policies and `policies_to_train`.

Four CartPoles run side by side (`make_multi_agent`). Each agent is mapped to
its own policy by `policy_mapping_fn`:

- agent 0 -> "ppo_fast": PPO with a per-policy override, lr 1e-3;
- agent 1 -> "ppo_slow": PPO with lr 1e-5 (it barely moves);
- agent 2 -> "heuristic": a hand-written `Policy` (push the cart the way the
  pole leans), never trained;
- agent 3 -> "random": `corral.policy.random_policy.RandomPolicy` (uniform actions).

Only the two PPO policies are in `policies_to_train`; the result's
`policy_reward_mean` shows all four side by side.

    python examples/multi_agent_policies.py [--stop-iters 8] [--smoke]
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np

from corral.agents.ppo import PPOTrainer
from corral.env.multi_agent_env import make_multi_agent
from corral.policy.policy import Policy, PolicySpec
from corral.policy.random_policy import RandomPolicy

POLICY_OF_AGENT = {0: "ppo_fast", 1: "ppo_slow", 2: "heuristic", 3: "random"}


class LeanHeuristic(Policy):
    """Pushes the cart towards the side the pole leans to (obs[2] is the angle): a
    fixed rule that balances for a few dozen steps."""

    def compute_actions(self, obs_batch, state_batches=None, *args, **kwargs):
        obs = np.asarray(obs_batch)
        return (obs[:, 2] > 0).astype(np.int64), [], {}

    def get_weights(self):
        return {}

    def set_weights(self, weights):
        pass


def policy_mapping_fn(agent_id, episode, worker, **kwargs):
    return POLICY_OF_AGENT[agent_id]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stop-iters", type=int, default=8)
    parser.add_argument("--smoke", action="store_true", help="two quick iterations")
    args = parser.parse_args()
    iters = 2 if args.smoke else args.stop_iters

    probe = gym.make("CartPole-v1")
    obs_space, act_space = probe.observation_space, probe.action_space
    trainer = PPOTrainer(
        env=make_multi_agent("CartPole-v1"),
        config={
            "env_config": {"num_agents": len(POLICY_OF_AGENT)},
            "num_workers": 0,
            "rollout_fragment_length": 250,
            "train_batch_size": 500 if args.smoke else 1000,
            "sgd_minibatch_size": 128,
            "num_sgd_iter": 6,
            "model": {"fcnet_hiddens": [32, 32]},
            "multiagent": {
                "policies": {
                    # PolicySpec(policy_class=None: the trainer's, spaces: inferred, config).
                    "ppo_fast": PolicySpec(config={"lr": 1e-3}),
                    "ppo_slow": PolicySpec(config={"lr": 1e-5}),
                    "heuristic": PolicySpec(LeanHeuristic, obs_space, act_space, {}),
                    "random": (RandomPolicy, obs_space, act_space, {}),
                },
                "policy_mapping_fn": policy_mapping_fn,
                "policies_to_train": ["ppo_fast", "ppo_slow"],
            },
            "seed": 0,
        },
    )
    try:
        for _ in range(iters):
            result = trainer.train()
            means = result["policy_reward_mean"]
            print(
                f"iter {result['training_iteration']:2d}  "
                + "  ".join(f"{pid} {means.get(pid, float('nan')):6.1f}" for pid in means)
            )
        trained = sorted(result["info"]["learner"])
    finally:
        trainer.stop()
    returns = {pid: round(r, 1) for pid, r in sorted(means.items())}
    print(f"Trained policies: {trained}; mean returns {returns}")


if __name__ == "__main__":
    main()
