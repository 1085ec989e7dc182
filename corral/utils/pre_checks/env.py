"""`check_env(env)`: RLlib 1.13's standalone check of a user's env.

It resets the env and steps it once with sampled actions, and raises a `ValueError` that
says what is wrong: spaces that are not Gymnasium spaces, observations outside their
space, results that are not Gymnasium's (or, converted, the old gym API's), rewards that
are not numbers, flags that are not bools, infos that are not dicts, multi-agent dicts
without their `"__all__"` flags or keyed by ids that are not the env's agents, space
helpers (`observation_space_contains`, `action_space_sample`, ...) that fail or
contradict the spaces. An env with the old gym API is checked through the conversion
corral trains it with. A `BaseEnv` is checked through its own `try_reset` /
`send_actions` / `poll` (dicts keyed by env id, then agent id).
"""

from __future__ import annotations

import logging
import numbers
from collections.abc import Callable
from typing import Any

import gymnasium as gym
import numpy as np

from corral.env.base_env import BaseEnv
from corral.env.gym_compat import (
    check_reset_output,
    ensure_gymnasium_env,
    env_name,
    is_old_api_env,
    is_old_gym_space,
    step_output_error,
)
from corral.env.multi_agent_env import MultiAgentEnv
from corral.utils import numpy_compat

logger = logging.getLogger(__name__)

ALL = "__all__"


def check_env(env: Any) -> None:
    """Checks `env` (a Gymnasium or old-gym env, a `MultiAgentEnv` or a `BaseEnv`).

    A `VectorEnv` or an `ExternalEnv` is not checked (a warning says so), as in RLlib
    1.13; neither is an env with `_skip_env_checking = True`.

    Raises:
        ValueError: what is wrong, naming the env, the call and the value.
    """
    from corral.env.external_env import ExternalEnv
    from corral.env.vector_env import VectorEnv

    if getattr(env, "_skip_env_checking", False):
        logger.warning("Skipping the env check of %s (_skip_env_checking).", env_name(env))
        return
    if isinstance(env, VectorEnv | ExternalEnv):
        logger.warning(
            "check_env does not check a VectorEnv or an ExternalEnv (%s).", env_name(env)
        )
        return
    try:
        if isinstance(env, gym.Env) or is_old_api_env(env):
            # Before the conversion of an old-API env, which would fail on them unclearly.
            _check_spaces(env)
        if is_old_api_env(env) and not isinstance(env, MultiAgentEnv):
            # Its own step() before the conversion, which turns any `done` into a bool.
            check_old_api_step(env)
        env = ensure_gymnasium_env(env)
        if isinstance(env, MultiAgentEnv):
            check_multiagent_environments(env)
        elif isinstance(env, gym.Env):
            check_gym_environments(env)
        elif isinstance(env, BaseEnv):
            check_base_env(env)
        else:
            raise ValueError(
                "Env must be a gymnasium.Env (or an old gym env), a MultiAgentEnv or a "
                f"BaseEnv, but instead was a {type(env)}"
            )
    except ValueError:
        raise
    except Exception as e:  # an EnvError, or what the env itself raised
        raise ValueError(f"The env check found a problem in your environment: {e}") from e


def check_gym_environments(env: gym.Env) -> None:
    """Checks a single-agent Gymnasium env: spaces, `reset()`, one `step()`.

    Raises:
        AttributeError: the env has no `observation_space` or no `action_space`.
        ValueError: anything else that is wrong.
    """
    name = env_name(env)
    _check_spaces(env)
    obs, info = check_reset_output(env, env.reset())
    _check_obs(name, "reset()", obs, env.observation_space)
    out = env.step(env.action_space.sample())
    if not (isinstance(out, tuple) and len(out) == 5):
        raise step_output_error(env, out)
    obs, reward, terminated, truncated, info = out
    _check_step_values(env, obs, reward, {"terminated": terminated, "truncated": truncated}, info)


def check_old_api_step(env: Any) -> None:
    """Checks a single-agent env of the old gym API through its own calls: `reset() ->
    obs` and `step() -> (obs, reward, done, info)`, with `done` a bool and `info` a dict
    (as RLlib 1.13 checked them; the conversion to Gymnasium's API would hide a `done`
    of another type). A `step()` of another shape is left to the checks after the
    conversion.

    Raises:
        ValueError: what is wrong, naming the env, the call and the value.
    """
    numpy_compat.install()  # (gym 0.23's envs use NumPy 1.x names, as the conversion knows)
    name = env_name(env)
    _check_obs(name, "reset()", env.reset(), env.observation_space)
    out = env.step(env.action_space.sample())
    if not (isinstance(out, tuple) and len(out) == 4):
        return
    obs, reward, done, info = out
    _check_step_values(env, obs, reward, {"done": done}, info)


