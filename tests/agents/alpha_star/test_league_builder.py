"""AlphaStarLeagueBuilder's decisions, against a stand-in trainer: the initial league, when
a policy is copied (name, frozen or learning), the matchmaking's probabilities and seats,
and the JSON state."""

from __future__ import annotations

import json
from collections import Counter
from types import SimpleNamespace

import numpy as np
import pytest

from corral.agents.alpha_star.league_builder import (
    AlphaStarLeagueBuilder,
    AlphaStarMatchmaking,
    LeagueBuilder,
    NoLeagueBuilder,
    win_rates_from,
)
from corral.policy.random_policy import RandomPolicy


class _Policy:
    def __init__(self, name: str) -> None:
        self.name = name

    def get_state(self) -> dict:
        return {"weights": {"w": np.full(2, len(self.name), np.float32)}, "of": self.name}


class _Worker:
    def __init__(self, policies, to_train) -> None:
        self.policy_map = {pid: _Policy(pid) for pid in policies}
        self.to_train = set(to_train)
        self.global_vars = {}

    def get_policies_to_train(self) -> set[str]:
        return set(self.to_train)


class _Trainer:
    """What the builder uses of a trainer: its config, local worker, policies and
    `add_policy` / `set_policy_mapping_fn` (recorded)."""

    def __init__(self, config: dict) -> None:
        self.config = config
        multiagent = config["multiagent"]
        self.worker = _Worker(multiagent["policies"], multiagent["policies_to_train"])
        self.workers = SimpleNamespace(local_worker=lambda: self.worker)
        self.iteration = 0
        self.added: list[dict] = []
        self.mapping_fn = multiagent["policy_mapping_fn"]

    def get_policy(self, policy_id):
        return self.worker.policy_map[policy_id]

    def add_policy(self, policy_id, policy_cls, **kwargs):
        self.added.append({"policy_id": policy_id, "policy_cls": policy_cls, **kwargs})
        self.worker.policy_map[policy_id] = _Policy(policy_id)
        self.worker.to_train = set(kwargs["policies_to_train"])
        self.mapping_fn = kwargs["policy_mapping_fn"]

    def set_policy_mapping_fn(self, fn):
        self.mapping_fn = fn


def _league(**settings):
    config = {"multiagent": {}, "seed": 0, "metrics_smoothing_episodes": 100}
    config["max_num_policies_to_train"] = settings.pop("max_num_policies_to_train", None)
    builder = AlphaStarLeagueBuilder(None, config, **settings)
    trainer = _Trainer(config)
    builder.trainer = trainer
    return builder, trainer


def _result(win_rates: dict[str, float], episodes_total: int = 1000, games: int = 100) -> dict:
    hist = {"episode_reward": [0.0]}
    for pid, rate in win_rates.items():
        wins = round(rate * games)
        hist[f"policy_{pid}_reward"] = [1.0] * wins + [-1.0] * (games - wins)
    return {"hist_stats": hist, "episodes_total": episodes_total}


def test_initial_league_is_rllibs():
    builder, trainer = _league()
    multiagent = trainer.config["multiagent"]
    policies = multiagent["policies"]
    assert sorted(policies) == sorted(
        ["main_0"]
        + [f"league_exploiter_{i}" for i in range(5)]
        + [f"main_exploiter_{i}" for i in range(5)]
    )
    assert policies["league_exploiter_0"].policy_class is RandomPolicy
    assert policies["main_exploiter_0"].policy_class is RandomPolicy
    assert policies["main_0"].policy_class is None  # the trainer's (APPO's) policy
    assert sorted(multiagent["policies_to_train"]) == sorted(
        ["main_0"]
        + [f"league_exploiter_{i}" for i in range(1, 5)]
        + [f"main_exploiter_{i}" for i in range(1, 5)]
    )
    assert (builder.main_policies, builder.league_exploiters, builder.main_exploiters) == (1, 5, 5)


def test_learning_exploiters_are_numbered_after_the_random_ones():
    builder, trainer = _league(
        num_random_policies=4, num_learning_league_exploiters=1, num_learning_main_exploiters=2
    )
    policies = trainer.config["multiagent"]["policies"]
    random_ones = sorted(p for p, s in policies.items() if s.policy_class is RandomPolicy)
    assert random_ones == [
        "league_exploiter_0",
        "league_exploiter_1",
        "main_exploiter_0",
        "main_exploiter_1",
    ]
    assert sorted(trainer.config["multiagent"]["policies_to_train"]) == [
        "league_exploiter_2",
        "main_0",
        "main_exploiter_2",
        "main_exploiter_3",
    ]
    assert (builder.league_exploiters, builder.main_exploiters) == (3, 4)


