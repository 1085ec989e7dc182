"""Trajectory views, RLlib 1.x style: a feed-forward model that stacks frames through
`ViewRequirement`s instead of an RNN.

The env is CartPole without its velocities (only cart position and pole angle are
observed), so a policy on the current observation alone cannot tell which way the
pole is moving. The model declares, in its `view_requirements`, the last three
observations (`data_col="obs", shift="-2:0"`) and the three previous actions and
rewards (`shift="-3:-1"`); corral's samplers fill these columns at acting time and
in the train batches (zeros before an episode's first step), so its `forward()`
reads `input_dict["prev_n_obs"]` and friends exactly as it would on RLlib 1.13.

    python examples/frame_stacking_cartpole.py [--stop-iters 15] [--smoke]
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from corral.agents.ppo import PPOTrainer
from corral.models import ModelCatalog
from corral.models.torch.misc import SlimFC
from corral.models.torch.torch_modelv2 import TorchModelV2
from corral.policy.view_requirement import ViewRequirement
from corral.utils.torch_utils import one_hot

NUM_FRAMES = 3


class StatelessCartPole(gym.Env):
    """CartPole-v1 observing only [cart position, pole angle]."""

    def __init__(self, config: dict | None = None) -> None:
        self.env = gym.make("CartPole-v1")
        high = self.env.observation_space.high[[0, 2]]
        self.observation_space = gym.spaces.Box(-high, high, dtype=np.float32)
        self.action_space = self.env.action_space

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        obs, info = self.env.reset(seed=seed, options=options)
        return obs[[0, 2]], info

    def step(self, action):
        obs, reward, terminated, truncated, info = self.env.step(action)
        return obs[[0, 2]], reward, terminated, truncated, info


class FrameStackingModel(TorchModelV2, nn.Module):
    """An MLP on the last `num_frames` observations, actions and rewards."""

    def __init__(self, obs_space, action_space, num_outputs, model_config, name, num_frames=3):
        TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
        nn.Module.__init__(self)
        self.num_frames = num_frames
        obs_dim = int(np.prod(obs_space.shape))
        in_size = num_frames * (obs_dim + int(action_space.n) + 1)
        self.hidden = nn.Sequential(
            SlimFC(in_size, 64, activation_fn="tanh"), SlimFC(64, 64, activation_fn="tanh")
        )
        self.logits = SlimFC(64, num_outputs)
        self.values = SlimFC(64, 1)
        self._features: torch.Tensor | None = None
        # The trajectory view API: what this model reads besides the current obs.
        self.view_requirements["prev_n_obs"] = ViewRequirement(
            data_col="obs", shift=f"-{num_frames - 1}:0", space=obs_space
        )
        self.view_requirements["prev_n_actions"] = ViewRequirement(
            data_col="actions", shift=f"-{num_frames}:-1", space=action_space
        )
        self.view_requirements["prev_n_rewards"] = ViewRequirement(
            data_col="rewards", shift=f"-{num_frames}:-1"
        )

    def forward(self, input_dict, state, seq_lens):
        frames = input_dict["prev_n_obs"].float()
        batch = frames.shape[0]
        actions = one_hot(input_dict["prev_n_actions"].reshape(-1), self.action_space)
        inputs = torch.cat(
            [
                frames.reshape(batch, -1),
                actions.float().reshape(batch, -1),
                input_dict["prev_n_rewards"].float().reshape(batch, -1),
            ],
            dim=-1,
        )
        self._features = self.hidden(inputs)
        return self.logits(self._features), state

    def value_function(self):
        assert self._features is not None, "forward() first"
        return self.values(self._features).reshape(-1)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stop-iters", type=int, default=15)
    parser.add_argument("--smoke", action="store_true", help="two quick iterations")
    args = parser.parse_args()
    iters = 2 if args.smoke else args.stop_iters

    ModelCatalog.register_custom_model("frame_stack_model", FrameStackingModel)
    trainer = PPOTrainer(
        env=StatelessCartPole,
        config={
            "model": {
                "custom_model": "frame_stack_model",
                "custom_model_config": {"num_frames": NUM_FRAMES},
            },
            "num_workers": 0,
            "num_envs_per_worker": 4,
            "rollout_fragment_length": 100 if args.smoke else 250,
            "train_batch_size": 400 if args.smoke else 1000,
            "sgd_minibatch_size": 200,
            "num_sgd_iter": 4 if args.smoke else 10,
            "lr": 1e-3,
            "seed": 0,
        },
    )
    try:
        for _ in range(iters):
            result = trainer.train()
            print(
                f"iter {result['training_iteration']:2d}  "
                f"return {result['episode_reward_mean']:6.1f}"
            )
    finally:
        trainer.stop()
    print(f"Final return: {result['episode_reward_mean']:.1f}")


if __name__ == "__main__":
    main()