def _check_step_values(env: Any, obs: Any, reward: Any, flags: dict[str, Any], info: Any) -> None:
    """A single-agent `step()`'s results: the observation in the env's space, a number
    for the reward, bools for the episode-end `flags` (by name), a dict for the info."""
    name = env_name(env)
    _check_obs(name, "step()", obs, env.observation_space)
    _check_reward(name, reward)
    for flag, value in flags.items():
        if not isinstance(value, bool | np.bool_):
            raise ValueError(
                f"Your step function must return a done that is a boolean: env {name}'s "
                f"step() returned {flag}={value!r}."
            )
    if not isinstance(info, dict):
        raise ValueError(
            f"Your step function must return a info that is a dict: env {name}'s step() "
            f"returned info={info!r:.200}."
        )


def check_multiagent_environments(env: MultiAgentEnv) -> None:
    """Checks a `MultiAgentEnv`: `reset()` and one `step()` with every observed agent
    acting, each agent's observation in its space, the `"__all__"` flags, the agent ids
    of each dict, and the env's `observation_space_sample` / `_contains` and
    `action_space_sample` / `_contains`.

    Raises:
        ValueError: `env` is not a `MultiAgentEnv`, or what is wrong with it.
    """
    if not isinstance(env, MultiAgentEnv):
        raise ValueError(f"The passed env is not a MultiAgentEnv: {type(env)}")
    name = env_name(env)
    label = f"MultiAgentEnv {name}"
    out = env.reset()
    if not (isinstance(out, tuple) and len(out) == 2 and all(isinstance(d, dict) for d in out)):
        raise ValueError(
            f"The element returned by reset() of {label} is not a pair of MultiAgentDicts "
            f"(obs, infos), each keyed by agent id: got {out!r:.300}"
        )
    obs, infos = out
    agent_ids = _declared_agent_ids(env)
    _check_agent_ids(label, "reset()", obs, agent_ids)
    _check_agent_obs(env, name, "reset()", obs)
    _check_contained(label, env.observation_space_contains, "observation", "reset()", obs)
    for kind in ("observation", "action"):
        call = f"{kind}_space_sample()"
        sample = getattr(env, f"{kind}_space_sample")()
        if not isinstance(sample, dict):
            raise ValueError(f"{label}: {call} returned {sample!r:.200}; expected a dict")
        _check_agent_ids(label, call, sample, agent_ids)
        _check_contained(label, getattr(env, f"{kind}_space_contains"), kind, call, sample)
    actions = {agent: _action_space(env, agent).sample() for agent in obs}
    out = env.step(actions)
    if not (isinstance(out, tuple) and len(out) == 5 and all(isinstance(d, dict) for d in out)):
        raise ValueError(
            f"The element returned by step(action_dict) of {label} is not five "
            "MultiAgentDicts keyed by agent id (obs, rewards, terminateds, truncateds, "
            f"infos): got {out!r:.300}"
        )
    obs, rewards, terminateds, truncateds, infos = out
    for what, values in zip(("obs", "rewards", "terminateds", "truncateds", "infos"), out):
        _check_agent_ids(label, f"step() ({what})", values, agent_ids)
    _check_agent_obs(env, name, "step()", obs)
    _check_contained(label, env.observation_space_contains, "observation", "step()", obs)
    _check_agent_values(name, rewards, terminateds, truncateds, infos)
    for flags, what in ((terminateds, "terminateds"), (truncateds, "truncateds")):
        if ALL not in flags:
            raise ValueError(
                f"{label}: step() returned {what} {flags!r} without the "
                f"'{ALL}' key (True when the whole episode is over)"
            )


