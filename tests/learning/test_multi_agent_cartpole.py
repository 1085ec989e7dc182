"""Two independent CartPole agents, each with its own PPO policy, both learn to balance.

The settings are those of `tuned_examples/ppo/cartpole-ppo.yaml`, adapted to two
agents: batches count agent steps (`count_steps_by: agent_steps`), each policy
gets 512 of the 1,024 agent steps per batch, and fewer SGD passes per sample
than the single-agent example keep the test short. "Solved" is judged as in the other
learning tests: by the tuned example's greedy evaluation (10 episodes every 2 iterations),
here each policy's mean return in it.
"""

from pathlib import Path

import pytest
import yaml

from corral.agents.ppo import PPOTrainer
from corral.env.multi_agent_env import make_multi_agent

TUNED = Path(__file__).parents[2] / "tuned_examples" / "ppo" / "cartpole-ppo.yaml"
MAX_AGENT_STEPS = 300_000
THRESHOLD = 450.0

TwoCartPoles = make_multi_agent("CartPole-v1")


def two_agent_config() -> dict:
    (experiment,) = yaml.safe_load(TUNED.read_text()).values()
    return {
        **experiment["config"],
        "env_config": {"num_agents": 2},
        "num_envs_per_worker": 16,
        "rollout_fragment_length": 32,
        "train_batch_size": 1024,
        "sgd_minibatch_size": 256,
        "num_sgd_iter": 15,
        # The schedule runs on env steps: two agent steps per env step here.
        "lr": 0.001,
        "lr_schedule": [[0, 0.001], [MAX_AGENT_STEPS // 2, 0.0]],
        "multiagent": {
            "policies": {"cart_0", "cart_1"},
            "policy_mapping_fn": lambda agent_id, episode, worker, **kwargs: f"cart_{agent_id}",
            "count_steps_by": "agent_steps",
        },
    }


@pytest.mark.learning
def test_two_policies_solve_two_cartpoles():
    trainer = PPOTrainer(config={**two_agent_config(), "seed": 0}, env=TwoCartPoles)
    curve = []
    try:
        while True:
            result = trainer.train()
            if "evaluation" in result:
                returns = result["evaluation"]["policy_reward_mean"]
                curve.append((result["timesteps_total"], returns["cart_0"], returns["cart_1"]))
                if min(returns.values()) >= THRESHOLD:
                    break
            if result["timesteps_total"] >= MAX_AGENT_STEPS:
                break
    finally:
        trainer.stop()
    steps, r0, r1 = curve[-1]
    print(f"after {steps} agent steps: cart_0 {r0:.1f}, cart_1 {r1:.1f}; curve {curve[::5]}")
    assert result["agent_timesteps_total"] == result["timesteps_total"]
    assert min(r0, r1) >= THRESHOLD, f"only {r0:.1f} / {r1:.1f} after {steps} steps: {curve}"
