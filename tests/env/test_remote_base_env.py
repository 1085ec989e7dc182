"""`RemoteBaseEnv`: RLlib's BaseEnv of sub-envs in their own processes, built directly."""

from __future__ import annotations

import logging
import os

import gymnasium as gym
import numpy as np
import pytest

from corral.env import BaseEnv, RemoteBaseEnv
from corral.env.base_env import convert_to_base_env
from corral.env.multi_agent_env import make_multi_agent


class PidEnv(gym.Env):
    """Reports the process it steps in; episodes of 3 steps."""

    observation_space = gym.spaces.Box(0, 1e9, (1,), np.float64)
    action_space = gym.spaces.Discrete(2)

    def __init__(self, tag: int = 0) -> None:
        self.tag, self.t = tag, 0

    def reset(self, *, seed=None, options=None):
        self.t = 0
        return np.array([self.tag], np.float64), {}

    def step(self, action):
        self.t += 1
        return (
            np.array([self.tag], np.float64),
            float(action),
            self.t >= 3,
            False,
            {"pid": os.getpid()},
        )


def test_poll_send_actions_and_reset_across_processes():
    env = RemoteBaseEnv(lambda i: PidEnv(10 + i), 2, False, 0, existing_envs=[PidEnv(99)])
    try:
        assert isinstance(env, BaseEnv) and env.num_envs == 2
        assert env.remote_env_batch_wait_ms == 0
        obs, rewards, dones, infos, off = env.poll()
        assert {i: o["agent0"][0] for i, o in obs.items()} == {0: 99.0, 1: 11.0}
        assert off == {} and dones[0]["__all__"] is False
        pids = set()
        for _ in range(3):
            env.send_actions({0: {"agent0": 1}, 1: {"agent0": 0}})
            obs, rewards, dones, infos, _ = env.poll()
            assert sorted(obs) == [0, 1]  # lockstep: every sub-env answers each poll
            assert rewards[0]["agent0"] == 1.0 and rewards[1]["agent0"] == 0.0
            pids |= {infos[i]["agent0"]["pid"] for i in (0, 1)}
        assert dones[0]["__all__"] and dones[1]["__all__"]
        assert len(pids) == 2 and os.getpid() not in pids
        assert pids == {h.pid for h in env.get_sub_environments()}
        assert env.try_reset(1) == {1: {"agent0": pytest.approx(np.array([11.0]))}}
    finally:
        env.stop()
    assert not any(h.is_alive() for h in env.get_sub_environments())


def test_bad_arguments_raise():
    with pytest.raises(ValueError, match="multiagent=True"):
        RemoteBaseEnv(lambda i: PidEnv(), 2, True, 0)
    with pytest.raises(ValueError, match="remote_env_batch_wait_ms"):
        RemoteBaseEnv(lambda i: PidEnv(), 2, False, -1)
    with pytest.raises(ValueError, match="num_envs"):
        RemoteBaseEnv(lambda i: PidEnv(), 0, False, 0)
    ma = make_multi_agent(lambda cfg: PidEnv())
    with pytest.raises(ValueError, match="MultiAgentEnv"):
        RemoteBaseEnv(lambda i: ma({"num_agents": 2}), 2, False, 0)


@pytest.mark.parametrize("wait", [-1, -0.5, float("nan"), "10", True])
def test_a_batch_wait_that_is_no_number_of_milliseconds_is_refused(wait):
    with pytest.raises(ValueError, match=r"remote_env_batch_wait_ms must be a number.*>= 0"):
        RemoteBaseEnv(lambda i: PidEnv(), 2, False, wait)
    with pytest.raises(ValueError, match=r"remote_env_batch_wait_ms must be a number"):
        convert_to_base_env(
            PidEnv(), lambda i: PidEnv(), 2, remote_envs=True, remote_env_batch_wait_ms=wait
        )


@pytest.mark.parametrize(("wait", "warns"), [(0, False), (5, True), (0.5, True), (99999999, False)])
def test_any_batch_wait_polls_every_sub_env_and_a_short_one_warns(wait, warns, caplog):
    """The sub-envs step in lockstep: every poll has all of them, as RLlib's with a wait
    longer than any step (its tests' 99999999); a short wait is warned about."""
    with caplog.at_level(logging.WARNING, logger="corral.env.remote_vector_env"):
        env = RemoteBaseEnv(lambda i: PidEnv(), 2, False, wait)
    try:
        assert env.remote_env_batch_wait_ms == wait
        assert sorted(env.poll()[0]) == [0, 1]
        env.send_actions({0: {"agent0": 0}, 1: {"agent0": 0}})
        assert sorted(env.poll()[0]) == [0, 1]
    finally:
        env.stop()
    assert ("step in lockstep" in caplog.text) is warns