def check_base_env(env: BaseEnv) -> None:
    """Checks a `BaseEnv` through RLlib's asynchronous interface: `try_reset()`, the
    space helpers, `send_actions` of a sampled action, then `poll()`. Each result must
    be a dict keyed by the env's sub-env ids whose values are dicts keyed by its agent ids
    (`"__all__"` too), with observations and actions in their spaces.

    Raises:
        ValueError: `env` is not a `BaseEnv`, or what is wrong with it.
    """
    if not isinstance(env, BaseEnv):
        raise ValueError(f"The passed env is not a BaseEnv: {type(env)}")
    label = f"BaseEnv {env_name(env)}"
    # corral's first poll() starts every sub-env's episode (send_actions needs it); the
    # class's own, whatever the instance's `poll` is.
    type(env).poll(env)
    reset_obs = env.try_reset()
    _check_multi_env_dict(env, label, "try_reset", reset_obs)
    _check_contained(label, env.observation_space_contains, "observation", "try_reset()", reset_obs)
    for kind in ("observation", "action"):
        call = f"{kind}_space_sample()"
        sample = getattr(env, f"{kind}_space_sample")()
        _check_multi_env_dict(env, label, call, sample)
        _check_contained(label, getattr(env, f"{kind}_space_contains"), kind, call, sample)
    # corral's send_actions steps every sub-env: a sampled action for each.
    sampled = [next(iter(env.action_space_sample().values())) for _ in range(env.num_envs)]
    env.send_actions(dict(enumerate(sampled)))
    out = env.poll()
    if not (isinstance(out, tuple) and len(out) == 5):
        raise ValueError(
            f"{label}: poll() must return (obs, rewards, dones, infos, off_policy_actions), "
            f"got {out!r:.300}"
        )
    obs, rewards, dones, infos, _ = out
    # (RLlib 1.13's names of the step's results, which poll() returns here.)
    for what, values in zip(("next_obs", "rewards", "dones", "infos"), out):
        _check_multi_env_dict(env, label, f"step, {what}", values)
    _check_contained(label, env.observation_space_contains, "observation", "poll()", obs)
    for env_id in rewards:
        _check_agent_values(
            f"{env_name(env)} (sub-env {env_id!r})",
            rewards[env_id],
            dones.get(env_id, {}),
            {},
            infos.get(env_id, {}),
        )


def _check_spaces(env: Any) -> None:
    """The env has both spaces, and they are Gymnasium (or old gym) spaces."""
    for attr in ("observation_space", "action_space"):
        if not hasattr(env, attr):
            raise AttributeError(f"Env must have {attr}. ({env_name(env)} has none.)")
    for attr, what in (("observation_space", "Observation"), ("action_space", "Action")):
        space = getattr(env, attr)
        if not (isinstance(space, gym.spaces.Space) or is_old_gym_space(space)):
            raise ValueError(
                f"{what} space must be a gym.space (a gymnasium space, or an old gym one): "
                f"env {env_name(env)}'s {attr} is {space!r}"
            )


def _check_contained(
    label: str, contains: Callable[[Any], bool], kind: str, call: str, value: Any
) -> None:
    """`contains(value)` (the env's `<kind>_space_contains`) is True, and does not fail."""
    try:
        inside = contains(value)
    except Exception as e:
        raise ValueError(
            f"Your {kind}_space_contains function has some error ({label}, on the {kind} "
            f"from {call}): {e!r}"
        ) from e
    if not inside:
        raise ValueError(
            f"The {kind} collected from {call} is not in the {kind} space of {label} "
            f"({kind}_space_contains says False): {value!r:.300}"
        )


def _declared_agent_ids(env: MultiAgentEnv) -> set[Any]:
    """All the agent ids the env declares (RLlib's `_agent_ids`, `possible_agents` or
    the keys of `observation_spaces`); empty (ids unchecked) when it declares none, e.g.
    where `agents` alone lists the agents present now."""
    ids = getattr(env, "_agent_ids", None) or env.possible_agents or env.observation_spaces
    return set(ids or ())


def _base_env_agent_ids(env: BaseEnv) -> set[Any]:
    if not env.multi_agent:
        return env.get_agent_ids()
    subs = env.get_sub_environments()
    return _declared_agent_ids(subs[0]) if subs and isinstance(subs[0], MultiAgentEnv) else set()


