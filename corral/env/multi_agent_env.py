"""`MultiAgentEnv`: several agents acting in one env, Gymnasium style."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import gymnasium as gym

from corral.env.base_env import BaseEnv

# The key of the global state in an agent's observation dict (RLlib's `ENV_STATE`, used
# by centralized-critic and QMIX-style envs).
ENV_STATE = "state"


class MultiAgentEnv(gym.Env):
    """An env whose observations, rewards, flags and infos are dicts keyed by agent id.

    `reset(*, seed=None, options=None) -> (obs_dict, info_dict)`;
    `step(action_dict) -> (obs, rewards, terminateds, truncateds, infos)` where
    `terminateds` and `truncateds` also hold `"__all__"` (the whole episode is
    over). Agents may join and leave mid-episode: only agents present in an
    observation dict act next. Spaces are per agent (`observation_spaces`,
    `action_spaces`) or shared (`observation_space`, `action_space`).
    """

    possible_agents: list[Any] = []
    agents: list[Any] = []
    observation_spaces: dict[Any, gym.Space] | None = None
    action_spaces: dict[Any, gym.Space] | None = None

    def get_observation_space(self, agent_id: Any) -> gym.Space:
        if self.observation_spaces is not None:
            return self.observation_spaces[agent_id]
        return self.observation_space

    def get_action_space(self, agent_id: Any) -> gym.Space:
        if self.action_spaces is not None:
            return self.action_spaces[agent_id]
        return self.action_space

    def with_agent_groups(
        self,
        groups: dict[Any, list[Any]],
        obs_space: gym.Space | None = None,
        act_space: gym.Space | None = None,
    ) -> MultiAgentEnv:
        """This env with each group of agents acting as one agent (for QMIX).

        A group observes the tuple of its members' observations, acts with a tuple of
        their actions, gets the sum of their rewards (each member's in the info under
        `_group_rewards`) and is done when all its members are (see
        `corral.env.wrappers.group_agents_wrapper.GroupAgentsWrapper`).

        Args:
            groups: group id -> its member agent ids, e.g. `{"group_1": [0, 1]}`.
            obs_space: the groups' observation space, e.g. a `Tuple` of the members'.
            act_space: the groups' action space, e.g. a `Tuple` of the members'.
        """
        from corral.env.wrappers.group_agents_wrapper import GroupAgentsWrapper

        return GroupAgentsWrapper(self, groups, obs_space, act_space)

    def to_base_env(
        self,
        make_env: Callable[[int], Any] | None = None,
        num_envs: int = 1,
        remote_envs: bool = False,
        remote_env_batch_wait_ms: int = 0,
        restart_failed_sub_environments: bool = False,
    ) -> BaseEnv:
        """This env and `make_env(i)` for the other `num_envs - 1` sub-envs, as a
        `BaseEnv` (see `corral.env.base_env.convert_to_base_env`)."""
        from corral.env.base_env import convert_to_base_env

        return convert_to_base_env(self, make_env, num_envs, remote_envs=remote_envs)


class MultiAgentEnvWrapper(BaseEnv):
    """The n `MultiAgentEnv` sub-envs of one rollout worker, as a `BaseEnv`."""

    multi_agent = True

    def __init__(self, envs: list[MultiAgentEnv]) -> None:
        if not envs:
            raise ValueError("MultiAgentEnvWrapper needs at least one sub-environment.")
        self.envs = list(envs)
        self.num_envs = len(self.envs)

    def get_sub_environments(self) -> list[MultiAgentEnv]:
        return self.envs


def make_multi_agent(env_name_or_creator: str | Callable[[dict], gym.Env]) -> type:
    """A `MultiAgentEnv` class running `config["num_agents"]` copies of a single-agent env.

    Agent i acts in copy i; the episode ends when every copy has ended.
    """

    class MultiEnv(MultiAgentEnv):
        def __init__(self, config: dict | None = None) -> None:
            config = dict(config or {})
            num = int(config.pop("num_agents", 1))
            if isinstance(env_name_or_creator, str):
                self.envs = [gym.make(env_name_or_creator) for _ in range(num)]
            else:
                from corral.env.gym_compat import ensure_gymnasium_env

                # The creator may build an old-gym env (RLlib 1.x code): convert each copy.
                self.envs = [ensure_gymnasium_env(env_name_or_creator(config)) for _ in range(num)]
            self.possible_agents = list(range(num))
            self.agents = list(self.possible_agents)
            self.observation_space = self.envs[0].observation_space
            self.action_space = self.envs[0].action_space
            self._done: set[int] = set()

        def reset(self, *, seed: int | None = None, options: dict | None = None):
            self._done = set()
            self.agents = list(self.possible_agents)
            obs, infos = {}, {}
            for i, env in enumerate(self.envs):
                obs[i], infos[i] = env.reset(seed=None if seed is None else seed + i)
            return obs, infos

        def step(self, action_dict: dict):
            obs, rew, term, trunc, info = {}, {}, {}, {}, {}
            for i, action in action_dict.items():
                obs[i], rew[i], term[i], trunc[i], info[i] = self.envs[i].step(action)
                if term[i] or trunc[i]:
                    self._done.add(i)
            self.agents = [a for a in self.possible_agents if a not in self._done]
            term["__all__"] = len(self._done) == len(self.envs)
            trunc["__all__"] = False
            return obs, rew, term, trunc, info

    return MultiEnv
