"""Custom metrics with `DefaultCallbacks`: per-episode data, histograms and result keys.

A callbacks class records, for every CartPole episode, how far the pole leaned
(the mean absolute angle over the episode, from each step's last observation)
and how far the cart drifted:

- `on_episode_start` sets up `episode.user_data` (scratch space) and
  `episode.hist_data`;
- `on_episode_step` appends the pole angle of the step just taken;
- `on_episode_end` stores `episode.custom_metrics["pole_angle"]` (averaged
  into `result["custom_metrics"]["pole_angle_mean" / "_min" / "_max"]`) and
  the episode's angles as a histogram (`result["hist_stats"]["pole_angles"]`,
  the lists of the iteration's episodes joined);
- `on_sample_end` counts the batches a worker sampled (each worker has its own
  callbacks object, as in RLlib);
- `on_train_result` (on the trainer's callbacks object) adds keys of its own to
  the result dict, here the local worker's count.

    python examples/custom_metrics_callbacks.py [--stop-iters 5] [--smoke]
"""

from __future__ import annotations

import argparse

import numpy as np

from corral.agents.callbacks import DefaultCallbacks
from corral.agents.ppo import PPOTrainer


class PoleAngleCallbacks(DefaultCallbacks):
    def __init__(self) -> None:
        super().__init__()
        self.batches_sampled = 0

    def on_episode_start(self, *, worker, base_env, policies, episode, **kwargs):
        assert episode.length <= 0, "on_episode_start runs before the first step"
        episode.user_data["pole_angles"] = []
        episode.hist_data["pole_angles"] = []

    def on_episode_step(self, *, worker, base_env, episode, **kwargs):
        obs = episode.last_observation_for()
        episode.user_data["pole_angles"].append(abs(float(obs[2])))
        episode.user_data["cart_position"] = float(obs[0])

    def on_episode_end(self, *, worker, base_env, policies, episode, **kwargs):
        angles = episode.user_data["pole_angles"]
        episode.custom_metrics["pole_angle"] = float(np.mean(angles)) if angles else 0.0
        episode.custom_metrics["cart_drift"] = abs(episode.user_data.get("cart_position", 0.0))
        episode.hist_data["pole_angles"] = angles

    def on_sample_end(self, *, worker, samples, **kwargs):
        self.batches_sampled += 1

    def on_train_result(self, *, trainer, result, **kwargs):
        result["callback_ok"] = True
        result["batches_sampled_by_driver"] = (
            trainer.workers.local_worker().callbacks.batches_sampled
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stop-iters", type=int, default=5)
    parser.add_argument("--smoke", action="store_true", help="two quick iterations")
    args = parser.parse_args()
    iters = 2 if args.smoke else args.stop_iters

    trainer = PPOTrainer(
        env="CartPole-v1",
        config={
            "callbacks": PoleAngleCallbacks,
            "num_workers": 0,
            "rollout_fragment_length": 500,
            "train_batch_size": 500,
            "sgd_minibatch_size": 128,
            "num_sgd_iter": 6,
            "lr": 1e-3,
            "model": {"fcnet_hiddens": [32, 32]},
            "seed": 0,
        },
    )
    try:
        for _ in range(iters):
            result = trainer.train()
            metrics = result["custom_metrics"]
            print(
                f"iter {result['training_iteration']:2d}  "
                f"return {result['episode_reward_mean']:6.1f}  "
                f"pole angle mean {metrics['pole_angle_mean']:.4f} "
                f"(min {metrics['pole_angle_min']:.4f}, max {metrics['pole_angle_max']:.4f})  "
                f"cart drift {metrics['cart_drift_mean']:.3f}"
            )
    finally:
        trainer.stop()
    assert result["callback_ok"]
    print(
        f"custom_metrics keys: {sorted(result['custom_metrics'])}; "
        f"{len(result['hist_stats']['pole_angles'])} angles in hist_stats['pole_angles']; "
        f"batches sampled by the driver: {result['batches_sampled_by_driver']}"
    )


if __name__ == "__main__":
    main()