@pytest.mark.parametrize(
    ("settings", "named"),
    [
        ({"num_random_policies": 3}, "num_random_policies"),
        ({"num_learning_main_exploiters": -1}, "num_learning_main_exploiters"),
        ({"win_rate_threshold_for_new_snapshot": 1.5}, "win_rate_threshold_for_new_snapshot"),
        ({"prob_league_exploiter_match": 0.6, "prob_main_exploiter_match": 0.6}, "<= 1"),
    ],
)
def test_bad_settings_are_named(settings, named):
    with pytest.raises(ValueError, match=named):
        AlphaStarLeagueBuilder(None, {"multiagent": {}}, **settings)


def test_policies_of_ones_own_are_refused():
    config = {"multiagent": {"policies": {"p0": None, "p1": None}}}
    with pytest.raises(ValueError, match="NoLeagueBuilder"):
        AlphaStarLeagueBuilder(None, config)


def test_the_league_of_a_saved_config_is_accepted():
    first = {"multiagent": {}}
    AlphaStarLeagueBuilder(None, first)
    again = {"multiagent": {"policies": dict(first["multiagent"]["policies"])}}
    AlphaStarLeagueBuilder(None, again)
    assert again["multiagent"]["policies"].keys() == first["multiagent"]["policies"].keys()


def test_no_league_builder_changes_nothing():
    config = {"multiagent": {"policies": {"p0": None}}}
    builder = NoLeagueBuilder(None, config)
    builder.build_league({"hist_stats": {"policy_p0_reward": [1.0]}})
    assert config == {"multiagent": {"policies": {"p0": None}}}
    assert isinstance(builder, LeagueBuilder) and builder.__getstate__() == {}


def test_win_rates_count_positive_returns():
    hist = {"policy_a_reward": [1.0, -1.0, 1.0, 0.0], "policy_b_reward": [], "episode_reward": [1]}
    assert win_rates_from(hist) == {"a": 0.5}


def test_main_is_copied_frozen_when_its_win_rate_passes_the_threshold():
    builder, trainer = _league(win_rate_threshold_for_new_snapshot=0.9)
    builder.build_league(_result({"main_0": 0.85, "main_exploiter_0": 0.15}))
    assert trainer.added == [] and builder.win_rates["main_0"] == pytest.approx(0.85)
    builder.build_league(_result({"main_0": 0.95, "main_exploiter_0": 0.05}, episodes_total=2000))
    (added,) = trainer.added
    assert added["policy_id"] == "main_1"
    assert added["policy_cls"] is _Policy
    assert added["policy_state"]["of"] == "main_0"  # a copy of main_0's state
    assert "main_1" not in added["policies_to_train"]  # frozen
    assert "main_0" in added["policies_to_train"]
    matchmaking = added["policy_mapping_fn"]
    assert isinstance(matchmaking, AlphaStarMatchmaking) and not matchmaking.initial
    assert "main_1" in matchmaking.frozen and matchmaking.num_main_policies == 2
    assert builder.main_policies == 2 and builder.num_snapshots == 1


def test_a_frozen_policys_win_rate_is_recorded_but_never_copied():
    builder, trainer = _league()
    builder.build_league(_result({"main_exploiter_0": 1.0, "main_0": 0.0}))
    assert trainer.added == [] and builder.win_rates["main_exploiter_0"] == 1.0


def test_exploiter_copies_keep_learning_with_their_probability_main_copies_never():
    builder, trainer = _league(
        win_rate_threshold_for_new_snapshot=0.5, keep_new_snapshot_training_prob=1.0
    )
    builder.build_league(_result({"main_0": 1.0, "league_exploiter_2": 1.0}))
    added = {a["policy_id"]: a for a in trainer.added}
    assert set(added) == {"league_exploiter_5", "main_1"}
    learning = trainer.worker.get_policies_to_train()
    assert "league_exploiter_5" in learning and "main_1" not in learning


def test_a_copy_stays_frozen_when_max_num_policies_to_train_learn():
    builder, trainer = _league(
        win_rate_threshold_for_new_snapshot=0.5,
        keep_new_snapshot_training_prob=1.0,
        max_num_policies_to_train=9,
    )
    builder.build_league(_result({"main_exploiter_1": 1.0}))
    (added,) = trainer.added
    assert added["policy_id"] == "main_exploiter_5"
    assert "main_exploiter_5" not in added["policies_to_train"]


def test_a_policy_is_copied_again_only_after_a_fresh_window_of_games():
    builder, trainer = _league(win_rate_threshold_for_new_snapshot=0.9)
    builder.build_league(_result({"main_0": 0.95}, episodes_total=100))
    assert [a["policy_id"] for a in trainer.added] == ["main_1"]
    # The smoothing window (100 episodes) still holds games from before the copy.
    builder.build_league(_result({"main_0": 0.95}, episodes_total=150))
    assert len(trainer.added) == 1
    builder.build_league(_result({"main_0": 0.95}, episodes_total=200))
    assert [a["policy_id"] for a in trainer.added] == ["main_1", "main_2"]


def test_the_first_window_must_be_full_too():
    builder, trainer = _league(win_rate_threshold_for_new_snapshot=0.9)
    builder.build_league(_result({"main_0": 1.0}, episodes_total=99))
    assert trainer.added == []


