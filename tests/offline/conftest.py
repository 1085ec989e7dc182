"""Shared data of the offline tests: CartPole steps as dataset rows."""

from __future__ import annotations

from collections.abc import Callable

import gymnasium as gym
import numpy as np
import pytest


def cartpole_rows(
    n: int, seed: int = 0, label: Callable[[np.ndarray], int] | None = None
) -> tuple[gym.Env, list[dict]]:
    """(the env, n CartPole-v1 steps of a random walk as dataset rows with the columns BC
    reads); `label(obs)`: the action recorded for each step instead of the one taken."""
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=seed)
    env.action_space.seed(seed)
    rows, eps_id, t = [], 0, 0
    for _ in range(n):
        action = int(env.action_space.sample())
        new_obs, reward, term, trunc, _ = env.step(action)
        rows.append(
            {
                "obs": obs.astype(np.float32),
                "actions": action if label is None else label(obs),
                "rewards": float(reward),
                "new_obs": new_obs.astype(np.float32),
                "terminateds": bool(term),
                "truncateds": bool(trunc),
                "dones": bool(term or trunc),
                "eps_id": eps_id,
                "t": t,
            }
        )
        obs, t = new_obs, t + 1
        if term or trunc:
            (obs, _), eps_id, t = env.reset(), eps_id + 1, 0
    return env, rows


@pytest.fixture(scope="session")
def cartpole_steps() -> Callable[..., tuple[gym.Env, list[dict]]]:
    """`cartpole_rows`, for the tests that build datasets from CartPole steps."""
    return cartpole_rows
