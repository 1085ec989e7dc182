"""Action masking with a custom `TorchModelV2` (a Dict observation with an "action_mask").

Each step the env shows a target number and a mask of the moves allowed now;
picking the target scores +1, any other allowed move 0, and a forbidden move
-1 (it never happens here: the model adds `log(mask)`, clamped to `FLOAT_MIN`,
to its logits, so forbidden moves get probability zero, while acting and in the
loss alike). The model reads `input_dict["obs"]["observations"]` and
`input_dict["obs"]["action_mask"]`, as RLlib 1.x's `ModelCatalog` restores the
original Dict observation for custom models.

    python examples/custom_model_action_masking.py [--stop-iters 12] [--smoke]
"""

from __future__ import annotations

import argparse

import gymnasium as gym
import numpy as np
import torch
from torch import nn

from corral.agents.ppo import PPOTrainer
from corral.models import ModelCatalog
from corral.models.torch.fcnet import FullyConnectedNetwork
from corral.models.torch.torch_modelv2 import TorchModelV2
from corral.utils.torch_utils import FLOAT_MIN

N_ACTIONS = 6


class PickAllowed(gym.Env):
    """Shows a target move (one-hot) and which moves are allowed; the target is always allowed."""

    def __init__(self, config: dict) -> None:
        self.observation_space = gym.spaces.Dict(
            {
                "action_mask": gym.spaces.Box(0.0, 1.0, (N_ACTIONS,), np.float32),
                "observations": gym.spaces.Box(0.0, 1.0, (N_ACTIONS,), np.float32),
            }
        )
        self.action_space = gym.spaces.Discrete(N_ACTIONS)
        self.episode_len = int(config.get("episode_len", 10))

    def _obs(self) -> dict:
        self.target = int(self.np_random.integers(N_ACTIONS))
        self.mask = (self.np_random.random(N_ACTIONS) < 0.5).astype(np.float32)
        self.mask[self.target] = 1.0
        onehot = np.zeros(N_ACTIONS, np.float32)
        onehot[self.target] = 1.0
        return {"action_mask": self.mask, "observations": onehot}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t, self.forbidden = 0, 0
        return self._obs(), {}

    def step(self, action: int):
        action = int(action)
        if not self.mask[action]:
            self.forbidden += 1
            reward = -1.0
        else:
            reward = 1.0 if action == self.target else 0.0
        self.t += 1
        info = {"forbidden_moves": self.forbidden}
        return self._obs(), reward, False, self.t >= self.episode_len, info


class MaskedActionsModel(TorchModelV2, nn.Module):
    """A fully connected net on the "observations" part; invalid moves masked out."""

    def __init__(self, obs_space, action_space, num_outputs, model_config, name, **kwargs):
        TorchModelV2.__init__(self, obs_space, action_space, num_outputs, model_config, name)
        nn.Module.__init__(self)
        inner_space = obs_space.original_space["observations"]
        self.inner = FullyConnectedNetwork(
            inner_space, action_space, num_outputs, model_config, name + "_inner"
        )

    def forward(self, input_dict, state, seq_lens):
        mask = input_dict["obs"]["action_mask"]
        logits, _ = self.inner({"obs": input_dict["obs"]["observations"]})
        inf_mask = torch.clamp(torch.log(mask), min=FLOAT_MIN)
        return logits + inf_mask, state

    def value_function(self):
        return self.inner.value_function()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stop-iters", type=int, default=12)
    parser.add_argument("--smoke", action="store_true", help="two quick iterations")
    args = parser.parse_args()
    iters = 2 if args.smoke else args.stop_iters

    ModelCatalog.register_custom_model("masked_actions", MaskedActionsModel)
    trainer = PPOTrainer(
        env=PickAllowed,
        config={
            "model": {"custom_model": "masked_actions", "fcnet_hiddens": [32]},
            "num_workers": 0,
            "rollout_fragment_length": 200,
            "train_batch_size": 200 if args.smoke else 500,
            "sgd_minibatch_size": 100,
            "num_sgd_iter": 6,
            "lr": 3e-3,
            "seed": 0,
        },
    )
    try:
        for _ in range(iters):
            result = trainer.train()
            print(
                f"iter {result['training_iteration']:2d}  "
                f"return {result['episode_reward_mean']:6.2f} (best possible 10)"
            )
        env = PickAllowed({})
        obs, _ = env.reset(seed=0)
        forbidden = 0
        for _ in range(200):  # sampled actions: the mask must hold while exploring too
            obs, _, _, truncated, info = env.step(trainer.compute_single_action(obs))
            forbidden = max(forbidden, info["forbidden_moves"])
            if truncated:
                obs, _ = env.reset()
    finally:
        trainer.stop()
    assert forbidden == 0, "a masked action was taken"
    print(f"Forbidden moves taken in 200 sampled steps: {forbidden}")


if __name__ == "__main__":
    main()
