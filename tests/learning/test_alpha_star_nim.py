"""AlphaStar's main policy learns to beat a random player at Nim (learning regression test).

The league starts with `main_0` against the random `main_exploiter_0`; main is copied into
the league (`main_1`) once it wins 90% of a full window of 100 games. Then `main_0` plays
400 greedy games against a random player, taking each seat half the time: perfect play
wins about 96% of them and a random player about 50%, so a win rate of 80% shows it
learned. The learner thread runs asynchronously to sampling, so a seed does not fix a
run; the margin is wide.
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from corral.agents.alpha_star import AlphaStarTrainer
from tests.fixtures.nim import Nim

GAMES = 400
TIME_BUDGET_S = 45


def _win_rate_against_random(trainer: AlphaStarTrainer, games: int = GAMES) -> float:
    env, rng, wins = Nim(), np.random.default_rng(0), 0
    for game in range(games):
        main_seat = game % 2
        obs, _ = env.reset(seed=game)
        while True:
            ((player, heap),) = obs.items()
            if player == main_seat:
                action = trainer.compute_single_action(heap, policy_id="main_0", explore=False)
            else:
                action = int(rng.integers(3))
            obs, rewards, terminateds, _, _ = env.step({player: action})
            if terminateds["__all__"]:
                wins += rewards[main_seat] > 0
                break
    return wins / games


@pytest.mark.learning
def test_main_learns_to_beat_a_random_player():
    trainer = AlphaStarTrainer(
        env=Nim,
        config={
            "num_workers": 0,
            "num_envs_per_worker": 8,
            "rollout_fragment_length": 16,
            "train_batch_size": 256,
            "min_time_s_per_reporting": 1,
            "model": {"fcnet_hiddens": [32]},
            "lr": 0.003,
            "gamma": 1.0,
            "seed": 0,
            "log_level": "ERROR",
            "league_builder_config": {
                "num_learning_league_exploiters": 1,
                "num_learning_main_exploiters": 1,
            },
        },
    )
    try:
        before = _win_rate_against_random(trainer)
        start, curve = time.monotonic(), []
        while "main_1" not in trainer.workers.local_worker().policy_map:
            result = trainer.train()
            curve.append(round(trainer.league_builder.win_rates.get("main_0", 0.0), 2))
            assert time.monotonic() - start < TIME_BUDGET_S, (
                f"main_0 was not copied into the league within {TIME_BUDGET_S} s "
                f"({result['timesteps_total']} steps); its win rates: {curve}"
            )
        after = _win_rate_against_random(trainer)
    finally:
        trainer.stop()
    print(f"AlphaStar on Nim: win rate against random {before:.2f} -> {after:.2f}; {curve}")
    assert before < 0.7
    assert after >= 0.8, f"win rate against random {after:.2f} (before {before:.2f}); {curve}"
