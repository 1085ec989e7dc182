"""Trajectory views: a model that sees a window of past observations, the previous
action and the previous reward.

The task ("echo"): each step shows a random bit; the agent scores +1 when it
calls the bit it was shown two steps earlier. A feed-forward policy on the
current observation alone can do no better than chance (10 of 20); it needs the
last three observations.

The model is a `RecurrentNetwork` whose state is the window itself (the last two
observations), so the sampler carries it from step to step and the learner
replays it over whole sequences, as it does an LSTM's state. It also reads
`input_dict["prev_actions"]` and `input_dict["prev_rewards"]`, the views RLlib's
`ViewRequirement(data_col="actions", shift=-1)` and `("rewards", shift=-1)`
describe, which corral's samplers fill for every stateful model.

Feed-forward models can also declare such views directly in
`model.view_requirements` (see `frame_stacking_cartpole.py`); keeping the window
in the RNN state, as here, is the recurrent alternative.

    python examples/trajectory_view.py [--stop-iters 15] [--smoke]
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from corral.agents.ppo import PPOTrainer
from corral.models import ModelCatalog
from corral.models.torch.recurrent_net import RecurrentNetwork
from corral.policy.sample_batch import SampleBatch

DELAY = 2  # call the bit shown this many steps ago
EPISODE_LEN = 20


class Echo(gym.Env):
    observation_space = gym.spaces.Box(0.0, 1.0, (2,), np.float32)  # one-hot bit
    action_space = gym.spaces.Discrete(2)

    def __init__(self, config: dict | None = None) -> None:
        self.history: list[int] = []

    def _obs(self) -> np.ndarray:
        self.history.append(int(self.np_random.integers(2)))
        return np.eye(2, dtype=np.float32)[self.history[-1]]

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.history = []
        return self._obs(), {}

    def step(self, action: int):
        t = len(self.history) - 1
        reward = float(int(action) == self.history[t - DELAY]) if t >= DELAY else 0.0
        truncated = len(self.history) >= EPISODE_LEN + DELAY
        return self._obs(), reward, False, truncated, {}


class WindowModel(RecurrentNetwork, nn.Module):
    """An MLP on [obs(t-2), obs(t-1), obs(t), one-hot prev action, prev reward]."""

    def __init__(self, obs_space, action_space, num_outputs, model_config, name):
        nn.Module.__init__(self)
        super().__init__(obs_space, action_space, num_outputs, model_config, name)
        self.obs_dim = int(np.prod(obs_space.shape))
        self.n_actions = int(action_space.n)
        in_size = self.obs_dim * (DELAY + 1) + self.n_actions + 1
        self.body = nn.Sequential(nn.Linear(in_size, 64), nn.Tanh())
        self.logits = nn.Linear(64, num_outputs)
        self.value = nn.Linear(64, 1)

    def get_initial_state(self):
        # The window of the last DELAY observations, flat (one env, no batch axis).
        return [np.zeros(DELAY * self.obs_dim, np.float32)]

    def rnn_inputs(self, input_dict):
        obs = input_dict[SampleBatch.OBS].float().reshape(len(input_dict[SampleBatch.OBS]), -1)
        prev_a = nn.functional.one_hot(
            torch.as_tensor(input_dict[SampleBatch.PREV_ACTIONS]).long(), self.n_actions
        ).float()
        prev_r = torch.as_tensor(input_dict[SampleBatch.PREV_REWARDS]).float().reshape(-1, 1)
        return torch.cat([obs, prev_a, prev_r], -1)

    def forward_rnn(self, inputs, state, seq_lens):
        batch, steps = inputs.shape[:2]
        obs, extra = inputs[..., : self.obs_dim], inputs[..., self.obs_dim :]
        past = state[0].reshape(batch, DELAY, self.obs_dim)
        frames = torch.cat([past, obs], 1)  # [B, DELAY + T, obs_dim]
        windows = frames.unfold(1, DELAY + 1, 1)  # [B, T, obs_dim, DELAY + 1]
        windows = windows.transpose(2, 3).reshape(batch, steps, -1)
        features = self.body(torch.cat([windows, extra], -1))
        self._value = self.value(features).reshape(-1)
        new_window = frames[:, -DELAY:].reshape(batch, -1)
        return self.logits(features), [new_window]

    def value_function(self):
        return self._value


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stop-iters", type=int, default=15)
    parser.add_argument("--smoke", action="store_true", help="two quick iterations")
    args = parser.parse_args()
    iters = 2 if args.smoke else args.stop_iters

    ModelCatalog.register_custom_model("window", WindowModel)
    trainer = PPOTrainer(
        env=Echo,
        config={
            "model": {"custom_model": "window", "max_seq_len": EPISODE_LEN},
            "num_workers": 0,
            "num_envs_per_worker": 4,
            "rollout_fragment_length": 50 if args.smoke else 100,
            "train_batch_size": 200 if args.smoke else 400,
            "sgd_minibatch_size": 100,
            "num_sgd_iter": 8,
            "lr": 3e-3,
            "gamma": 0.5,
            "seed": 0,
        },
    )
    try:
        for _ in range(iters):
            result = trainer.train()
            print(
                f"iter {result['training_iteration']:2d}  "
                f"return {result['episode_reward_mean']:5.2f} "
                f"(chance {EPISODE_LEN / 2:.0f}, best {EPISODE_LEN})"
            )
    finally:
        trainer.stop()
    print(f"Final return: {result['episode_reward_mean']:.2f} of {EPISODE_LEN}")


if __name__ == "__main__":
    main()
