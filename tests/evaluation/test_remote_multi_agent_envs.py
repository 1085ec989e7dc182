"""`remote_worker_envs=True` with a `MultiAgentEnv`: each sub-env steps in a process of its
own, sampled by the multi-agent sampler as the in-process sub-envs are."""

from __future__ import annotations

import os
import time

import gymnasium as gym
import numpy as np
import pytest

from corral.agents.callbacks import DefaultCallbacks
from corral.agents.ppo import PPOTrainer
from corral.env import MultiAgentEnv, RemoteBaseEnv
from corral.env.remote_vector_env import RemoteSubEnv, RemoteVectorEnv
from corral.policy.policy import PolicySpec
from corral.policy.sample_batch import MultiAgentBatch

OBS = gym.spaces.Box(-10.0, 10.0, (2,), np.float32)
ACT = gym.spaces.Discrete(2)


class PidTeamEnv(MultiAgentEnv):
    """Agents "a" and "b"; "b" terminates after 2 steps, the episode ends after 4.

    Each agent's info says which process stepped it and how often this copy was reset;
    `delay` (env_config) makes every step sleep.
    """

    possible_agents = ["a", "b"]
    observation_space = OBS
    action_space = ACT

    def __init__(self, config=None) -> None:
        super().__init__()
        self.delay = float((config or {}).get("delay", 0.0))
        # A path: sub-env 1 dies in its third step unless that file exists (it writes it).
        self.crash_marker = (config or {}).get("crash_marker")
        self.vector_index = getattr(config, "vector_index", 0)
        self.t = 0
        self.resets = 0
        self.agents = []

    def _obs(self, agent: str) -> np.ndarray:
        return np.array([self.t, 0.0 if agent == "a" else 1.0], np.float32)

    def _info(self) -> dict:
        return {"pid": os.getpid(), "resets": self.resets}

    def reset(self, *, seed=None, options=None):
        self.t = 0
        self.resets += 1
        self.agents = ["a", "b"]
        return {a: self._obs(a) for a in self.agents}, {a: self._info() for a in self.agents}

    def step(self, action_dict):
        if self.delay:
            time.sleep(self.delay)
        self.t += 1
        crashes = self.crash_marker and self.vector_index == 1 and self.t == 3
        if crashes and not os.path.exists(self.crash_marker):
            open(self.crash_marker, "w").close()
            os._exit(3)
        rewards = {
            a: float(action) + (10.0 if a == "b" else 0.0) for a, action in action_dict.items()
        }
        terminateds = {"__all__": self.t >= 4}
        if self.t == 2:
            terminateds["b"] = True
        obs = {a: self._obs(a) for a in action_dict}
        infos = {a: self._info() for a in action_dict}
        self.agents = [a for a in self.agents if not terminateds.get(a)]
        return obs, rewards, terminateds, {"__all__": False}, infos


class InfoSpy(DefaultCallbacks):
    """Keeps agent "a"'s last info of every episode that ends."""

    seen: list[dict] = []

    def on_episode_end(self, *, episode, **kwargs):
        InfoSpy.seen.append(episode.last_info_for("a"))


def config(**overrides) -> dict:
    return {
        "num_workers": 0,
        "num_envs_per_worker": 3,
        "remote_worker_envs": True,
        "rollout_fragment_length": 8,
        "train_batch_size": 48,
        "sgd_minibatch_size": 24,
        "num_sgd_iter": 1,
        "seed": 3,
        "model": {"fcnet_hiddens": [8]},
        "multiagent": {
            "policies": {"pa": PolicySpec(), "pb": PolicySpec()},
            "policy_mapping_fn": lambda agent_id, episode, worker, **kw: f"p{agent_id}",
        },
        **overrides,
    }


def test_each_multi_agent_sub_env_steps_in_its_own_process_in_parallel():
    InfoSpy.seen = []
    trainer = PPOTrainer(
        config(num_envs_per_worker=4, env_config={"delay": 0.05}, callbacks=InfoSpy),
        env=PidTeamEnv,
    )
    try:
        worker = trainer.workers.local_worker()
        vector = worker.async_env
        assert isinstance(vector, RemoteVectorEnv) and vector.multi_agent
        handles = vector.get_sub_environments()
        assert all(isinstance(h, RemoteSubEnv) and h.is_multi_agent for h in handles)
        # What the worker and sampler read of a multi-agent env, without a round trip.
        assert handles[0].possible_agents == ["a", "b"] and handles[0].observation_space == OBS
        start = time.perf_counter()
        batch = worker.sample()
        elapsed = time.perf_counter() - start
        assert isinstance(batch, MultiAgentBatch) and set(batch.policy_batches) == {"pa", "pb"}
        assert batch.env_steps() == 8 * 4
        pids = {info["pid"] for info in InfoSpy.seen}
        assert pids == {h.pid for h in handles} and len(pids) == 4 and os.getpid() not in pids
        # 8 steps x 4 envs x 50 ms is 1.6 s one after the other; in parallel about 0.4 s.
        assert elapsed < 1.2, elapsed
        result = trainer.train()
        assert result["episodes_this_iter"] > 0
    finally:
        trainer.stop()
    assert not any(h.is_alive() for h in handles)