def test_evaluation_results_decide_when_present():
    builder, trainer = _league(win_rate_threshold_for_new_snapshot=0.9)
    result = _result({"main_0": 0.1}, episodes_total=5)
    result["evaluation"] = _result({"main_0": 1.0})
    builder.build_league(result)  # no window to wait for: evaluations are fresh
    assert [a["policy_id"] for a in trainer.added] == ["main_1"]


def _matchmaking(**overrides) -> AlphaStarMatchmaking:
    settings = {
        "trainable": ["main_0", "league_exploiter_1", "main_exploiter_1"],
        "frozen": ["league_exploiter_0", "main_exploiter_0", "main_1", "main_2"],
        "num_main_policies": 3,
        "initial": False,
        "initial_opponent": "main_exploiter_0",
        "prob_league_exploiter_match": 0.3,
        "prob_main_exploiter_match": 0.2,
        "prob_main_exploiter_playing_against_learning_main": 0.5,
    }
    return AlphaStarMatchmaking(**{**settings, **overrides})


def _play(matchmaking, episodes: int, win_rates=None) -> list[tuple[str, str]]:
    worker = SimpleNamespace(global_vars={"win_rates": win_rates or {}})
    games = []
    for eid in range(episodes):
        episode = SimpleNamespace(episode_id=eid)
        seats = (matchmaking(0, episode, worker), matchmaking(1, episode, worker))
        # Asked again, an agent keeps its policy (the match is drawn once per episode).
        assert matchmaking(1, episode, worker) == seats[1]
        learner_seat = eid % 2
        games.append((seats[learner_seat], seats[1 - learner_seat]))
    return games


def test_initial_matches_are_main_against_the_first_random_main_exploiter():
    games = _play(_matchmaking(initial=True), 20)
    assert set(games) == {("main_0", "main_exploiter_0")}


def test_match_types_follow_their_probabilities():
    np.random.seed(0)
    games = _play(_matchmaking(), 4000)
    kinds = Counter(
        "LE" if learner.startswith("league_ex") else "ME" if learner.startswith("main_ex") else "M"
        for learner, _ in games
    )
    assert kinds["LE"] / 4000 == pytest.approx(0.3, abs=0.03)
    assert kinds["ME"] / 4000 == pytest.approx(0.2, abs=0.03)
    assert kinds["M"] / 4000 == pytest.approx(0.5, abs=0.03)
    # League exploiters play frozen members only; main's self-play is main against main.
    assert all(o in _matchmaking().frozen for learner, o in games if learner.startswith("league"))
    assert all(o == "main_0" for learner, o in games if learner == "main_0")
    # Main exploiters play the learning main half the time, else a frozen copy of main.
    me_opponents = Counter(o for learner, o in games if learner.startswith("main_ex"))
    total = sum(me_opponents.values())
    assert me_opponents["main_0"] / total == pytest.approx(0.5, abs=0.07)
    assert set(me_opponents) == {"main_0", "main_1", "main_2"}


def test_frozen_opponents_are_drawn_by_softmax_of_their_win_rates():
    np.random.seed(1)
    matchmaking = _matchmaking(
        frozen=["a", "b"], prob_league_exploiter_match=1.0, prob_main_exploiter_match=0.0
    )
    games = _play(matchmaking, 4000, win_rates={"a": 1.0, "b": 0.0})
    share_a = sum(o == "a" for _, o in games) / len(games)
    assert share_a == pytest.approx(np.exp(1) / (np.exp(1) + 1), abs=0.03)


def test_without_learning_exploiters_every_match_is_self_play():
    matchmaking = _matchmaking(trainable=["main_0"])
    assert set(_play(matchmaking, 200)) == {("main_0", "main_0")}


def test_string_agent_ids_get_both_seats():
    matchmaking = _matchmaking(initial=True)
    seats = Counter()
    for eid in range(10):
        episode = SimpleNamespace(episode_id=eid)
        first, second = matchmaking("white", episode), matchmaking("black", episode)
        assert {first, second} == {"main_0", "main_exploiter_0"}
        seats[first] += 1
    assert seats == {"main_0": 5, "main_exploiter_0": 5}


def test_state_is_json_and_restores_the_matchmaking():
    builder, trainer = _league(win_rate_threshold_for_new_snapshot=0.9)
    builder.build_league(_result({"main_0": 0.95, "main_exploiter_0": 0.05}))
    state = json.loads(json.dumps(builder.__getstate__()))
    assert state["main_policies"] == 2 and state["num_snapshots"] == 1
    fresh, fresh_trainer = _league(win_rate_threshold_for_new_snapshot=0.9)
    fresh_trainer.worker = trainer.worker  # the restored policies
    fresh.__setstate__(state)
    assert fresh.__getstate__() == state
    restored = fresh_trainer.mapping_fn
    assert not restored.initial and "main_1" in restored.frozen
    # The same random draws follow.
    assert fresh._rng.random() == builder._rng.random()
