"""A Tune grid search over PPO's learning rate, then serving the best checkpoint.

`tune.run("PPO", config={..., "lr": tune.grid_search([...])}, ...)` runs one
trial per value (in this process; no Ray needed), checkpoints each at the end,
and returns an `ExperimentAnalysis`. The script picks the best trial by
`episode_reward_mean`, takes its best checkpoint, restores it into a fresh
`PPOTrainer` and plays one greedy CartPole episode with `compute_single_action`.

    python examples/tune_grid_search.py [--stop-iters 6] [--local-dir DIR] [--smoke]
"""

from __future__ import annotations

import argparse
import shutil
import tempfile

import gymnasium as gym

from corral import tune
from corral.agents.ppo import PPOTrainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stop-iters", type=int, default=6)
    parser.add_argument("--local-dir", default=None, help="default: a temporary directory")
    parser.add_argument("--smoke", action="store_true", help="one iteration per trial")
    args = parser.parse_args()
    local_dir = args.local_dir or tempfile.mkdtemp(prefix="corral-tune-")

    config = {
        "env": "CartPole-v1",
        "num_workers": 0,
        "rollout_fragment_length": 500,
        "train_batch_size": 500,
        "sgd_minibatch_size": 128,
        "num_sgd_iter": 6,
        "model": {"fcnet_hiddens": [32, 32]},
        "lr": tune.grid_search([3e-3, 1e-4] if args.smoke else [3e-3, 1e-3, 1e-4]),
        "seed": 0,
    }
    analysis = tune.run(
        "PPO",
        name="ppo_lr_grid",
        config=config,
        stop={"training_iteration": 1 if args.smoke else args.stop_iters},
        checkpoint_at_end=True,
        metric="episode_reward_mean",
        mode="max",
        local_dir=local_dir,
        verbose=1,
    )
    for trial in analysis.trials:
        print(
            f"lr {trial.config['lr']:.0e}: "
            f"episode_reward_mean {trial.last_result['episode_reward_mean']:.1f}"
        )

    best_trial = analysis.get_best_trial("episode_reward_mean", "max")
    checkpoint = analysis.get_best_checkpoint(best_trial, "episode_reward_mean", "max")
    print(f"best: lr {best_trial.config['lr']:.0e}, checkpoint {checkpoint}")

    trainer = PPOTrainer(config={**best_trial.config, "explore": False})
    trainer.restore(checkpoint)
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=0)
    total, done = 0.0, False
    while not done:
        obs, reward, terminated, truncated, _ = env.step(trainer.compute_single_action(obs))
        total += reward
        done = terminated or truncated
    trainer.stop()
    if args.local_dir is None:
        shutil.rmtree(local_dir, ignore_errors=True)
    print(f"Greedy episode with the best trial's checkpoint: return {total:.0f}")


if __name__ == "__main__":
    main()
