"""`BaseEnv`: the batch of sub-envs a rollout worker samples from.

corral's samplers step a worker's sub-envs through `get_sub_environments()` and
`step_all(actions)`. RLlib 1.x's asynchronous interface (`poll`, `send_actions`,
`try_reset`, with values keyed by env index, then agent id) is served on top of those,
for code that drives a `BaseEnv` itself; `convert_to_base_env` makes one of any env.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from corral.utils.keyword_aliases import keyword_aliases

# The agent id of a single-agent env's agent in RLlib's per-agent dicts.
DUMMY_AGENT_ID = "agent0"

# RLlib 1.x's marker of an asynchronous reset (`try_reset` returning it means the new
# observation arrives with the next `poll`). corral's resets always return at once.
ASYNC_RESET_RETURN = "async_reset_return"


def sub_environments(envs: list[Any], as_dict: bool = False) -> list[Any] | dict[int, Any]:
    """`envs`, or with `as_dict` `{env_id: sub_env}` (what RLlib 1.13's
    `get_sub_environments(as_dict=True)` returns; env ids are the sub-envs' indexes)."""
    return dict(enumerate(envs)) if as_dict else envs


def with_dummy_agent_id(
    env_id_to_values: Mapping[Any, Any], dummy_id: Any = DUMMY_AGENT_ID
) -> dict[Any, dict[Any, Any]]:
    """`{env_id: value}` as `{env_id: {dummy_id: value}}` (a single agent's dicts)."""
    return {env_id: {dummy_id: value} for env_id, value in env_id_to_values.items()}


class BaseEnv:
    """A batch of sub-environments stepped together by one rollout worker.

    Callbacks receive the worker's `BaseEnv` as `base_env`; the underlying
    Gymnasium envs are reachable with `get_sub_environments()`.
    """

    num_envs: int = 1
    # Read by the sampler: whether each sub-env's episode can be replayed alone from its
    # seed and actions (exact resumes of unfinished episodes from a checkpoint).
    sub_envs_replayable: bool = True
    # Whether the sub-envs are multi-agent (their values are already per-agent dicts).
    multi_agent: bool = False

    def get_sub_environments(self, as_dict: bool = False) -> Any:
        """The individual sub-environments (e.g. `gymnasium.Env` objects) in a list; with
        `as_dict`, `{env_id: sub_env}` (see `sub_environments`). None by default (a
        `BaseEnv` of one's own may hold no gym envs), as in RLlib 1.13. (Typed `Any`: the
        type depends on `as_dict`.)"""
        return {} if as_dict else []

    def step_all(self, actions: list[Any]) -> list[tuple]:
        """Steps each sub-env with its action; returns their 5-tuples in order."""
        return [env.step(a) for env, a in zip(self.get_sub_environments(), actions)]

    def try_render(self, env_id: int | None = None) -> Any:
        """Renders one sub-env if it supports rendering (else returns None)."""
        envs = self.get_sub_environments()
        if not envs:
            return None
        env = envs[env_id or 0]
        return env.render() if hasattr(env, "render") else None

    def stop(self) -> None:
        """Closes every sub-environment."""
        for env in self.get_sub_environments():
            close = getattr(env, "close", None)
            if close is not None:
                close()

    def worker_env(self) -> Any:
        """What RLlib's `RolloutWorker.env` is for this `BaseEnv`: the first sub-env, or
        the env the creator returned when that steps its sub-envs itself."""
        return self.get_sub_environments()[0]

    def to_base_env(self, *args: Any, **kwargs: Any) -> BaseEnv:
        """Itself (RLlib's `to_base_env` of an env that already is one)."""
        return self

    def get_agent_ids(self) -> set[Any]:
        """The agent ids (a single-agent env's one agent is `"agent0"`)."""
        if not self.multi_agent:
            return {DUMMY_AGENT_ID}
        first = self.get_sub_environments()[0]
        if hasattr(first, "get_agent_ids"):
            return set(first.get_agent_ids())
        agents = getattr(first, "possible_agents", None) or getattr(first, "agents", None)
        return set(agents or ())

    def get_unwrapped(self) -> list[Any]:
        """RLlib's older name of `get_sub_environments`."""
        return self.get_sub_environments()

    # -- RLlib 1.13's spaces of the sub-envs -----------------------------------

    @property
    def observation_space(self) -> Any:
        """One sub-env's observation space (as set by a subclass, else the first
        sub-env's; for multi-agent sub-envs with per-agent `observation_spaces`, a
        `Dict` of them)."""
        return self._sub_env_space("observation")

    @observation_space.setter
    def observation_space(self, space: Any) -> None:
        self.__dict__["_base_env_observation_space"] = space

    @property
    def action_space(self) -> Any:
        """One sub-env's action space (see `observation_space`)."""
        return self._sub_env_space("action")

    @action_space.setter
    def action_space(self, space: Any) -> None:
        self.__dict__["_base_env_action_space"] = space

    def _sub_env_space(self, kind: str) -> Any:
        space = self.__dict__.get(f"_base_env_{kind}_space")
        if space is not None:
            return space
        first = self.get_sub_environments()[0]
        per_agent = getattr(first, f"{kind}_spaces", None) if self.multi_agent else None
        if per_agent is not None:
            import gymnasium as gym

            return gym.spaces.Dict(dict(per_agent))
        return getattr(first, f"{kind}_space")

    def observation_space_contains(self, x: Mapping[Any, Mapping[Any, Any]]) -> bool:
        """Whether every observation of `x` (`{env_id: {agent_id: obs}}`) lies in its
        agent's observation space."""
        return self._space_contains("observation", x)

    def action_space_contains(self, x: Mapping[Any, Mapping[Any, Any]]) -> bool:
        """Whether every action of `x` (`{env_id: {agent_id: action}}`) lies in its
        agent's action space."""
        return self._space_contains("action", x)

    def _space_contains(self, kind: str, x: Mapping[Any, Mapping[Any, Any]]) -> bool:
        if self.multi_agent:
            first = self.get_sub_environments()[0]
            check = getattr(first, f"{kind}_space_contains")
            return all(check(dict(per_agent)) for per_agent in x.values())
        space = self._sub_env_space(kind)
        return all(
            agent == DUMMY_AGENT_ID and space.contains(value)
            for per_agent in x.values()
            for agent, value in per_agent.items()
        )

    @keyword_aliases(agent_ids="agent_id")
    def observation_space_sample(self, agent_id: list | None = None) -> dict[Any, dict]:
        """A random observation as `{0: {agent_id: obs}}` (for a multi-agent env, of
        the agents in `agent_id`, all when None; `agent_ids` is RLlib 1.13's
        `MultiAgentEnvWrapper`'s name of it)."""
        return self._space_sample("observation", agent_id)

    @keyword_aliases(agent_ids="agent_id")
    def action_space_sample(self, agent_id: list | None = None) -> dict[Any, dict]:
        """A random action as `{0: {agent_id: action}}` (for a multi-agent env, of
        the agents in `agent_id`, all when None; also named `agent_ids`): what
        `send_actions` takes for env 0."""
        return self._space_sample("action", agent_id)

    def _space_sample(self, kind: str, agent_ids: list | None) -> dict[Any, dict]:
        if self.multi_agent:
            first = self.get_sub_environments()[0]
            return {0: getattr(first, f"{kind}_space_sample")(agent_ids)}
        return {0: {DUMMY_AGENT_ID: self._sub_env_space(kind).sample()}}

    def last(self) -> tuple[dict, dict, dict, dict, dict]:
        """The last `poll()`'s values again (`obs, rewards, dones, infos,
        off_policy_actions`), keyed by env index, then agent; five empty dicts before
        the first `poll()` (RLlib 1.13's answer where an env keeps none)."""
        last = getattr(self, "_last_polled", None)
        return last if last is not None else ({}, {}, {}, {}, {})

    # -- RLlib's asynchronous interface --------------------------------------

    def poll(self) -> tuple[dict, dict, dict, dict, dict]:
        """What the sub-envs returned since the last call, keyed by env index, then agent.

        The first call resets every sub-env. Returns `(obs, rewards, dones, infos,
        off_policy_actions)`; `dones[env_id]["__all__"]` says the episode ended (then
        `try_reset(env_id)` starts the next), and `off_policy_actions` is always empty.
        """
        pending = getattr(self, "_polled", None)
        if pending is None:
            n = self.num_envs
            # No reward yet: an empty dict per multi-agent sub-env (RLlib 1.13's).
            no_reward: list[Any] = [{} for _ in range(n)] if self.multi_agent else [None] * n
            not_done: Any = {} if self.multi_agent else False
            pending = (self._poll_reset_all(), no_reward, [not_done] * n, [{}] * n)
        obs, rewards, dones, infos = pending
        self._polled: tuple[list, list, list, list] | None = ([], [], [], [])
        polled: tuple[dict, dict, dict, dict, dict]
        if self.multi_agent:
            done_dicts = [{**d, "__all__": bool(d.get("__all__"))} for d in dones]
            # Ended sub-envs take no actions until `try_reset` (RLlib 1.13's rule); one
            # not stepped since it ended polls empty dicts and stays ended.
            self._ended = getattr(self, "_ended", set()) | {
                i for i, d in enumerate(done_dicts) if d["__all__"]
            }
            polled = (
                dict(enumerate(obs)),
                dict(enumerate(rewards)),
                dict(enumerate(done_dicts)),
                dict(enumerate(infos)),
                {},
            )
        else:
            polled = (
                with_dummy_agent_id(dict(enumerate(obs))),
                with_dummy_agent_id(dict(enumerate(rewards))),
                with_dummy_agent_id(dict(enumerate(dones)), "__all__"),
                with_dummy_agent_id(dict(enumerate(infos))),
                {},
            )
        self._last_polled = polled
        return polled

    def send_actions(self, action_dict: Mapping[int, Mapping[Any, Any]]) -> None:
        """Steps the sub-envs with `action_dict[env_id]` (per agent; a single agent's
        action under `"agent0"`); the results come with the next `poll()`.

        Single-agent sub-envs step together: each needs an action. Multi-agent sub-envs
        step only where `action_dict` has an entry, as in RLlib 1.13 (e.g. not one that
        ended and waits for `try_reset`); the others poll empty dicts next.

        Raises:
            ValueError: an action for a multi-agent sub-env whose episode ended (`poll`
                said `"__all__"`) and that was not `try_reset` since, or for no sub-env.
        """
        if getattr(self, "_polled", None) is None:
            raise RuntimeError("send_actions() before the first poll(): poll() resets the envs.")
        if self.multi_agent:
            unknown = [i for i in action_dict if i not in range(self.num_envs)]
            if unknown:
                raise ValueError(
                    f"send_actions: no sub-env {unknown[0]!r}; the env ids are 0 to "
                    f"{self.num_envs - 1}."
                )
            ended = sorted(set(action_dict) & getattr(self, "_ended", set()))
            if ended:
                raise ValueError(f"Env {ended[0]} is already done: call try_reset({ended[0]}).")
            if len(action_dict) < self.num_envs:
                self._polled = self._poll_step_some(action_dict)
                return
            actions = [dict(action_dict[i]) for i in range(self.num_envs)]
        else:
            actions = [action_dict[i][DUMMY_AGENT_ID] for i in range(self.num_envs)]
        self._polled = self._poll_step(actions)

    def try_reset(self, env_id: int | None = None) -> dict | None:
        """Resets sub-env `env_id`; returns `{env_id: {agent_id: obs}}`."""
        index = env_id or 0
        obs = self._poll_reset_at(index)
        getattr(self, "_ended", set()).discard(index)
        return {index: obs if self.multi_agent else {DUMMY_AGENT_ID: obs}}

    # The sub-env calls behind `poll`; subclasses that step their sub-envs another way
    # override these.
    def _poll_reset_all(self) -> list[Any]:
        return [self._poll_reset_at(i) for i in range(self.num_envs)]

    def _poll_reset_at(self, index: int) -> Any:
        return self.get_sub_environments()[index].reset()[0]

    def _poll_step_some(
        self, action_dict: Mapping[int, Mapping[Any, Any]]
    ) -> tuple[list, list, list, list]:
        """`_poll_step` of the multi-agent sub-envs in `action_dict` alone, one after
        the other; the others' entries are empty dicts."""
        envs = self.get_sub_environments()
        n = self.num_envs
        obs: list[Any] = [{} for _ in range(n)]
        rewards: list[Any] = [{} for _ in range(n)]
        dones: list[Any] = [{} for _ in range(n)]
        infos: list[Any] = [{} for _ in range(n)]
        for i in sorted(action_dict):
            o, r, terminated, truncated, info = envs[i].step(dict(action_dict[i]))
            obs[i], rewards[i], infos[i] = o, r, info
            dones[i] = _agent_dones(terminated, truncated)
        return obs, rewards, dones, infos

    def _poll_step(self, actions: list[Any]) -> tuple[list, list, list, list]:
        obs: list[Any] = []
        rewards: list[Any] = []
        dones: list[Any] = []
        infos: list[Any] = []
        for o, r, terminated, truncated, info in self.step_all(actions):
            obs.append(o)
            rewards.append(r)
            infos.append(info)
            if self.multi_agent:
                dones.append(_agent_dones(terminated, truncated))
            else:
                dones.append(bool(terminated or truncated))
        return obs, rewards, dones, infos


def _agent_dones(terminated: Mapping[Any, bool], truncated: Mapping[Any, bool]) -> dict:
    """RLlib 1.x's per-agent `dones` of a multi-agent step: terminated or truncated."""
    return {
        a: terminated.get(a, False) or truncated.get(a, False) for a in {*terminated, *truncated}
    }


def convert_to_base_env(
    env: Any,
    make_env: Callable[[int], Any] | None = None,
    num_envs: int = 1,
    remote_envs: bool = False,
    remote_env_batch_wait_ms: int = 0,
    worker: Any = None,
    restart_failed_sub_environments: bool = False,
) -> BaseEnv:
    """`env` as a `BaseEnv` of `num_envs` sub-envs (RLlib 1.13's function).

    Args:
        env: a `BaseEnv` (returned as it is), a `VectorEnv` (wrapped), a
            `gymnasium.vector.VectorEnv` (its sub-envs stepped as one batch), a
            `MultiAgentEnv` or a Gymnasium env (or an old-gym one, converted): the
            first sub-env.
        make_env: builds sub-env `i` for `i >= 1`; needed when `num_envs > 1`.
        num_envs: the number of sub-envs.
        remote_envs: each sub-env in a process of its own (all built by `make_env`).
        remote_env_batch_wait_ms: with `remote_envs`, must be 0 (corral waits for every
            remote sub-env; see `check_remote_env_batch_wait_ms`).
        worker: unused (RLlib's).
        restart_failed_sub_environments: accepted for RLlib's signature (restarts are the
            sampler's, set by the config key of that name).

    Raises:
        ValueError: more than one sub-env is wanted and there is no `make_env`, or
            `remote_envs` with a `remote_env_batch_wait_ms` other than 0.
    """
    import gymnasium as gym

    from corral.env.gym_compat import ensure_gymnasium_env
    from corral.env.multi_agent_env import MultiAgentEnv, MultiAgentEnvWrapper
    from corral.env.vector_env import VectorEnv, VectorEnvWrapper

    if isinstance(env, BaseEnv):
        return env
    if isinstance(env, VectorEnv):
        return VectorEnvWrapper(env)
    if isinstance(env, gym.vector.VectorEnv):
        from corral.env.native_vector_env import BatchedVectorEnv

        return BatchedVectorEnv(env)
    if num_envs > 1 and make_env is None:
        raise ValueError(f"convert_to_base_env: num_envs={num_envs} needs make_env.")
    if remote_envs:
        from corral.env.remote_vector_env import RemoteVectorEnv, check_remote_env_batch_wait_ms

        check_remote_env_batch_wait_ms(remote_env_batch_wait_ms)
        return RemoteVectorEnv(make_env or (lambda i: env), num_envs)
    first = ensure_gymnasium_env(env)
    envs = [first] + [ensure_gymnasium_env(make_env(i)) for i in range(1, num_envs)]  # type: ignore[misc]
    if isinstance(first, MultiAgentEnv):
        return MultiAgentEnvWrapper(envs)
    return VectorEnv.vectorize_gym_envs(existing_envs=envs, num_envs=num_envs)
