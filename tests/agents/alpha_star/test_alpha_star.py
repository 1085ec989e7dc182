"""AlphaStarTrainer: RLlib 1.13's defaults, a few iterations of a league on Nim (two-player,
zero-sum), copies added to the league, checkpoints that restore it, and the errors of bad
settings."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

from corral.agents.alpha_star import DEFAULT_CONFIG, AlphaStarTrainer
from corral.agents.alpha_star.league_builder import AlphaStarLeagueBuilder, AlphaStarMatchmaking
from corral.agents.ppo import APPOTrainer
from corral.agents.registry import get_trainer_class
from corral.agents.trainer import Trainer
from corral.tune.registry import register_env
from corral.tune.trainable import checkpoint_folder
from tests.fixtures.nim import Nim

register_env("alpha_star_nim", lambda config: Nim(config))

CONFIG = {
    "env": "alpha_star_nim",
    "num_workers": 0,
    "seed": 0,
    "rollout_fragment_length": 16,
    "train_batch_size": 128,
    "min_time_s_per_reporting": 0,
    "model": {"fcnet_hiddens": [16]},
    "metrics_num_episodes_for_smoothing": 5,
    "log_level": "ERROR",
    "league_builder_config": {
        "num_learning_league_exploiters": 1,
        "num_learning_main_exploiters": 1,
    },
}


def _trainer(**overrides) -> AlphaStarTrainer:
    config = {**CONFIG, **overrides}
    config["league_builder_config"] = {
        **CONFIG["league_builder_config"],
        **overrides.get("league_builder_config", {}),
    }
    return AlphaStarTrainer(config=config)


def _train_until_learned(trainer: AlphaStarTrainer, policy_id: str = "main_0") -> dict:
    """Trains until the learner thread reported an update of `policy_id` (it trains
    asynchronously: on a loaded machine its first update can take a while)."""
    deadline = time.monotonic() + 120
    while True:
        result = trainer.train()
        if policy_id in result["info"]["learner"]:
            return result
        assert time.monotonic() < deadline, "the learner thread reported no update in 120 s"


def test_registry_and_rllib_defaults():
    assert get_trainer_class("AlphaStar") is AlphaStarTrainer
    assert issubclass(AlphaStarTrainer, APPOTrainer)
    assert DEFAULT_CONFIG["replay_buffer_capacity"] == 20
    assert DEFAULT_CONFIG["replay_buffer_replay_ratio"] == 0.5
    assert DEFAULT_CONFIG["max_num_policies_to_train"] is None
    assert DEFAULT_CONFIG["vtrace_drop_last_ts"] is False
    assert DEFAULT_CONFIG["min_time_s_per_reporting"] == 2
    league = DEFAULT_CONFIG["league_builder_config"]
    assert league["type"] is AlphaStarLeagueBuilder
    assert league["win_rate_threshold_for_new_snapshot"] == 0.9
    assert (league["num_random_policies"], league["num_learning_league_exploiters"]) == (2, 4)


def test_trains_the_learning_policies_only():
    # A window of 100 games: main_0 is not copied (by luck) before the checks below.
    trainer = _trainer(metrics_num_episodes_for_smoothing=100)
    try:
        local = trainer.workers.local_worker()
        assert trainer.config["max_num_policies_to_train"] == 3
        assert sorted(p for p, _, _ in trainer.distributed_learners) == [
            "league_exploiter_1",
            "main_0",
            "main_exploiter_1",
        ]
        result = _train_until_learned(trainer)
        learner = result["info"]["learner"]
        # Until main's first copy, main_0 plays the random main_exploiter_0 only.
        assert "main_0" in learner and "main_exploiter_0" not in learner
        assert "total_loss" in learner["main_0"]["learner_stats"]
        assert set(result["policy_reward_mean"]) == {"main_0", "main_exploiter_0"}
        assert isinstance(local.policy_mapping_fn, AlphaStarMatchmaking)
        assert trainer.league_builder.win_rates["main_0"] == pytest.approx(
            np.mean(np.asarray(result["hist_stats"]["policy_main_0_reward"]) > 0)
        )
        # The workers' matchmaking sees the win rates.
        assert local.global_vars["win_rates"] == trainer.league_builder.win_rates
    finally:
        trainer.stop()


def test_learner_shards_replay_streams_of_their_own():
    """Each shard's replay buffer draws its own stream, from the trainer's seed and the
    shard's index (one seed for all of them made every shard replay alike)."""

    def rng_states(seed: int) -> list:
        trainer = _trainer(seed=seed)
        try:
            buffers = trainer.distributed_learners.get_replay_actors()
            return [buffer._rng.getstate() for buffer in buffers]
        finally:
            trainer.stop()

    states = rng_states(0)
    assert len(states) == 3  # three learning policies, a shard each (no GPU)
    assert len({repr(s) for s in states}) == 3
    assert rng_states(0) == states


def _grown_league(**overrides) -> AlphaStarTrainer:
    """A trainer whose league copied main_0 (and learning exploiters) at least once."""
    trainer = _trainer(
        league_builder_config={
            "win_rate_threshold_for_new_snapshot": 0.0,
            "keep_new_snapshot_training_prob": 1.0,
        },
        max_num_policies_to_train=4,
        **overrides,
    )
    local = trainer.workers.local_worker()
    for _ in range(40):
        trainer.train()
        # main_0 and a learning exploiter were copied (the latter into a learning copy).
        if "main_1" in local.policy_map and len(local.get_policies_to_train()) == 4:
            return trainer
    trainer.stop()
    raise AssertionError(f"the league did not grow in 40 iterations: {sorted(local.policy_map)}")


