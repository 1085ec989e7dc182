"""A custom env written for the old gym API (gym <= 0.25), trained with PPO.

RLlib 1.x users wrote envs like `Thermostat` below: `reset()` returns only the
observation, `step()` returns `(obs, reward, done, info)`, the spaces come from
`gym.spaces`. corral runs on Gymnasium: it converts a `gym.Env` with Farama's
Shimmy (when gym is installed) and wraps any other env whose `reset()` takes no
`seed` itself, and says so once in a warning that names the env. The env is
registered with `register_env`, exactly as in RLlib 1.x.

The task: keep a room at 21 degrees. Each step the agent cools, waits or heats
(-1, 0, +1 degree) while the outside pulls the temperature down a little; the
reward is minus the distance to the target.

    python examples/custom_env_old_gym.py [--stop-iters 15] [--smoke]

Without gym installed the env uses `gymnasium.spaces` and no base class, and is
still converted: only its old `reset`/`step` signatures matter.
"""

from __future__ import annotations

import argparse

import numpy as np

try:  # what RLlib 1.x code imported; corral itself never needs it
    import gym
    from gym import spaces

    EnvBase = gym.Env
except ImportError:
    from gymnasium import spaces

    EnvBase = object

from corral.agents.ppo import PPOTrainer
from corral.tune.registry import register_env

TARGET = 21.0


class Thermostat(EnvBase):
    """An old-API env: `reset() -> obs`, `step(a) -> (obs, reward, done, info)`."""

    def __init__(self, config: dict) -> None:
        self.episode_len = int(config.get("episode_len", 20))
        self.observation_space = spaces.Box(-50.0, 50.0, (1,), np.float32)
        self.action_space = spaces.Discrete(3)  # 0: cool, 1: wait, 2: heat
        self.rng = np.random.default_rng(config.get("seed"))

    def reset(self):
        self.temp = float(self.rng.uniform(12.0, 30.0))
        self.t = 0
        return self._obs()

    def _obs(self) -> np.ndarray:
        return np.array([self.temp - TARGET], np.float32)

    def step(self, action: int):
        self.temp += (int(action) - 1) - 0.2
        self.t += 1
        reward = -abs(self.temp - TARGET) / 10.0
        done = self.t >= self.episode_len
        return self._obs(), reward, done, {"temperature": self.temp}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stop-iters", type=int, default=15)
    parser.add_argument("--smoke", action="store_true", help="two quick iterations")
    args = parser.parse_args()
    iters = 2 if args.smoke else args.stop_iters

    register_env("thermostat", lambda env_config: Thermostat(env_config))
    trainer = PPOTrainer(
        env="thermostat",
        config={
            "env_config": {"episode_len": 20},
            "num_workers": 0,
            "rollout_fragment_length": 200 if args.smoke else 400,
            "train_batch_size": 200 if args.smoke else 400,
            "sgd_minibatch_size": 100,
            "num_sgd_iter": 6,
            "lr": 3e-3,
            "model": {"fcnet_hiddens": [32, 32]},
            "seed": 0,
        },
    )
    try:
        for _ in range(iters):
            result = trainer.train()
            print(
                f"iter {result['training_iteration']:2d}  "
                f"return {result['episode_reward_mean']:7.3f}  "
                f"steps {result['timesteps_total']}"
            )
        # Acting with the old-API env by hand, as a 1.x user would.
        env = Thermostat({"seed": 1})
        obs, done, total = env.reset(), False, 0.0
        while not done:
            action = trainer.compute_single_action(obs, explore=False)
            obs, reward, done, info = env.step(action)
            total += reward
    finally:
        trainer.stop()
    print(f"Greedy episode: return {total:.3f}, final temperature {info['temperature']:.1f}")


if __name__ == "__main__":
    main()
