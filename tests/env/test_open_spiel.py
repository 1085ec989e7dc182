"""`OpenSpielEnv`: OpenSpiel games as turn-based (or simultaneous-move) `MultiAgentEnv`s."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

pyspiel = pytest.importorskip("pyspiel", reason="OpenSpiel is the `open-spiel` extra")

from corral.env.wrappers.open_spiel import ILLEGAL_ACTION_PENALTY, OpenSpielEnv  # noqa: E402


def _play(env: OpenSpielEnv, seed: int, policy_seed: int = 0) -> list:
    """A whole game with random legal actions: the steps' (obs, rewards, flags, infos)."""
    rng = np.random.default_rng(policy_seed)
    obs, infos = env.reset(seed=seed)
    steps = [(obs, None, None, infos)]
    while True:
        actions = {p: int(rng.choice(infos[p]["legal_actions"])) for p in obs}
        obs, rewards, terminateds, truncateds, infos = env.step(actions)
        steps.append((obs, rewards, terminateds, infos))
        assert truncateds == {0: False, 1: False, "__all__": False}
        if terminateds["__all__"]:
            return steps


def test_spaces_and_turns_of_a_sequential_game():
    env = OpenSpielEnv(pyspiel.load_game("tic_tac_toe"))
    assert env.possible_agents == [0, 1]
    assert env.observation_space == gym.spaces.Box(-np.inf, np.inf, (27,), np.float32)
    assert env.action_space == gym.spaces.Discrete(9)

    steps = _play(env, seed=0)
    first_obs, _, _, first_infos = steps[0]
    assert list(first_obs) == [0] and first_infos[0]["legal_actions"] == list(range(9))
    for k, (obs, rewards, terminateds, _) in enumerate(steps[1:-1], start=1):
        # Only the player to move observes; the players alternate.
        assert list(obs) == [k % 2]
        assert env.observation_space.contains(obs[k % 2])
        assert rewards == {0: 0.0, 1: 0.0} and terminateds["__all__"] is False
    obs, rewards, terminateds, _ = steps[-1]
    # The game is over: both players observe, both are done, rewards sum to the returns.
    assert sorted(obs) == [0, 1] and terminateds == {0: True, 1: True, "__all__": True}
    assert [rewards[0], rewards[1]] == env.state.returns()
    assert env.agents == [] and "x" in env.render()


def test_chance_nodes_follow_the_seed():
    env = OpenSpielEnv("kuhn_poker")  # a game string works as well as a Game
    assert env.observation_space.shape == (env.env.observation_tensor_size(),)

    def game(seed):
        steps = _play(env, seed=seed)
        return [o[p].tolist() for o, *_ in steps for p in sorted(o)], steps[-1][1]

    deals = [game(seed) for seed in range(6)]
    assert deals == [game(seed) for seed in range(6)]  # the same seeds deal the same cards
    assert len({str(d[0][0]) for d in deals}) > 1  # different seeds deal differently
    for _, rewards in deals:
        assert rewards[0] == -rewards[1] != 0.0  # zero-sum, someone wins


def test_illegal_actions_are_replaced_and_penalized():
    env = OpenSpielEnv("tic_tac_toe")
    env.reset(seed=0)
    env.step({0: 4})
    obs, rewards, _, _, infos = env.step({1: 4})  # the centre is taken
    assert rewards == {0: 0.0, 1: ILLEGAL_ACTION_PENALTY}
    assert infos[1]["illegal_action"] is True
    board = np.asarray(env.state.observation_tensor(0)).reshape(3, 3, 3)
    assert board[0].sum() == 7  # a random legal move was played instead: 2 cells taken
    assert list(obs) == [0] and 4 not in infos[0]["legal_actions"]
    _, rewards, *_ = env.step({0: 99})  # out of range: illegal too
    assert rewards[0] == ILLEGAL_ACTION_PENALTY
    with pytest.raises(ValueError, match="player 1 is to move"):
        env.step({0: 0})


def test_simultaneous_move_game_observes_every_player():
    env = OpenSpielEnv("goofspiel(num_cards=4)")
    steps = _play(env, seed=1)
    for obs, _, _, infos in steps:
        assert sorted(obs) == [0, 1] and sorted(infos) == [0, 1]
    total = {p: sum(s[1][p] for s in steps[1:]) for p in (0, 1)}
    assert [total[0], total[1]] == env.state.returns()


def test_games_it_cannot_play_are_refused():
    # An information-state-only game (no observation tensor), and a mean-field game.
    with pytest.raises(ValueError, match="'coordinated_mp' does not provide"):
        OpenSpielEnv("coordinated_mp")
    with pytest.raises(ValueError, match="sequential and simultaneous-move games"):
        OpenSpielEnv("mfg_crowd_modelling")


def test_ppo_trains_two_policies_on_tic_tac_toe():
    from corral.agents.ppo import PPOTrainer
    from corral.tune.registry import register_env

    register_env("open_spiel_tic_tac_toe", lambda cfg: OpenSpielEnv("tic_tac_toe"))
    trainer = PPOTrainer(
        env="open_spiel_tic_tac_toe",
        config={
            "seed": 0,
            "num_workers": 0,
            "rollout_fragment_length": 100,
            "train_batch_size": 200,
            "sgd_minibatch_size": 50,
            "num_sgd_iter": 2,
            "model": {"fcnet_hiddens": [32, 32]},
            "multiagent": {
                "policies": {"p0", "p1"},
                "policy_mapping_fn": lambda agent_id, episode, worker, **kw: f"p{agent_id}",
            },
        },
    )
    try:
        results = [trainer.train() for _ in range(3)]
        weights = trainer.get_weights()
        batch = trainer.workers.local_worker().sample()
    finally:
        trainer.stop()
    assert set(weights) == {"p0", "p1"}
    for pid in ("p0", "p1"):
        # Each player's last transition of a game gets its result, also the player who
        # did not make the final move: wins and losses both show up.
        b = batch.policy_batches[pid]
        final = b["rewards"][b["terminateds"]]
        assert np.any(final >= 0.9) and np.any(final <= -0.9), (pid, final)
    for result in results:
        assert set(result["info"]["learner"]) == {"p0", "p1"}
        p0 = np.asarray(result["hist_stats"]["policy_p0_reward"])
        p1 = np.asarray(result["hist_stats"]["policy_p1_reward"])
        # Each finished game (of the metrics window) records both players' returns.
        assert result["episodes_this_iter"] > 0 and len(p0) == len(p1) >= len(results)
        np.testing.assert_allclose(p0 + p1, result["hist_stats"]["episode_reward"], atol=1e-5)
        # Zero-sum wins and losses, less 0.1 per illegal move (at most 9 moves a game).
        assert np.all(p0 + p1 <= 1e-6) and np.all(p0 + p1 >= 9 * ILLEGAL_ACTION_PENALTY - 1e-6)
        assert np.any(np.abs(p0) >= 0.9)  # games are decided, and the results recorded
        assert 5 <= result["episode_len_mean"] <= 9
