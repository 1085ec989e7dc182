"""`OpenSpielEnv`: an OpenSpiel game as a corral `MultiAgentEnv` (RLlib's `OpenSpielEnv`).

Needs the `open-spiel` extra (`pip install corral[open-spiel]`). Agents are the game's
players `0 .. num_players - 1`; all share one observation space (the game's flat
`observation_tensor`, float32) and one action space (`Discrete(num_distinct_actions)`).

- Turn-based (sequential) games: each step's observation dict holds only the player to
  move; at a simultaneous-move node every player observes and all their actions are
  applied at once. Chance nodes (dealing cards, rolling dice) are sampled by the env with
  the generator that `reset(seed=...)` seeds.
- Rewards go to all players every step: each player's change in the game's returns, so a
  player's rewards sum to its final return (corral's sampler adds the rewards a player
  gets between its turns to its last action).
- An illegal action is replaced by a random legal one and costs the player
  `ILLEGAL_ACTION_PENALTY` (RLlib's rule, -0.1); its info says `"illegal_action": True`.
  Each observed player's info holds its `"legal_actions"` (ids), for masking models.
- When the game ends every player observes its final observation, all `terminateds`
  (and `"__all__"`) are True; OpenSpiel games are not truncated.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from corral.env.multi_agent_env import MultiAgentEnv
from corral.utils.keyword_aliases import keyword_aliases

INSTALL_HINT = "pip install corral[open-spiel]"
# What a player's reward loses when its action was illegal (RLlib's penalty).
ILLEGAL_ACTION_PENALTY = -0.1
ALL = "__all__"


def import_pyspiel() -> Any:
    """The `pyspiel` module, or an ImportError saying how to install it."""
    try:
        import pyspiel
    except ImportError as e:
        raise ImportError(f"OpenSpielEnv needs the open_spiel package ({INSTALL_HINT}).") from e
    return pyspiel


class OpenSpielEnv(MultiAgentEnv):
    """An OpenSpiel game, e.g. `OpenSpielEnv(pyspiel.load_game("tic_tac_toe"))`.

    Args:
        env: a `pyspiel.Game`, or a game string for `pyspiel.load_game` (e.g.
            `"kuhn_poker"`, `"connect_four"`, `"goofspiel(num_cards=4)"`).

    Raises:
        ImportError: open_spiel is not installed.
        ValueError: the game has no observation tensor, or is neither sequential nor
            simultaneous-move (e.g. a mean-field game).
    """

    metadata = {"render_modes": ["ansi"]}

    def __init__(self, env: Any) -> None:
        pyspiel = import_pyspiel()
        super().__init__()
        game = pyspiel.load_game(env) if isinstance(env, str) else env
        self.env = game
        self.type = game.get_type()
        if not self.type.provides_observation_tensor:
            raise ValueError(
                f"OpenSpielEnv observes the game's observation tensor, which "
                f"{self.type.short_name!r} does not provide."
            )
        dynamics = self.type.dynamics
        if dynamics not in (
            pyspiel.GameType.Dynamics.SEQUENTIAL,
            pyspiel.GameType.Dynamics.SIMULTANEOUS,
        ):
            raise ValueError(
                f"OpenSpielEnv plays sequential and simultaneous-move games; "
                f"{self.type.short_name!r} has dynamics {dynamics}."
            )
        # Agent ids are the players: ints from 0.
        self.num_agents = game.num_players()
        self.possible_agents = list(range(self.num_agents))
        self.agents = list(self.possible_agents)
        self.observation_space = gym.spaces.Box(
            -np.inf, np.inf, (game.observation_tensor_size(),), dtype=np.float32
        )
        self.action_space = gym.spaces.Discrete(game.num_distinct_actions())
        self.render_mode = "ansi"
        # The current game state (None before the first reset).
        self.state: Any = None
        self._returns = np.zeros(self.num_agents)
        self._rng = np.random.default_rng()

    def reset(  # type: ignore[override]  # multi-agent: dicts keyed by player
        self, *, seed: int | None = None, options: dict | None = None
    ) -> tuple[dict[int, np.ndarray], dict[int, dict]]:
        super().reset(seed=seed)
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self.state = self.env.new_initial_state()
        self._resolve_chance()
        self._returns = np.asarray(self.state.returns(), dtype=np.float64)
        self.agents = list(self.possible_agents)
        return self._observe()

    @keyword_aliases(action="action_dict")
    def step(  # type: ignore[override]  # multi-agent: dicts keyed by player
        self, action_dict: dict
    ) -> tuple[dict[int, np.ndarray], dict[int, float], dict, dict, dict[int, dict]]:
        if self.state is None:
            raise RuntimeError("OpenSpielEnv.step() before reset(): call reset() first.")
        if self.state.is_terminal():
            raise RuntimeError("OpenSpielEnv.step() after the game ended: call reset().")
        illegal: set[int] = set()
        if self.state.is_simultaneous_node():
            actions = [self._legal(p, action_dict, illegal) for p in self.possible_agents]
            self.state.apply_actions(actions)
        else:
            player = self.state.current_player()
            self.state.apply_action(self._legal(player, action_dict, illegal))
        self._resolve_chance()

        returns = np.asarray(self.state.returns(), dtype=np.float64)
        rewards = {p: float(returns[p] - self._returns[p]) for p in self.possible_agents}
        self._returns = returns
        for p in illegal:
            rewards[p] += ILLEGAL_ACTION_PENALTY

        obs, infos = self._observe()
        for p in illegal:
            infos.setdefault(p, {})["illegal_action"] = True
        over = bool(self.state.is_terminal())
        if over:
            self.agents = []
        terminateds: dict[Any, bool] = {p: over for p in self.possible_agents}
        terminateds[ALL] = over
        truncateds: dict[Any, bool] = {p: False for p in self.possible_agents}
        truncateds[ALL] = False
        return obs, rewards, terminateds, truncateds, infos

    def _legal(self, player: int, action_dict: dict, illegal: set[int]) -> int:
        """`player`'s action, or a random legal one (noted in `illegal`) if it is illegal."""
        if player not in action_dict:
            raise ValueError(
                f"OpenSpielEnv: player {player} is to move, but the action dict only has "
                f"{sorted(map(str, action_dict))}."
            )
        legal = self.state.legal_actions(player)
        action = action_dict[player]
        try:
            action = int(np.asarray(action).item())
        except (TypeError, ValueError):
            action = None
        if action in legal:
            return action
        illegal.add(player)
        return int(self._rng.choice(legal))

    def _observe(self) -> tuple[dict[int, np.ndarray], dict[int, dict]]:
        """The players that act next (every player at a simultaneous-move node and once
        the game is over), with their observation tensors and legal actions."""
        terminal = self.state.is_terminal()
        if terminal or self.state.is_simultaneous_node():
            players = list(self.possible_agents)
        else:
            players = [self.state.current_player()]
        obs = {
            p: np.asarray(self.state.observation_tensor(p), dtype=np.float32).reshape(-1)
            for p in players
        }
        infos = {
            p: {"legal_actions": [] if terminal else list(self.state.legal_actions(p))}
            for p in players
        }
        return obs, infos

    def _resolve_chance(self) -> None:
        """Samples chance outcomes until a player is to move (or the game is over)."""
        while self.state.is_chance_node():
            outcomes, probs = zip(*self.state.chance_outcomes(), strict=True)
            p = np.asarray(probs, dtype=np.float64)
            self.state.apply_action(int(outcomes[self._rng.choice(len(outcomes), p=p / p.sum())]))

    def render(self, mode: str | None = None) -> str | None:
        """The game state as OpenSpiel prints it; with RLlib 1.13's `mode="human"`,
        printed instead (and None returned).

        Raises:
            RuntimeError: before the first `reset()`.
            ValueError: a `mode` other than None, "ansi" (the text) or "human".
        """
        if mode not in (None, "ansi", "human"):
            raise ValueError(
                f"OpenSpielEnv renders its state as text: mode None, 'ansi' or 'human', "
                f"not {mode!r}."
            )
        if self.state is None:
            raise RuntimeError("OpenSpielEnv.render() before reset(): call reset() first.")
        if mode == "human":
            print(self.state)
            return None
        return str(self.state)
