"""`PettingZooEnv`: PettingZoo environments as corral `MultiAgentEnv`s.

Needs the `pettingzoo` extra. Both PettingZoo APIs are accepted:

- Parallel envs (every live agent acts each step) map one to one.
- AEC envs (agents act in turns) become a `MultiAgentEnv` whose observation
  dict holds only the agent whose turn it is. Each agent receives, with its
  next observation, the rewards it collected since it last acted
  (PettingZoo's cumulative reward), so nothing is lost between turns. Agents
  that are done get their final observation and reward, then leave.
"""

from __future__ import annotations

from typing import Any

from corral.env.multi_agent_env import MultiAgentEnv
from corral.env.utils import render_in_mode
from corral.utils.keyword_aliases import keyword_aliases

ALL = "__all__"


class PettingZooEnv(MultiAgentEnv):
    """Wraps a PettingZoo `AECEnv` or `ParallelEnv` (e.g. `tictactoe_v3.env()`).

    Per-agent spaces come from the PettingZoo env; when all agents share one
    space it is also available as `observation_space` / `action_space`.
    """

    def __init__(self, env: Any) -> None:
        from pettingzoo.utils.env import AECEnv

        super().__init__()
        self.env = env
        self.is_aec = isinstance(env, AECEnv)
        self.possible_agents = list(env.possible_agents)
        self.agents = list(self.possible_agents)
        self.observation_spaces = {a: env.observation_space(a) for a in self.possible_agents}
        self.action_spaces = {a: env.action_space(a) for a in self.possible_agents}
        obs_spaces = list(self.observation_spaces.values())
        act_spaces = list(self.action_spaces.values())
        if all(s == obs_spaces[0] for s in obs_spaces):
            self.observation_space = obs_spaces[0]
        if all(s == act_spaces[0] for s in act_spaces):
            self.action_space = act_spaces[0]

    def seed(self, seed: int | None = None) -> None:
        """RLlib 1.13's `seed()`: PettingZoo envs take their seed in `reset(seed=...)`
        now, so the next `reset()` without a seed of its own uses this one."""
        self._next_seed = seed

    @property
    def get_sub_environments(self) -> Any:
        """The unwrapped PettingZoo env (RLlib 1.13's, a property there too)."""
        return self.env.unwrapped

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        if seed is None:
            seed, self._next_seed = getattr(self, "_next_seed", None), None
        if not self.is_aec:
            obs, infos = self.env.reset(seed=seed, options=options)
            self.agents = list(self.env.agents)
            return obs, infos
        self.env.reset(seed=seed, options=options)
        self.agents = list(self.env.agents)
        agent = self.env.agent_selection
        return {agent: self.env.observe(agent)}, {agent: self.env.infos.get(agent, {})}

    @keyword_aliases(action="action_dict")
    def step(self, action_dict: dict):
        if not self.is_aec:
            return self._step_parallel(action_dict)
        agent = self.env.agent_selection
        if agent not in action_dict:
            raise ValueError(
                f"It is agent {agent!r}'s turn in this AEC env, but the action dict only "
                f"has {sorted(map(str, action_dict))}."
            )
        self.env.step(action_dict[agent])
        return self._collect_turns()

    def _step_parallel(self, action_dict: dict):
        obs, rewards, terminateds, truncateds, infos = self.env.step(action_dict)
        self.agents = list(self.env.agents)
        terminateds, truncateds = dict(terminateds), dict(truncateds)
        over = not self.agents
        terminateds[ALL] = over and all(terminateds.values())
        truncateds[ALL] = over and not terminateds[ALL]
        return obs, rewards, terminateds, truncateds, infos

    def _collect_turns(self):
        """Reports finished agents (stepping them out) until a live agent's turn comes."""
        obs, rewards, terminateds, truncateds, infos = {}, {}, {}, {}, {}
        while self.env.agents:
            agent = self.env.agent_selection
            o, r, terminated, truncated, info = self.env.last()
            obs[agent], infos[agent] = o, info
            rewards[agent] = rewards.get(agent, 0.0) + r
            terminateds[agent], truncateds[agent] = terminated, truncated
            if not (terminated or truncated):
                break
            self.env.step(None)
        self.agents = list(self.env.agents)
        over = not self.agents
        terminateds[ALL] = over and any(terminateds.values())
        truncateds[ALL] = over and not terminateds[ALL]
        return obs, rewards, terminateds, truncateds, infos

    def render(self, mode: str | None = None) -> Any:
        """The PettingZoo env's `render()` (`mode`: RLlib 1.13's argument, None or the
        env's `render_mode`, which PettingZoo takes when the env is created)."""
        return render_in_mode(self.env, mode)

    def close(self) -> None:
        self.env.close()


class ParallelPettingZooEnv(PettingZooEnv):
    """RLlib 1.13's wrapper of a PettingZoo `ParallelEnv` (e.g.
    `pistonball_v6.parallel_env()`): `PettingZooEnv`, which takes both APIs, for the
    parallel one only.

    Raises:
        TypeError: `env` is an AEC env (wrap it in `PettingZooEnv`).
    """

    def __init__(self, env: Any) -> None:
        super().__init__(env)
        if self.is_aec:
            raise TypeError(
                f"ParallelPettingZooEnv takes a PettingZoo ParallelEnv, got the AEC env {env!r}; "
                "wrap it in PettingZooEnv (or pass its parallel_env())."
            )
