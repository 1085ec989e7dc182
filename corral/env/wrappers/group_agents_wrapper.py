"""`GroupAgentsWrapper`: several agents of a `MultiAgentEnv` acting as one (RLlib 1.13).

A group is one agent of the wrapped env to the outside: its observation is the tuple of
its members' observations, its action a tuple of their actions (one per member, in the
group's order), its reward the sum of theirs, and it is done once every member is done.
What the members received one by one stays in the group's info: their rewards under
`GROUP_REWARDS` and their infos under `GROUP_INFO`. Agents in no group pass through.
QMIX trains on such groups (`MultiAgentEnv.with_agent_groups`).

The wrapper speaks the API of the env it wraps: Gymnasium's (`reset(seed=...) -> (obs,
infos)`, `step() -> (obs, rewards, terminateds, truncateds, infos)`) or, for an RLlib 1.x
env, the old one (`reset() -> obs`, `step() -> (obs, rewards, dones, infos)`), so that old
user code that groups its own env and returns the wrapper's results keeps working.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Any, cast

import gymnasium as gym

from corral.env.multi_agent_env import MultiAgentEnv

# The info key of the members' rewards (a list, in the group's order).
GROUP_REWARDS = "_group_rewards"
# The info key of the members' infos (a list, in the group's order).
GROUP_INFO = "_group_info"

ALL = "__all__"


class GroupAgentsWrapper(MultiAgentEnv):
    """Wraps a `MultiAgentEnv` so that each group of its agents acts as one agent.

    Args:
        env: the env whose agents are grouped.
        groups: group id -> the ids of its member agents (in the order of the group's
            tuples). Each agent is in at most one group.
        obs_space: the groups' observation space (e.g. a `Tuple` of the members'
            spaces); None: the wrapped env's.
        act_space: the groups' action space (e.g. a `Tuple` of the members' spaces);
            None: the wrapped env's.

    Raises:
        ValueError: a group without members, an agent in two groups, or a group id
            that is also an agent id of the env.
    """

    def __new__(cls, env: Any = None, *args: Any, **kwargs: Any) -> GroupAgentsWrapper:
        # An RLlib 1.x env (old API) gets the wrapper that speaks the old API.
        if cls is GroupAgentsWrapper and env is not None and _is_old_api(env):
            cls = OldAPIGroupAgentsWrapper
        return super().__new__(cls)

    def __init__(
        self,
        env: MultiAgentEnv,
        groups: Mapping[Hashable, Sequence[Hashable]],
        obs_space: gym.Space | None = None,
        act_space: gym.Space | None = None,
    ) -> None:
        self.env = env
        self.groups = {gid: list(members) for gid, members in dict(groups).items()}
        self.agent_id_to_group: dict[Any, Any] = {}
        for gid, members in self.groups.items():
            if not members:
                raise ValueError(f"Group {gid!r} has no member agents: {groups!r}.")
            for agent in members:
                if agent in self.agent_id_to_group:
                    raise ValueError(
                        f"Agent {agent!r} is in two groups, {self.agent_id_to_group[agent]!r} "
                        f"and {gid!r}; each agent may be in one group only."
                    )
                self.agent_id_to_group[agent] = gid
        inner_agents = list(getattr(env, "possible_agents", None) or ())
        if not inner_agents:
            inner_agents = sorted(getattr(env, "_agent_ids", None) or (), key=str)
        clash = [gid for gid in self.groups if gid in inner_agents and gid not in self.groups[gid]]
        if clash:
            raise ValueError(
                f"Group ids {clash!r} are also agent ids of the wrapped env; name the groups "
                "differently."
            )
        # RLlib 1.13 inherits the wrapped env's flag.
        if hasattr(env, "_skip_env_checking"):
            self._skip_env_checking = env._skip_env_checking
        self.observation_space = cast(
            gym.Space, obs_space if obs_space is not None else env.observation_space
        )
        self.action_space = cast(
            gym.Space, act_space if act_space is not None else env.action_space
        )
        self._obs_space_given = obs_space is not None
        self._act_space_given = act_space is not None
        self.possible_agents = [
            *self.groups,
            *(a for a in inner_agents if a not in self.agent_id_to_group),
        ]
        self.agents = list(self.possible_agents)
        self._agent_ids = set(self.possible_agents)
        self.metadata = getattr(env, "metadata", {}) or {}
        self.render_mode = getattr(env, "render_mode", None)

    # -- spaces --------------------------------------------------------------

    def get_observation_space(self, agent_id: Any) -> gym.Space:
        """A group's space: `obs_space`, or the `Tuple` of its members' spaces."""
        if agent_id in self.groups:
            if self._obs_space_given:
                return self.observation_space
            return gym.spaces.Tuple(
                [self.env.get_observation_space(a) for a in self.groups[agent_id]]
            )
        return self.env.get_observation_space(agent_id)

    def get_action_space(self, agent_id: Any) -> gym.Space:
        """A group's space: `act_space`, or the `Tuple` of its members' spaces."""
        if agent_id in self.groups:
            if self._act_space_given:
                return self.action_space
            return gym.spaces.Tuple([self.env.get_action_space(a) for a in self.groups[agent_id]])
        return self.env.get_action_space(agent_id)

    # -- the env API -----------------------------------------------------------

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        obs, infos = self.env.reset(seed=seed, options=options)
        return self._group_obs(obs), self._group_infos(infos or {}, {})

    def step(self, action_dict: dict):
        out: Any = self.env.step(self._ungroup_items(action_dict))
        obs, rewards, terminateds, truncateds, infos = out
        grouped_terminateds, grouped_truncateds = self._group_flags(terminateds, truncateds)
        summed, member_rewards = self._group_rewards(rewards)
        return (
            self._group_obs(obs),
            summed,
            grouped_terminateds,
            grouped_truncateds,
            self._group_infos(infos or {}, member_rewards),
        )

    def seed(self, seed: int | None = None) -> Any:
        """The wrapped env's `seed` (RLlib 1.x's seeding), where it has one."""
        seed_fn = getattr(self.env, "seed", None)
        return seed_fn(seed) if callable(seed_fn) else None

    def render(self, *args: Any, **kwargs: Any) -> Any:
        return self.env.render(*args, **kwargs)

    def close(self) -> None:
        close = getattr(self.env, "close", None)
        if callable(close):
            close()

    # -- grouping --------------------------------------------------------------

    def _ungroup_items(self, items: dict) -> dict:
        """A group's tuple of actions -> one action per member."""
        out = {}
        for agent, value in items.items():
            members = self.groups.get(agent)
            if members is None:
                out[agent] = value
                continue
            values = list(value)
            if len(values) != len(members):
                raise ValueError(
                    f"The action of group {agent!r} has {len(values)} entries, expected one "
                    f"per member {members!r}: {value!r}."
                )
            out.update(zip(members, values))
        return out

    def _group_items(self, items: dict, aggregate: Callable[[list], Any], what: str) -> dict:
        """Members' entries -> one entry per group (`aggregate` of the members' values,
        in the group's order); other agents' entries as they are.

        Raises:
            ValueError: some members of a group have an entry and others not.
        """
        out = {}
        for agent, item in items.items():
            gid = self.agent_id_to_group.get(agent)
            if gid is None:
                out[agent] = item
                continue
            if gid in out:
                continue
            members = self.groups[gid]
            missing = [a for a in members if a not in items]
            if missing:
                present = [a for a in members if a in items]
                raise ValueError(
                    f"The env's {what} hold group {gid!r}'s members {present!r} but not "
                    f"{missing!r}: a group's members must all be in it (got {items!r})."
                )
            out[gid] = aggregate([items[a] for a in members])
        return out

    def _group_obs(self, obs: dict) -> dict:
        return self._group_items(obs, tuple, "observations")

    def _group_rewards(self, rewards: dict) -> tuple[dict, dict]:
        """(rewards with each group's the sum of its members', the members' rewards)."""
        members = self._group_items(rewards, list, "rewards")
        summed = {
            agent: float(sum(r)) if agent in self.groups else r for agent, r in members.items()
        }
        return summed, {gid: r for gid, r in members.items() if gid in self.groups}

    def _group_flags(self, terminateds: dict, truncateds: dict) -> tuple[dict, dict]:
        """A group is done once all its members are: terminated if all of them
        terminated, else truncated. A member without a flag is not done."""
        terminated_out: dict = {}
        truncated_out: dict = {}
        for agent in set(terminateds) | set(truncateds):
            gid = self.agent_id_to_group.get(agent)
            if gid is None:
                if agent in terminateds:
                    terminated_out[agent] = terminateds[agent]
                if agent in truncateds:
                    truncated_out[agent] = truncateds[agent]
                continue
            if gid in terminated_out:
                continue
            term = [bool(terminateds.get(a, False)) for a in self.groups[gid]]
            trunc = [bool(truncateds.get(a, False)) for a in self.groups[gid]]
            done = all(t or u for t, u in zip(term, trunc))
            terminated_out[gid] = done and all(term)
            truncated_out[gid] = done and not all(term)
        return terminated_out, truncated_out

    def _group_infos(self, infos: dict, member_rewards: dict) -> dict:
        """Each group's info: `{GROUP_INFO: [member infos], GROUP_REWARDS: [member
        rewards]}` (a member without an info counts as `{}`)."""
        out: dict = {a: i for a, i in infos.items() if a not in self.agent_id_to_group}
        present = {self.agent_id_to_group[a] for a in infos if a in self.agent_id_to_group}
        for gid in present:
            out[gid] = {GROUP_INFO: [infos.get(a) or {} for a in self.groups[gid]]}
        for gid, rewards in member_rewards.items():
            out.setdefault(gid, {})[GROUP_REWARDS] = rewards
        return out


class OldAPIGroupAgentsWrapper(GroupAgentsWrapper):
    """`GroupAgentsWrapper` of an env with RLlib 1.x's API: `reset() -> obs` and
    `step() -> (obs, rewards, dones, infos)`, a group done when all its members are.
    `GroupAgentsWrapper(env, ...)` builds one for such an env."""

    def reset(self):  # type: ignore[override]
        return self._group_obs(self.env.reset())

    def step(self, action_dict: dict):  # type: ignore[override]
        out: Any = self.env.step(self._ungroup_items(action_dict))
        obs, rewards, dones, infos = out
        grouped_dones, _ = self._group_flags(dones, {})
        summed, member_rewards = self._group_rewards(rewards)
        return (
            self._group_obs(obs),
            summed,
            grouped_dones,
            self._group_infos(infos or {}, member_rewards),
        )


def _is_old_api(env: Any) -> bool:
    from corral.env.gym_compat import is_old_api_env

    return is_old_api_env(env)


__all__ = ["GROUP_INFO", "GROUP_REWARDS", "GroupAgentsWrapper"]
