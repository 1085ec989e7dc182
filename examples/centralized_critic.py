"""A centralized critic: each agent's value function also sees the other agent.

Two agents each see a private coin (heads or tails) and must both call their own
coin right for the team to score +1; either agent alone cannot tell from its
own coin whether the team will score. The critic of each policy is therefore
given the other agent's observation and action: `postprocess_trajectory` reads
them from RLlib 1.13's `other_agent_batches` (`{agent_id: (policy, batch)}`),
stores them as extra columns, computes the value predictions with the central
critic and then the advantages (`compute_advantages(rollout, last_r, gamma,
lambda_)`); the loss is PPO's with the model's value function pointed at the
central critic. Acting still uses only the agent's own observation.

    python examples/centralized_critic.py [--stop-iters 10] [--smoke]
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from corral.agents.ppo import PPOTrainer
from corral.agents.ppo.ppo_torch_policy import PPOTorchPolicy
from corral.env.multi_agent_env import MultiAgentEnv
from corral.evaluation.postprocessing import compute_advantages
from corral.models import ModelCatalog
from corral.models.torch.torch_modelv2 import TorchModelV2
from corral.policy.policy import PolicySpec
from corral.policy.sample_batch import SampleBatch

OPP_OBS, OPP_ACT = "opponent_obs", "opponent_action"
AGENTS = ("alice", "bob")


class CoinCalls(MultiAgentEnv):
    """Both agents act every step; the team scores +1 when both call their own coin."""

    observation_space = gym.spaces.Box(0.0, 1.0, (2,), np.float32)  # one-hot coin
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config: dict | None = None) -> None:
        super().__init__()
        self.possible_agents = list(AGENTS)
        self.agents = list(AGENTS)
        self.episode_len = int((config or {}).get("episode_len", 10))
        self.rng = np.random.default_rng()

    def _obs(self) -> dict:
        self.coins = self.rng.integers(0, 2, len(AGENTS))
        return {a: np.eye(2, dtype=np.float32)[c] for a, c in zip(AGENTS, self.coins)}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self.rng = np.random.default_rng(seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action_dict: dict):
        right = all(int(action_dict[a]) == c for a, c in zip(AGENTS, self.coins))
        reward = 1.0 if right else 0.0
        self.t += 1
        done = self.t >= self.episode_len
        obs = self._obs()
        return (
            obs,
            {a: reward for a in AGENTS},
            {**{a: done for a in AGENTS}, "__all__": done},
            {"__all__": False},
            {},
        )


class CentralCriticModel(TorchModelV2, nn.Module):
    """A policy net on the own observation; a critic on (own obs, other's obs and action)."""

    def __init__(self, obs_space, action_space, num_outputs, model_config, name):
        TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
        nn.Module.__init__(self)
        self.policy_net = nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, num_outputs))
        self.own_vf = nn.Sequential(nn.Linear(2, 32), nn.Tanh(), nn.Linear(32, 1))
        self.central_vf = nn.Sequential(nn.Linear(2 + 2 + 2, 32), nn.Tanh(), nn.Linear(32, 1))

    def forward(self, input_dict, state, seq_lens):
        self._obs = input_dict["obs"].float()
        return self.policy_net(self._obs), state

    def value_function(self):
        return self.own_vf(self._obs).squeeze(-1)  # decentralised; not used by the loss

    def central_value(self, obs, opp_obs, opp_act):
        opp_act = nn.functional.one_hot(torch.as_tensor(opp_act).long(), 2).float()
        x = torch.cat([torch.as_tensor(obs).float(), torch.as_tensor(opp_obs).float(), opp_act], -1)
        return self.central_vf(x).squeeze(-1)


class CentralCriticPPOPolicy(PPOTorchPolicy):
    def postprocess_trajectory(self, sample_batch, other_agent_batches=None, episode=None):
        n = sample_batch.count
        if other_agent_batches:
            # {agent_id: (policy, batch)}: the one other agent of this env.
            (_, opp_batch), *_ = other_agent_batches.values()
            sample_batch[OPP_OBS] = opp_batch[SampleBatch.OBS][:n]
            sample_batch[OPP_ACT] = opp_batch[SampleBatch.ACTIONS][:n]
        else:  # the dummy batch a policy sees when it is built
            sample_batch[OPP_OBS] = np.zeros_like(sample_batch[SampleBatch.OBS])
            sample_batch[OPP_ACT] = np.zeros_like(sample_batch[SampleBatch.ACTIONS])
        with torch.no_grad():
            sample_batch[SampleBatch.VF_PREDS] = (
                self.model.central_value(
                    sample_batch[SampleBatch.OBS], sample_batch[OPP_OBS], sample_batch[OPP_ACT]
                )
                .cpu()
                .numpy()
            )
        # Whole episodes (batch_mode complete_episodes) end terminated: last_r = 0.
        return compute_advantages(
            sample_batch, 0.0, self.config["gamma"], self.config["lambda"], use_gae=True
        )

    def loss(self, model, dist_class, train_batch):
        own_value_function = model.value_function
        model.value_function = lambda: model.central_value(
            train_batch[SampleBatch.OBS], train_batch[OPP_OBS], train_batch[OPP_ACT]
        )
        try:
            return super().loss(model, dist_class, train_batch)
        finally:
            model.value_function = own_value_function


class CentralCriticTrainer(PPOTrainer):
    def get_default_policy_class(self, config):
        return CentralCriticPPOPolicy


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stop-iters", type=int, default=10)
    parser.add_argument("--smoke", action="store_true", help="two quick iterations")
    args = parser.parse_args()
    iters = 2 if args.smoke else args.stop_iters

    ModelCatalog.register_custom_model("central_critic", CentralCriticModel)
    trainer = CentralCriticTrainer(
        env=CoinCalls,
        config={
            "batch_mode": "complete_episodes",
            "num_workers": 0,
            "rollout_fragment_length": 200,
            "train_batch_size": 200 if args.smoke else 600,
            "sgd_minibatch_size": 100,
            "num_sgd_iter": 6,
            "lr": 3e-3,
            "gamma": 0.9,
            "model": {"custom_model": "central_critic"},
            "multiagent": {
                "policies": {"pol_alice": PolicySpec(), "pol_bob": PolicySpec()},
                "policy_mapping_fn": lambda agent_id, episode, worker, **kw: f"pol_{agent_id}",
            },
            "seed": 0,
        },
    )
    try:
        for _ in range(iters):
            result = trainer.train()
            print(
                f"iter {result['training_iteration']:2d}  "
                f"team return per agent {result['policy_reward_mean']['pol_alice']:5.2f} "
                f"(best possible 10)"
            )
    finally:
        trainer.stop()
    print(f"Final team return: {result['policy_reward_mean']['pol_alice']:.2f} of 10")


if __name__ == "__main__":
    main()
