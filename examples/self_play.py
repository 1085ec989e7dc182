"""League-based self-play on Nim with `Trainer.add_policy` and a small `PolicyMap`.

The game: a heap of stones; the players take 1, 2 or 3 stones in turn and
whoever takes the last stone wins (+1, the other gets -1). The trained policy
"main" always moves first, from a heap that is not a multiple of 4, so a
perfect "main" wins every game (it leaves the opponent a multiple of 4).

The league starts as {"main", "random"}. Each episode, the mapping function
puts "main" on the first move and samples the opponent from the league's
frozen policies. Whenever "main" wins more than 80% of an iteration's games,
a callback freezes a copy of it (`add_policy` + copying its state) and adds
it to the league. `policy_map_capacity=2` keeps only two policies in memory
per worker, so the league's other members live on disk and are reloaded when
an episode samples them; the learner's optimiser state for "main" travels
with it when it is spilled.

Run: python examples/self_play.py [--iterations N] [--max-league M]
"""

from __future__ import annotations

import argparse
import random
import time
from typing import Any

import gymnasium as gym
import numpy as np

from corral.agents.callbacks import DefaultCallbacks
from corral.agents.ppo import PPOTrainer
from corral.env.multi_agent_env import MultiAgentEnv
from corral.policy.policy import Policy

MAX_HEAP = 15
FIRST, SECOND = "first", "second"
WIN_RATE_TO_FREEZE = 0.8


class Nim(MultiAgentEnv):
    """Two-player Nim; each player observes the heap size when it is its turn."""

    possible_agents = [FIRST, SECOND]
    observation_space = gym.spaces.Discrete(MAX_HEAP + 1)
    action_space = gym.spaces.Discrete(3)  # take action + 1 stones

    def __init__(self, config: Any = None) -> None:
        super().__init__()
        self.agents = list(self.possible_agents)
        self._rng = np.random.default_rng()
        self.heap = 0
        self.to_move = FIRST

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        # Winning starts for the first mover: heaps that are not multiples of 4.
        self.heap = int(self._rng.choice([h for h in range(5, MAX_HEAP + 1) if h % 4]))
        self.to_move = FIRST
        return {FIRST: self.heap}, {}

    def step(self, action_dict: dict):
        player = self.to_move
        other = SECOND if player == FIRST else FIRST
        self.heap -= min(int(action_dict[player]) + 1, self.heap)
        if self.heap == 0:
            rewards = {player: 1.0, other: -1.0}
            done = {player: True, other: True, "__all__": True}
            return {player: 0, other: 0}, rewards, done, {"__all__": False}, {}
        self.to_move = other
        return {other: self.heap}, {}, {"__all__": False}, {"__all__": False}, {}


class RandomPolicy(Policy):
    """Takes 1, 2 or 3 stones at random (the league's first opponent)."""

    def compute_actions(self, obs_batch: Any, *args: Any, **kwargs: Any):
        return np.random.randint(0, 3, size=len(obs_batch)), [], {}


def league_mapping(opponents: tuple[str, ...]):
    """A mapping fn: "main" moves first, the opponent is sampled from `opponents`."""

    def mapping(agent_id: str, episode: Any, worker: Any, **kwargs: Any) -> str:
        return "main" if agent_id == FIRST else random.choice(opponents)

    return mapping


class LeagueCallbacks(DefaultCallbacks):
    """Freezes a copy of "main" into the league when it wins > 80% of its games."""

    max_league = 7  # stop freezing copies once the league (with "main") is this big

    def __init__(self) -> None:
        super().__init__()
        self.league = ["random"]  # frozen opponents, in the order they joined

    def on_train_result(self, *, trainer: Any, result: dict, **kwargs: Any) -> None:
        new_episodes = result["episodes_this_iter"]
        main_returns = result["hist_stats"]["policy_main_reward"][-new_episodes:]
        win_rate = float(np.mean(np.asarray(main_returns) > 0)) if main_returns else 0.0
        result["league_size"] = len(self.league) + 1
        result["main_win_rate"] = win_rate
        if win_rate > WIN_RATE_TO_FREEZE and len(self.league) + 1 < self.max_league:
            new_id = f"main_v{len(self.league)}"
            self.league.append(new_id)
            frozen = trainer.add_policy(
                new_id,
                type(trainer.get_policy("main")),
                policy_mapping_fn=league_mapping(tuple(self.league)),
                policies_to_train=["main"],
            )
            frozen.set_state(trainer.get_policy("main").get_state())
            trainer.workers.sync_weights()
            result["league_size"] = len(self.league) + 1


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=40)
    parser.add_argument("--max-league", type=int, default=7)
    parser.add_argument("--num-workers", type=int, default=1)
    args = parser.parse_args()

    LeagueCallbacks.max_league = args.max_league
    trainer = PPOTrainer(
        env=Nim,
        config={
            "num_workers": args.num_workers,
            "num_envs_per_worker": 8,
            "rollout_fragment_length": 32,
            "train_batch_size": 512,
            "sgd_minibatch_size": 128,
            "num_sgd_iter": 8,
            "lr": 3e-3,
            "gamma": 1.0,
            "lambda": 0.95,
            "entropy_coeff": 0.01,
            "model": {"fcnet_hiddens": [32]},
            "callbacks": LeagueCallbacks,
            "seed": 0,
            "multiagent": {
                "policies": {
                    "main": (None, None, None, {}),
                    "random": (RandomPolicy, Nim.observation_space, Nim.action_space, {}),
                },
                "policy_mapping_fn": league_mapping(("random",)),
                "policies_to_train": ["main"],
                "policy_map_capacity": 2,
            },
        },
    )
    start = time.perf_counter()
    try:
        for _ in range(args.iterations):
            result = trainer.train()
            local_map = trainer.workers.local_worker().policy_map
            opponents = {
                pid: round(r, 2)
                for pid, r in sorted(result["policy_reward_mean"].items())
                if pid != "main"
            }
            print(
                f"iter {result['training_iteration']:3d}  league {result['league_size']}  "
                f"main win rate {result['main_win_rate']:.2f}  "
                f"in memory {local_map.in_memory()}  opponents' mean return {opponents}",
                flush=True,
            )
    finally:
        trainer.stop()
    league = ["main", *trainer.callbacks.league]
    print(f"league: {league} after {time.perf_counter() - start:.0f}s")


if __name__ == "__main__":
    main()