def test_remote_sub_envs_give_the_batches_in_process_sub_envs_give():
    """Same seed, same env, same policies: only where the sub-envs step differs."""
    batches, metrics = [], []
    for remote in (False, True):
        trainer = PPOTrainer(config(remote_worker_envs=remote), env=PidTeamEnv)
        try:
            worker = trainer.workers.local_worker()
            batches.append(worker.sample())
            metrics.append(worker.get_metrics())
        finally:
            trainer.stop()
    local, remote_batch = batches
    for pid in ("pa", "pb"):
        for column in ("obs", "actions", "rewards", "terminateds", "truncateds", "t", "eps_id"):
            np.testing.assert_array_equal(
                local.policy_batches[pid][column], remote_batch.policy_batches[pid][column]
            )
    assert [(m.episode_length, m.episode_reward) for m in metrics[0]] == [
        (m.episode_length, m.episode_reward) for m in metrics[1]
    ]


def test_episode_ends_and_resets_happen_in_the_sub_env_processes():
    trainer = PPOTrainer(config(), env=PidTeamEnv)
    try:
        worker = trainer.workers.local_worker()
        batch = worker.sample()
        # 8 steps per sub-env: two whole episodes of 4 steps each in every sub-env.
        episodes = worker.get_metrics()
        assert len(episodes) == 6 and all(m.episode_length == 4 for m in episodes)
        a, b = batch.policy_batches["pa"], batch.policy_batches["pb"]
        assert a.count == 24 and b.count == 12  # "b" leaves after 2 of each episode's 4 steps
        assert a["terminateds"].sum() == 6 and b["terminateds"].sum() == 6
        assert list(a["t"][:4]) == [0, 1, 2, 3] and list(b["t"][:2]) == [0, 1]
        # Each copy was reset in its own process: once at the start, once per episode end.
        handles = worker.async_env.get_sub_environments()
        assert [h.call("resets") for h in handles] == [3, 3, 3]
        # `agents` is read from the child as it is now (the episode just started).
        assert handles[0].agents == ["a", "b"]
        # A fresh evaluation resets every sub-env in its process.
        worker.reset_sampler()
        assert [h.call("resets") for h in handles] == [4, 4, 4]
    finally:
        trainer.stop()


def test_a_dead_multi_agent_sub_env_is_restarted_in_a_new_process(tmp_path):
    marker = str(tmp_path / "crashed")
    trainer = PPOTrainer(
        config(restart_failed_sub_environments=True, env_config={"crash_marker": marker}),
        env=PidTeamEnv,
    )
    try:
        worker = trainer.workers.local_worker()
        first_pid = worker.async_env.get_sub_environments()[1].pid
        batch = worker.sample()
        # The dropped episode's rows are not in the batch: its 2 steps and the one that died.
        assert os.path.exists(marker) and batch.env_steps() == 24 - 3
        handles = worker.async_env.get_sub_environments()
        assert handles[1].pid != first_pid and handles[1].is_alive()
        metrics = worker.get_metrics()
        assert sum(m.episode_faulty for m in metrics) == 1
        assert worker.sample().env_steps() == 24
    finally:
        trainer.stop()


def test_a_sampler_thread_samples_remote_multi_agent_sub_envs():
    trainer = PPOTrainer(config(sample_async=True), env=PidTeamEnv)
    try:
        worker = trainer.workers.local_worker()
        for _ in range(2):
            batch = worker.sample()
            assert isinstance(batch, MultiAgentBatch) and batch.env_steps() == 24
        assert trainer.train()["episodes_this_iter"] > 0
    finally:
        trainer.stop()


def test_a_negative_batch_wait_is_refused_for_multi_agent_sub_envs_too():
    with pytest.raises(ValueError, match=r"remote_env_batch_wait_ms.*>= 0"):
        PPOTrainer(config(remote_env_batch_wait_ms=-10), env=PidTeamEnv)


def test_a_remote_base_env_of_multi_agent_sub_envs_polls_per_agent():
    env = RemoteBaseEnv(lambda i: PidTeamEnv(), 2, True, 0)
    try:
        assert env.multiagent and env.multi_agent and env.get_agent_ids() == {"a", "b"}
        obs, _, dones, infos, _ = env.poll()
        assert sorted(obs) == [0, 1] and sorted(obs[0]) == ["a", "b"]
        for _ in range(4):
            acting = {i: [a for a in obs[i] if not dones[i].get(a)] for i in obs}
            env.send_actions({i: {a: 1 for a in agents} for i, agents in acting.items()})
            obs, rewards, dones, infos, _ = env.poll()
        assert dones[0]["__all__"] and dones[1]["__all__"] and rewards[0] == {"a": 1.0}
        assert {infos[i]["a"]["pid"] for i in (0, 1)} == {h.pid for h in env.get_sub_environments()}
        reset_obs = env.try_reset(1)
        assert sorted(reset_obs[1]) == ["a", "b"] and reset_obs[1]["a"][0] == 0.0
    finally:
        env.stop()
    with pytest.raises(ValueError, match=r"multiagent=False\): make_env built a MultiAgentEnv"):
        RemoteBaseEnv(lambda i: PidTeamEnv(), 2, False, 0)
