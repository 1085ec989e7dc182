"""Train, checkpoint, restore for serving, evaluate greedily, and export the model.

1. Train PPO on CartPole-v1 for a few iterations and `save()` a checkpoint.
2. `Trainer.from_checkpoint(path, config_overrides={"num_workers": 0,
   "explore": False})` rebuilds the trainer from the checkpoint's own config
   (no remote workers, greedy actions) and restores its weights.
3. Play a few episodes with `compute_single_action` (greedy) and report the
   mean return.
4. `export_policy_model(dir)` writes a TorchScript `model.pt` that maps a batch
   of observations to action logits and values; it is loaded back with plain
   `torch.jit.load` (no corral needed to serve it) and its greedy actions are
   checked against the trainer's.

    python examples/checkpoint_and_serve.py [--stop-iters 8] [--episodes 5] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import tempfile

import gymnasium as gym
import numpy as np
import torch

from corral.agents.ppo import PPOTrainer
from corral.agents.trainer import Trainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stop-iters", type=int, default=8)
    parser.add_argument("--episodes", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="one iteration, one episode")
    args = parser.parse_args()
    iters, episodes = (1, 1) if args.smoke else (args.stop_iters, args.episodes)

    with tempfile.TemporaryDirectory(prefix="corral-serve-") as workdir:
        trainer = PPOTrainer(
            env="CartPole-v1",
            config={
                "num_workers": 1,
                "rollout_fragment_length": 500,
                "train_batch_size": 500,
                "sgd_minibatch_size": 128,
                "num_sgd_iter": 8,
                "lr": 3e-3,
                "model": {"fcnet_hiddens": [32, 32]},
                "seed": 0,
            },
        )
        for _ in range(iters):
            result = trainer.train()
            print(
                f"iter {result['training_iteration']:2d}  "
                f"return {result['episode_reward_mean']:6.1f}"
            )
        checkpoint = trainer.save(os.path.join(workdir, "checkpoints"))
        trainer.stop()
        print(f"saved {checkpoint}")

        served = Trainer.from_checkpoint(
            checkpoint, config_overrides={"num_workers": 0, "explore": False}
        )
        env = gym.make("CartPole-v1")
        returns, observations = [], []
        for episode in range(episodes):
            obs, _ = env.reset(seed=episode)
            total, done = 0.0, False
            while not done:
                observations.append(obs)
                obs, reward, terminated, truncated, _ = env.step(served.compute_single_action(obs))
                total += reward
                done = terminated or truncated
            returns.append(total)
        print(f"greedy returns of the restored trainer: {returns}")

        export_dir = os.path.join(workdir, "exported")
        served.export_policy_model(export_dir)
        model = torch.jit.load(os.path.join(export_dir, "model.pt"))
        batch = torch.as_tensor(np.array(observations[:200]), dtype=torch.float32)
        logits, values = model(batch)
        exported_actions = logits.argmax(-1).numpy()
        trainer_actions = np.array([served.compute_single_action(o) for o in batch.numpy()])
        agree = float(np.mean(exported_actions == trainer_actions))
        served.stop()
    assert agree == 1.0, f"the exported model disagrees on {1 - agree:.0%} of the actions"
    print(
        f"Restored from {os.path.basename(checkpoint)}: mean greedy return "
        f"{np.mean(returns):.1f} over {episodes} episode(s); exported TorchScript model "
        f"agrees on {agree:.0%} of {len(batch)} actions"
    )


if __name__ == "__main__":
    main()
