"""The same PPO config on Ray: `"backend": "ray"` runs the rollout workers as Ray actors.

With `ray.init()` (or `ray.init(address="auto")` on a cluster; a local Ray is
started here when none is running) and `"backend": "ray"`, the trainer's
`num_workers` rollout workers become Ray actors in a placement group; the
config is otherwise exactly the one that trains on the local backend. Needs the
`ray` extra; without Ray installed the script says so and exits.

    python examples/ray_backend.py [--num-workers 2] [--stop-iters 5] [--address auto] [--smoke]
"""

from __future__ import annotations

import argparse
import sys

from corral.agents.ppo import PPOTrainer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--num-workers", type=int, default=2)
    parser.add_argument("--stop-iters", type=int, default=5)
    parser.add_argument("--address", default=None, help="a Ray cluster; default: a local Ray")
    parser.add_argument("--smoke", action="store_true", help="one worker, one iteration")
    args = parser.parse_args()
    try:
        import ray
    except ImportError:
        print("Ray is not installed (pip install 'corral[ray]'); nothing to run.")
        sys.exit(0)
    workers, iters = (1, 1) if args.smoke else (args.num_workers, args.stop_iters)

    ray.init(address=args.address, num_cpus=None if args.address else workers + 1)
    trainer = PPOTrainer(
        env="CartPole-v1",
        config={
            "backend": "ray",
            "num_workers": workers,
            "num_cpus_per_worker": 1,
            "rollout_fragment_length": 250,
            "train_batch_size": 250 * workers,
            "sgd_minibatch_size": 125,
            "num_sgd_iter": 6,
            "lr": 1e-3,
            "model": {"fcnet_hiddens": [32, 32]},
            "seed": 0,
        },
    )
    try:
        for _ in range(iters):
            result = trainer.train()
            print(
                f"iter {result['training_iteration']:2d}  "
                f"return {result['episode_reward_mean']:6.1f}  "
                f"healthy workers {result['num_healthy_workers']}"
            )
    finally:
        trainer.stop()
        ray.shutdown()
    print(
        f"Trained on Ray with {workers} remote worker(s): "
        f"{result['timesteps_total']} env steps, return {result['episode_reward_mean']:.1f}"
    )


if __name__ == "__main__":
    main()
