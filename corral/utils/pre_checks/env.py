"""`check_env(env)`: RLlib 1.13's standalone check of a user's env.

It resets the env and steps it once with sampled actions, and raises a `ValueError` that
says what is wrong: spaces that are not Gymnasium spaces, observations outside their
space, results that are not Gymnasium's (or, converted, the old gym API's), rewards that
are not numbers, multi-agent dicts without their `"__all__"` flags. An env with the old
gym API is checked through the conversion corral trains it with.
"""

from __future__ import annotations

import numbers
from typing import Any

import gymnasium as gym
import numpy as np

from corral.env.base_env import BaseEnv
from corral.env.gym_compat import (
    check_reset_output,
    ensure_gymnasium_env,
    env_name,
    step_output_error,
)
from corral.env.multi_agent_env import MultiAgentEnv

ALL = "__all__"


def check_env(env: Any) -> None:
    """Checks `env` (a Gymnasium or old-gym env, a `MultiAgentEnv` or a `BaseEnv`).

    Raises:
        ValueError: what is wrong, naming the env, the call and the value.
    """
    try:
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
    """Checks a single-agent Gymnasium env: spaces, `reset()`, one `step()`."""
    name = env_name(env)
    for attr in ("observation_space", "action_space"):
        space = getattr(env, attr, None)
        if not isinstance(space, gym.spaces.Space):
            raise ValueError(f"Env {name}: its {attr} must be a gymnasium space, got {space!r}")
    obs, info = check_reset_output(env, env.reset())
    _check_obs(name, "reset()", obs, env.observation_space)
    out = env.step(env.action_space.sample())
    if not (isinstance(out, tuple) and len(out) == 5):
        raise step_output_error(env, out)
    obs, reward, terminated, truncated, info = out
    _check_obs(name, "step()", obs, env.observation_space)
    _check_reward(name, reward)
    for flag, value in (("terminated", terminated), ("truncated", truncated)):
        if not isinstance(value, bool | np.bool_):
            raise ValueError(f"Env {name}: step() returned {flag}={value!r}; expected a bool")
    if not isinstance(info, dict):
        raise ValueError(f"Env {name}: step() returned info={info!r}; expected a dict")


def check_multiagent_environments(env: MultiAgentEnv) -> None:
    """Checks a `MultiAgentEnv`: `reset()` and one `step()` with every observed agent
    acting, each agent's observation in its space, the `"__all__"` flags."""
    name = env_name(env)
    obs, infos = check_reset_output(env, env.reset())
    if not isinstance(obs, dict) or not isinstance(infos, dict):
        raise ValueError(
            f"MultiAgentEnv {name}: reset() must return (obs dict, info dict) keyed by agent "
            f"id, got ({type(obs).__name__}, {type(infos).__name__})"
        )
    _check_agent_obs(env, name, "reset()", obs)
    actions = {agent: _action_space(env, agent).sample() for agent in obs}
    out = env.step(actions)
    if not (isinstance(out, tuple) and len(out) == 5 and all(isinstance(d, dict) for d in out)):
        raise ValueError(
            f"MultiAgentEnv {name}: step(action_dict) must return five dicts keyed by agent "
            f"id (obs, rewards, terminateds, truncateds, infos), got {out!r:.300}"
        )
    obs, rewards, terminateds, truncateds, infos = out
    _check_agent_obs(env, name, "step()", obs)
    for agent, reward in rewards.items():
        _check_reward(f"{name} (agent {agent!r})", reward)
    for flags, label in ((terminateds, "terminateds"), (truncateds, "truncateds")):
        if ALL not in flags:
            raise ValueError(
                f"MultiAgentEnv {name}: step() returned {label} {flags!r} without the "
                f"'{ALL}' key (True when the whole episode is over)"
            )


def check_base_env(env: BaseEnv) -> None:
    """Checks each sub-env of a `BaseEnv`."""
    for sub_env in env.get_sub_environments():
        check_env(sub_env)


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
            f"Env {name}: the observation from {call} is not in its observation space "
            f"{space}: {obs!r:.300}{detail}"
        )


def _check_reward(name: str, reward: Any) -> None:
    if isinstance(reward, bool) or not isinstance(reward, numbers.Real):
        raise ValueError(f"Env {name}: step() returned reward {reward!r}; expected a number")