def test_copies_join_the_league_frozen_or_learning():
    trainer = _grown_league()
    try:
        local = trainer.workers.local_worker()
        assert "main_1" in local.policy_map and "main_1" not in local.get_policies_to_train()
        learning = local.get_policies_to_train()
        # One exploiter copy kept learning, up to max_num_policies_to_train; later ones froze.
        assert len(learning) == 4
        assert sorted(p for p, _, _ in trainer.distributed_learners) == sorted(learning)
        assert not local.policy_mapping_fn.initial
        frozen = trainer.get_weights(["main_1"])
        played: set[str] = set()
        for _ in range(6):
            played |= set(trainer.train()["policy_reward_mean"])
        assert len(played) > 2  # the league's matches, not only main_0 vs random
        assert _same_weights(trainer.get_weights(["main_1"]), frozen)  # never trained
    finally:
        trainer.stop()


def _same_weights(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(
        a[p].keys() == b[p].keys() and all(np.array_equal(a[p][k], b[p][k]) for k in a[p])
        for p in a
    )


def test_checkpoints_restore_the_league(tmp_path):
    trainer = _grown_league()
    try:
        local = trainer.workers.local_worker()
        policies, learning = sorted(local.policy_map), local.get_policies_to_train()
        state = trainer.league_builder.__getstate__()
        weights = trainer.get_weights()
        path = checkpoint_folder(trainer.save(str(tmp_path)))
    finally:
        trainer.stop()
    # The league builder's state is JSON beside the weights.
    assert "main_policies" in (Path(path) / "extra_state.json").read_text()
    for restored in (
        _trainer(
            league_builder_config={
                "win_rate_threshold_for_new_snapshot": 0.0,
                "keep_new_snapshot_training_prob": 1.0,
            },
            max_num_policies_to_train=4,
        ),
        None,
    ):
        if restored is None:
            # Rebuilt from the checkpoint alone: its config names the league builder.
            restored = Trainer.from_checkpoint(path)
            assert isinstance(restored, AlphaStarTrainer)
        else:
            restored.restore(path)
        try:
            local = restored.workers.local_worker()
            assert sorted(local.policy_map) == policies
            assert local.get_policies_to_train() == learning
            assert restored.league_builder.__getstate__() == state
            assert _same_weights(restored.get_weights(), weights)
            matchmaking = local.policy_mapping_fn
            assert not matchmaking.initial and set(matchmaking.trainable) == learning
            assert sorted(p for p, _, _ in restored.distributed_learners) == sorted(learning)
            restored.train()
        finally:
            restored.stop()


def test_no_league_builder_trains_the_configs_own_policies():
    trainer = AlphaStarTrainer(
        config={
            **CONFIG,
            "league_builder_config": {"type": "NoLeagueBuilder"},
            "multiagent": {
                "policies": {"p0", "p1"},
                "policy_mapping_fn": lambda agent_id, episode, worker, **kw: f"p{agent_id}",
            },
        }
    )
    try:
        result = trainer.train()
        result = trainer.train()
        assert set(result["info"]["learner"]) <= {"p0", "p1"}
        assert sorted(trainer.workers.local_worker().policy_map) == ["p0", "p1"]
    finally:
        trainer.stop()


def test_replay_mixes_old_batches_per_policy():
    trainer = _trainer(replay_buffer_replay_ratio=0.5, replay_buffer_capacity=3)
    try:
        worker = trainer.workers.local_worker()
        first, second = worker.sample(), worker.sample()
        (piece,) = trainer._replay_per_policy(first)
        # Only the learning main_0 played and learns; the random policy's rows are dropped.
        assert set(piece.policy_batches) == {"main_0"}
        # Ratio 0.5: each new batch comes with one replayed batch (here: the first again).
        assert piece.policy_batches["main_0"].count == 2 * first.policy_batches["main_0"].count
        (piece,) = trainer._replay_per_policy(second)
        new = second.policy_batches["main_0"]
        assert piece.policy_batches["main_0"].count in (
            new.count + first.policy_batches["main_0"].count,
            2 * new.count,
        )
        assert piece.env_steps() == second.env_steps()  # train_batch_size counts new steps
        buffer = trainer.distributed_learners.get_replay_and_policy_actors("main_0")[0]
        assert len(buffer.replay_buffers["main_0"]) == 2
        assert trainer.distributed_learners.get_replay_and_policy_actors("main_exploiter_0") == (
            None,
            None,
        )
    finally:
        trainer.stop()


@pytest.mark.parametrize(
    ("overrides", "named"),
    [
        ({"max_num_policies_to_train": 2}, "max_num_policies_to_train=2"),
        ({"replay_proportion": 0.5}, "replay_buffer_replay_ratio"),
        ({"replay_buffer_replay_ratio": 1.5}, "replay_buffer_replay_ratio"),
        ({"league_builder_config": {"num_random_policy": 2}}, "num_random_policy"),
        ({"league_builder_config": {"num_random_policies": 1}}, "num_random_policies"),
        ({"league_builder_config": {"type": "NoSuchBuilder"}}, "NoSuchBuilder"),
        ({"multiagent": {"policies": {"mine"}}}, "NoLeagueBuilder"),
    ],
)
def test_bad_settings_fail_at_construction(overrides, named):
    with pytest.raises((ValueError, TypeError), match=named):
        AlphaStarTrainer(config={**CONFIG, **overrides})