def _check_agent_ids(
    label: str, call: str, values: dict, agent_ids: set[Any], where: str = ""
) -> None:
    """`values` is keyed by the env's agent ids (or `"__all__"`); unchecked where the env
    names no agents. `where`: which part of `call`'s result (e.g. a sub-env)."""
    if not agent_ids:
        return
    unknown = [key for key in values if key not in agent_ids and key != ALL]
    if unknown:
        raise ValueError(
            f"The element returned by {call} has agent_ids that are not the names of the "
            f"agents in the env {label}{where}: {unknown!r} (the env's agent ids: "
            f"{sorted(agent_ids, key=str)!r}; set `possible_agents`, or RLlib's "
            "`_agent_ids`, to the ids the env uses)"
        )


def _check_multi_env_dict(env: BaseEnv, label: str, call: str, values: Any) -> None:
    """`values` is `{env_id: {agent_id: value}}` with the env's sub-env and agent ids."""
    if not isinstance(values, dict):
        raise ValueError(
            f"The element returned by {call} of {label} is not a MultiEnvDict. Instead, it "
            f"is of type {type(values)}: {values!r:.200} (expected {{env_id: {{agent_id: "
            "value}})"
        )
    env_ids = env.get_sub_environments(as_dict=True)
    if env_ids:
        unknown = [key for key in values if key not in env_ids]
        if unknown:
            raise ValueError(
                f"The element returned by {call} of {label} has dict keys that don't "
                f"correspond to the env's sub-env ids {list(env_ids)}: {unknown!r}"
            )
    agent_ids = _base_env_agent_ids(env)
    for env_id, per_agent in values.items():
        if not isinstance(per_agent, dict):
            raise ValueError(
                f"The element returned by {call} has values that are not MultiAgentDicts "
                f"({{agent_id: value}}) in {label}: sub-env {env_id!r} has "
                f"{type(per_agent)}: {per_agent!r:.200}"
            )
        _check_agent_ids(label, call, per_agent, agent_ids, where=f" (sub-env {env_id!r})")


def _check_agent_values(
    name: str, rewards: dict, terminateds: dict, truncateds: dict, infos: dict
) -> None:
    """Per agent: rewards are numbers, flags bools, infos dicts."""
    for agent, reward in rewards.items():
        _check_reward(f"{name} (agent {agent!r})", reward, "rewards that are")
    for flags, what in ((terminateds, "terminated"), (truncateds, "truncated")):
        for agent, flag in flags.items():
            if not isinstance(flag, bool | np.bool_):
                raise ValueError(
                    f"Your step function must return dones that are boolean: env {name}'s "
                    f"step() returned {what} {flag!r} for agent {agent!r}."
                )
    for agent, info in infos.items():
        if not isinstance(info, dict):
            raise ValueError(
                f"Your step function must return infos that are a dict: env {name}'s "
                f"step() returned info {info!r:.200} for agent {agent!r}."
            )


def _action_space(env: MultiAgentEnv, agent: Any) -> gym.Space:
    spaces = getattr(env, "action_spaces", None) or {}
    return spaces.get(agent) or env.action_space


def _check_agent_obs(env: MultiAgentEnv, name: str, call: str, obs: dict) -> None:
    spaces = getattr(env, "observation_spaces", None) or {}
    for agent, agent_obs in obs.items():
        space = spaces.get(agent) or getattr(env, "observation_space", None)
        if space is not None:
            _check_obs(f"{name} (agent {agent!r})", call, agent_obs, space)


def _check_obs(name: str, call: str, obs: Any, space: gym.Space) -> None:
    try:
        inside = space.contains(obs)
    except Exception:  # noqa: BLE001 - e.g. a shape numpy cannot compare
        inside = False
    if not inside:
        detail = ""
        if isinstance(space, gym.spaces.Box) and isinstance(obs, np.ndarray):
            detail = (
                f" (shape {obs.shape}, dtype {obs.dtype}; the space's shape {space.shape}, "
                f"dtype {space.dtype})"
            )
        raise ValueError(
            f"The observation collected from env.{call} is not in the observation space "
            f"{space} of env {name}: {obs!r:.300}{detail}"
        )


def _check_reward(name: str, reward: Any, what: str = "a reward that is") -> None:
    """`reward` is a number (`what`: RLlib 1.13's words for one reward or an agent's)."""
    if isinstance(reward, np.ndarray) and reward.shape == ():
        reward = reward[()]  # a 0-d array holds one number (RLlib 1.13 accepts it)
    if isinstance(reward, bool | np.bool_) or not isinstance(reward, numbers.Real):
        raise ValueError(
            f"Your step function must return {what} integer or float: env {name}'s step() "
            f"returned reward {reward!r}."
        )
