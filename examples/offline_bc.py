"""Offline RL: PPO writes its experiences with `output`, BC learns from the files alone.

1. PPO trains on CartPole-v1 with `"output": DIR` and `"batch_mode":
   "complete_episodes"`: every batch its rollout worker samples is written to DIR as
   RLlib 1.x JSON lines (`output-<date>_worker-0_<n>.json`), whole episodes per line.
   It stops once a greedy evaluation returns 475, and its trained policy then samples
   `--expert-steps` more (written too: a logged run of the deployed policy).
2. BC (behaviour cloning, MARWIL with `beta: 0`) is built with no env at all: the
   spaces are given (`observation_space`, `action_space`) and `"input": DIR` is the
   only data it trains on. Its one evaluation worker does have the env
   (`evaluation_config={"env": ..., "input": "sampler"}`) and plays greedy episodes
   with the cloned policy.

Because the good policy's episodes are long, most written steps are a good policy's, and
the clone evaluates at 400+ once the reader reached the good policy's steps (seed 0:
451 after 47,466 steps read; 90 s in all on a busy 2-core machine, PPO's training
included).

    python examples/offline_bc.py [--max-steps 60000] [--expert-steps 15000] [--out DIR] [--smoke]
"""

from __future__ import annotations

import argparse
import os
import tempfile

import gymnasium as gym

from corral.agents.marwil import BCTrainer
from corral.agents.ppo import PPOTrainer

ENV = "CartPole-v1"

PPO_CONFIG = {  # tuned_examples/ppo/cartpole-ppo.yaml's settings
    "num_workers": 0,
    "num_envs_per_worker": 8,
    "rollout_fragment_length": 64,
    "train_batch_size": 512,
    "sgd_minibatch_size": 256,
    "num_sgd_iter": 8,
    "lr": 2.5e-3,
    "gamma": 0.98,
    "lambda": 0.8,
    "kl_coeff": 0.0,
    "entropy_coeff": 0.0,
    "vf_clip_param": 10000.0,
    "grad_clip": 0.5,
    "model": {"fcnet_hiddens": [64, 64], "fcnet_activation": "tanh", "vf_share_layers": False},
    "seed": 0,
}


def write_experiences(
    out_dir: str, good_return: float, max_steps: int, expert_steps: int, smoke: bool
) -> int:
    """Trains PPO with `output` until its greedy evaluation reaches `good_return`, then
    samples `expert_steps` more with the trained policy; returns the env steps written."""
    trainer = PPOTrainer(
        env=ENV,
        config={
            **PPO_CONFIG,
            "output": out_dir,
            "batch_mode": "complete_episodes",
            "evaluation_interval": 2,
            "evaluation_duration": 1 if smoke else 10,
            # The greedy evaluation episodes are not training data: keep them out of DIR.
            "evaluation_config": {"explore": False, "output": None},
        },
    )
    try:
        while True:
            result = trainer.train()
            evaluation = result.get("evaluation", {}).get("episode_reward_mean", float("nan"))
            print(
                f"PPO iter {result['training_iteration']:2d}  steps {result['timesteps_total']:6d}"
                f"  return {result['episode_reward_mean']:6.1f}  greedy {evaluation:6.1f}"
            )
            if smoke or evaluation >= good_return or result["timesteps_total"] >= max_steps:
                break
        # The training run's batches are a learning policy's, good and bad; a logged
        # deployment of the trained one adds mostly long episodes. A rollout worker's
        # `sample()` writes every batch it returns.
        written = result["timesteps_total"]
        worker = trainer.workers.local_worker()
        while written < result["timesteps_total"] + (0 if smoke else expert_steps):
            written += worker.sample().env_steps()
        return written
    finally:
        trainer.stop()  # closes the output files


def clone(in_dir: str, good_return: float, max_steps: int, smoke: bool) -> float:
    """BC from the files in `in_dir` only; returns its last greedy evaluation return."""
    space = gym.make(ENV)
    trainer = BCTrainer(
        config={
            "input": in_dir,
            # No env on the driver: the policy's spaces are given.
            "observation_space": space.observation_space,
            "action_space": space.action_space,
            "lr": 1e-3,
            "train_batch_size": 512,
            # Batches are drawn from everything read so far (up to 50,000 steps), not
            # just the last 10,000 (the default): the file holds bad episodes and good.
            "replay_buffer_size": 50_000,
            "model": {"fcnet_hiddens": [64, 64]},
            "min_time_s_per_reporting": 0,
            "min_sample_timesteps_per_reporting": 0,
            "evaluation_interval": 1 if smoke else 10,
            "evaluation_num_workers": 1,
            "evaluation_duration": 1 if smoke else 10,
            # The evaluation worker plays the env (its input is the sampler, not DIR).
            "evaluation_config": {"env": ENV, "input": "sampler", "explore": False},
            "seed": 0,
        }
    )
    evaluation = float("nan")
    try:
        while True:
            result = trainer.train()
            if "evaluation" not in result:
                continue
            evaluation = result["evaluation"]["episode_reward_mean"]
            print(
                f"BC  iter {result['training_iteration']:2d}  steps read "
                f"{result['timesteps_total']:6d}  greedy {evaluation:6.1f}"
            )
            if smoke or evaluation >= good_return or result["timesteps_total"] >= max_steps:
                return evaluation
    finally:
        trainer.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-steps", type=int, default=60_000, help="per trainer")
    parser.add_argument(
        "--expert-steps", type=int, default=15_000, help="written by the trained PPO policy"
    )
    parser.add_argument("--out", help="where PPO writes its experiences (default: a temp dir)")
    parser.add_argument("--smoke", action="store_true", help="one iteration of each")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="corral-offline-") as tmp:
        out_dir = args.out or os.path.join(tmp, "cartpole-ppo")
        written = write_experiences(out_dir, 475.0, args.max_steps, args.expert_steps, args.smoke)
        files = sorted(os.listdir(out_dir))
        print(f"PPO wrote {written} env steps to {len(files)} file(s) in {out_dir}")
        greedy = clone(out_dir, 400.0, args.max_steps, args.smoke)
    print(f"BC, trained only from those files: greedy evaluation return {greedy:.1f}")


if __name__ == "__main__":
    main()
