"""`MultiAgentEnv`: several agents acting in one env, Gymnasium style."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import gymnasium as gym

from corral.env.base_env import BaseEnv, sub_environments
from corral.utils.deprecation import log_once

logger = logging.getLogger(__name__)

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

    def step(self, action_dict: dict) -> Any:  # type: ignore[override]  # dicts per agent
        """Steps the agents in `action_dict` (agent id -> action); returns `(obs,
        rewards, terminateds, truncateds, infos)` dicts keyed by agent id (a subclass's)."""
        raise NotImplementedError

    def render(self, mode: str | None = None) -> Any:
        """Renders the env (RLlib 1.13's default: nothing, returns None). Subclasses
        render as their `render_mode` (or RLlib 1.x's `mode`) says."""
        return None

    def get_observation_space(self, agent_id: Any) -> gym.Space:
        if self.observation_spaces is not None:
            return self.observation_spaces[agent_id]
        return self.observation_space

    def get_action_space(self, agent_id: Any) -> gym.Space:
        if self.action_spaces is not None:
            return self.action_spaces[agent_id]
        return self.action_space

    # -- RLlib 1.13's agent ids and per-agent space helpers ------------------

    def get_agent_ids(self) -> set[Any]:
        """The env's agent ids: RLlib 1.x's `_agent_ids` when the env sets it, else
        `possible_agents`, `agents` or the keys of `observation_spaces`."""
        ids = getattr(self, "_agent_ids", None)
        if ids is None:
            ids = self.possible_agents or self.agents or (self.observation_spaces or {})
        return set(ids)

    def _agent_space(self, kind: str, agent_id: Any) -> gym.Space | None:
        """Agent `agent_id`'s `kind` ("observation"/"action") space: from
        `<kind>_spaces`, from RLlib 1.13's "preferred format" (`observation_space` and
        `action_space` both `Dict`s keyed by the agent ids), else the shared
        `<kind>_space`; None where the env declares none."""
        per_agent = getattr(self, f"{kind}_spaces", None)
        if per_agent is not None:
            return per_agent.get(agent_id)
        preferred = getattr(self, "_spaces_in_preferred_format", None)
        if preferred is None:
            preferred = self._spaces_in_preferred_format = (
                self._check_if_space_maps_agent_id_to_sub_space()
            )
        space = getattr(self, f"{kind}_space", None)
        if preferred and space is not None:
            return space.spaces.get(agent_id)
        return space

    def _check_if_space_maps_agent_id_to_sub_space(self) -> bool:
        """Whether `observation_space` and `action_space` are both `Dict`s keyed by
        exactly the agent ids (RLlib 1.13's "preferred format")."""
        ids = self.get_agent_ids()
        return all(
            isinstance(getattr(self, name, None), gym.spaces.Dict)
            and set(getattr(self, name).spaces) == ids
            for name in ("observation_space", "action_space")
        )

    def _declares_spaces(self, kind: str, what: str) -> bool:
        if getattr(self, f"{kind}_spaces", None) is not None:
            return True
        if getattr(self, f"{kind}_space", None) is not None:
            return True
        if log_once(f"{kind}_space_{what}"):
            logger.warning("%s_space_%s(): the env declares no %s space.", kind, what, kind)
        return False

    def _space_contains(self, kind: str, x: Any) -> bool:
        if not self._declares_spaces(kind, "contains"):
            return True  # (RLlib 1.13's answer when it cannot check)
        if not isinstance(x, dict):
            return False
        for agent, value in x.items():
            space = self._agent_space(kind, agent)
            if space is None or not space.contains(value):
                return False
        return True

    def _space_sample(self, kind: str, agent_ids: list | None) -> dict[Any, Any]:
        if not self._declares_spaces(kind, "sample"):
            return {}
        ids = self.get_agent_ids() if agent_ids is None else agent_ids
        out = {}
        for agent in ids:
            space = self._agent_space(kind, agent) if agent != "__all__" else None
            if space is not None:
                out[agent] = space.sample()
        return out

    def observation_space_contains(self, x: dict) -> bool:
        """Whether each agent's observation in `x` (agent id -> obs) lies in its space
        (True, unchecked, when the env declares no observation space)."""
        return self._space_contains("observation", x)

    def action_space_contains(self, x: dict) -> bool:
        """Whether each agent's action in `x` (agent id -> action) lies in its space
        (True, unchecked, when the env declares no action space)."""
        return self._space_contains("action", x)

    def observation_space_sample(self, agent_ids: list | None = None) -> dict:
        """A random observation per agent (all agents when `agent_ids` is None); {}
        when the env declares no observation space."""
        return self._space_sample("observation", agent_ids)

    def action_space_sample(self, agent_ids: list | None = None) -> dict:
        """A random action per agent (all agents when `agent_ids` is None); {} when the
        env declares no action space."""
        return self._space_sample("action", agent_ids)

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

        return convert_to_base_env(
            self,
            make_env,
            num_envs,
            remote_envs=remote_envs,
            remote_env_batch_wait_ms=remote_env_batch_wait_ms,
        )


def is_multi_agent_env(env: Any) -> bool:
    """Whether `env` is a `MultiAgentEnv`, in this process or in a process of its own
    (`remote_worker_envs`: a `RemoteSubEnv` handle that stands for one)."""
    return isinstance(env, MultiAgentEnv) or getattr(env, "is_multi_agent", False) is True


class MultiAgentEnvWrapper(BaseEnv):
    """The n `MultiAgentEnv` sub-envs of one rollout worker, as a `BaseEnv`.

    Built from the sub-envs (`MultiAgentEnvWrapper(envs)`), or as RLlib 1.13 builds it:
    `MultiAgentEnvWrapper(make_env, existing_envs, num_envs)`, where `make_env(i)` makes
    sub-env `i` for each of the `num_envs` that `existing_envs` lacks (an old gym API env
    is converted, see `corral.env.gym_compat.ensure_gymnasium_env`).

    Raises:
        ValueError: there is no sub-env, or sub-envs are missing and there is no `make_env`.
    """

    multi_agent = True

    def __init__(
        self,
        make_env: Callable[[int], Any] | list[MultiAgentEnv] | None = None,
        existing_envs: list[MultiAgentEnv] | None = None,
        num_envs: int | None = None,
    ) -> None:
        if isinstance(make_env, list):  # corral's form: the sub-envs
            existing_envs = make_env + list(existing_envs or [])
            make_env = None
        envs = list(existing_envs or [])
        wanted = len(envs) if num_envs is None else num_envs
        if len(envs) < wanted:
            if make_env is None:
                raise ValueError(
                    f"MultiAgentEnvWrapper: num_envs={wanted} with {len(envs)} existing "
                    "sub-environments needs `make_env` to make the others."
                )
            from corral.env.gym_compat import ensure_gymnasium_env

            envs += [ensure_gymnasium_env(make_env(i)) for i in range(len(envs), wanted)]
        if not envs:
            raise ValueError("MultiAgentEnvWrapper needs at least one sub-environment.")
        self.make_env = make_env
        self.envs = envs
        self.num_envs = len(envs)

    def get_sub_environments(self, as_dict: bool = False) -> Any:
        return sub_environments(self.envs, as_dict)


def make_multi_agent(env_name_or_creator: str | Callable[[dict], gym.Env]) -> type:
    """A `MultiAgentEnv` class running `config["num_agents"]` copies of a single-agent env.

    Agent i acts in copy i; the episode ends when every copy has ended. The rest of the
    config goes to a creator (as RLlib 1.13 passed it on). `render()` renders the first
    copy (RLlib 1.13's), with Gymnasium's API: that copy renders as its `render_mode`
    says. For a Gymnasium id, the first copy is created with the config's
    `"render_mode"` (or, without one, the mode a `render_env` / `record_env` worker
    asks for); a creator gets `"render_mode"` in its config, like any other key.
    """

    class MultiEnv(MultiAgentEnv):
        def __init__(self, config: dict | None = None) -> None:
            # What a `render_env` / `record_env` worker asks its env for (see RolloutWorker).
            wanted = getattr(config, "_render_mode", None)
            config = dict(config or {})
            num = int(config.pop("num_agents", 1))
            if isinstance(env_name_or_creator, str):
                from corral.env.utils import _supported_render_mode

                mode = config.get("render_mode")
                if mode is None and wanted:
                    mode = _supported_render_mode(env_name_or_creator, wanted)
                # Only the first copy is rendered: it alone gets the mode.
                self.envs = [
                    gym.make(env_name_or_creator, **({"render_mode": mode} if i == 0 else {}))
                    for i in range(num)
                ]
            else:
                from corral.env.gym_compat import ensure_gymnasium_env

                # The creator may build an old-gym env (RLlib 1.x code): convert each copy.
                self.envs = [ensure_gymnasium_env(env_name_or_creator(config)) for _ in range(num)]
            self.possible_agents = list(range(num))
            self.agents = list(self.possible_agents)
            self.observation_space = self.envs[0].observation_space
            self.action_space = self.envs[0].action_space
            self.render_mode = getattr(self.envs[0], "render_mode", None)
            self.metadata = getattr(self.envs[0], "metadata", self.metadata)
            self._done: set[int] = set()

        def render(self, mode: str | None = None) -> Any:
            """The first copy's `render()` (RLlib 1.13's `render(mode)`; `mode`: None or
            that copy's `render_mode`, see `corral.env.utils.render_in_mode`)."""
            from corral.env.utils import render_in_mode

            return render_in_mode(self.envs[0], mode)

        @property
        def can_render(self) -> bool:
            """Whether `render()` draws something: whether the first copy does (what
            `render_env` asks, see `corral.env.remote_vector_env.can_render`)."""
            from corral.env.remote_vector_env import can_render

            return can_render(self.envs[0])

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
