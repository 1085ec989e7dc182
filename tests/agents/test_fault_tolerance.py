"""Fault tolerance: hung workers, a killed driver, dead evaluation workers, flaky envs.

Every test that could hang without its fix runs the call in a thread with a
deadline (`_within`), so a regression fails instead of blocking the suite.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

from corral.agents.ppo import PPOTrainer
from corral.env.multi_agent_env import make_multi_agent
from corral.evaluation.backend import RemoteWorkerError, WorkerTimeoutError
from corral.evaluation.metrics import summarize_episodes
from corral.policy.sample_batch import SampleBatch

SMALL = {
    "num_workers": 2,
    "rollout_fragment_length": 50,
    "train_batch_size": 100,
    "sgd_minibatch_size": 50,
    "num_sgd_iter": 1,
    "model": {"fcnet_hiddens": [16]},
    "seed": 0,
}
# A stopped worker is given up on after this long (the default is 600 s).
QUICK_TIMEOUTS = {"sample_timeout_s": 1.0, "worker_health_probe_timeout_s": 0.5}


def _within(seconds: float, fn: Any, *args: Any) -> Any:
    """`fn(*args)`, failing the test if it takes longer than `seconds` (a hang)."""
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = fn(*args)
        except BaseException as e:  # noqa: BLE001 - re-raised in the test's thread
            out["error"] = e

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    if thread.is_alive():
        pytest.fail(f"{getattr(fn, '__name__', fn)} still blocked after {seconds} s")
    if "error" in out:
        raise out["error"]
    return out["value"]


def _gone(pid: int, within: float = 5.0) -> bool:
    """Whether process `pid` has exited (reaped or a zombie) within `within` seconds."""
    deadline = time.monotonic() + within
    while True:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.05)


@pytest.fixture
def make():
    trainers = []

    def build(env: Any = "CartPole-v1", **overrides: Any) -> PPOTrainer:
        t = PPOTrainer(config={**SMALL, **overrides}, env=env)
        trainers.append(t)
        return t

    yield build
    for t in trainers:
        t.stop()


# -- envs ---------------------------------------------------------------------


class FixedEnv(gym.Env):
    """Episodes of exactly `length` steps; raises `ValueError` at step `fail_at`
    (counted over the env's life) of the first instance on worker `fail_on`."""

    instances = 0

    def __init__(self, config: dict) -> None:
        self.observation_space = gym.spaces.Box(-1.0, 1.0, (2,), np.float32)
        self.action_space = gym.spaces.Discrete(2)
        self.length = config.get("length", 1000)
        self.fail_every = config.get("fail_every")
        fail_on = config.get("fail_on")
        self.fail_here = fail_on is None or fail_on == getattr(config, "worker_index", 0)
        self.block = config.get("block", False)
        type(self).instances += 1
        self.first = type(self).instances == 1 or config.get("every_instance", False)
        self.t = self.life = 0

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        self.t = 0
        return np.zeros(2, np.float32), {}

    def step(self, action: int):
        self.t += 1
        self.life += 1
        if self.fail_here and self.fail_every and self.life % self.fail_every == 0:
            if self.block:
                time.sleep(3600)  # an env that hangs
            if self.first:
                raise ValueError(f"flaky env failed at step {self.life}")
        obs = np.full(2, self.t / self.length, np.float32)
        return obs, 1.0, self.t >= self.length, False, {}


@pytest.fixture(autouse=True)
def _fresh_instance_count():
    FixedEnv.instances = 0


# -- item 5: hung workers -----------------------------------------------------


@pytest.mark.parametrize("flag", ["ignore_worker_failures", "recreate_failed_workers"])
def test_stopped_worker_is_timed_out_killed_and_handled(make, flag):
    t = make(**{flag: True}, **QUICK_TIMEOUTS)
    t.train()
    victim = t.workers.remote_workers()[0]
    os.kill(victim.pid, signal.SIGSTOP)
    result = _within(30, t.train)
    assert result["timesteps_this_iter"] == 100
    assert _gone(victim.pid), "the hung worker was left behind, not SIGKILLed"
    pids = [w.pid for w in t.workers.remote_workers()]
    assert victim.pid not in pids
    assert result["num_healthy_workers"] == (2 if flag == "recreate_failed_workers" else 1)


def test_stopped_worker_without_recovery_is_named_with_pid_and_wait(make):
    t = make(**QUICK_TIMEOUTS)
    victim = t.workers.remote_workers()[1]
    os.kill(victim.pid, signal.SIGSTOP)
    with pytest.raises(
        WorkerTimeoutError,
        match=rf"worker 2 \(pid {victim.pid}\) did not answer `sample` within 1\.\d s",
    ):
        _within(30, t.train)


def test_env_that_blocks_is_a_hung_worker(make):
    t = make(
        FixedEnv,
        env_config={"fail_every": 20, "fail_on": 1, "block": True},
        ignore_worker_failures=True,
        **QUICK_TIMEOUTS,
    )
    blocked = t.workers.remote_workers()[0]
    result = _within(30, t.train)
    assert result["num_healthy_workers"] == 1
    assert _gone(blocked.pid)


def test_a_stopped_worker_never_blocks_a_send(make):
    # Weights far larger than a pipe's buffer: before the writer thread, sending
    # them to a stopped worker blocked the driver in `send` forever.
    t = make(model={"fcnet_hiddens": [512, 512]}, **QUICK_TIMEOUTS)
    victim = t.workers.remote_workers()[0]
    weights = t.get_weights()
    os.kill(victim.pid, signal.SIGSTOP)
    start = time.monotonic()
    future = _within(5, victim.call, "set_weights", weights)
    assert time.monotonic() - start < 1.0
    with pytest.raises(WorkerTimeoutError, match="set_weights"):
        future.result()
    with pytest.raises(WorkerTimeoutError, match="worker 1"):
        _within(10, t.workers.sync_weights, None, None, {"timestep": 1})


def test_timeouts_are_checked(make):
    with pytest.raises((ValueError, TypeError), match=r"`sample_timeout_s`.*got 0"):
        make(sample_timeout_s=0)
    with pytest.raises((ValueError, TypeError), match=r"`worker_health_probe_timeout_s`.*'x'"):
        make(worker_health_probe_timeout_s="x")


# -- item 6: a killed driver ---------------------------------------------------

_DRIVER = """
import sys, threading, time
from corral.agents.ppo import PPOTrainer

def build():
    t = PPOTrainer(config={"num_workers": 2, "model": {"fcnet_hiddens": [8]},
                           "rollout_fragment_length": 20, "train_batch_size": 40,
                           "sgd_minibatch_size": 20, "num_sgd_iter": 1}, env="CartPole-v1")
    print(" ".join(str(w.pid) for w in t.workers.remote_workers()), flush=True)

if sys.argv[1] == "thread":
    # Workers forked from a thread that ends: no PR_SET_PDEATHSIG (it would fire
    # when that thread ends); the parent-pid watch must notice the driver's death.
    thread = threading.Thread(target=build)
    thread.start()
    thread.join()
else:
    build()
time.sleep(600)
"""


@pytest.mark.parametrize("forked_from", ["main", "thread"])
def test_workers_exit_when_the_driver_is_sigkilled(tmp_path, forked_from):
    env = {**os.environ, "CORRAL_RESULTS_DIR": str(tmp_path)}
    pids: list[int] = []
    driver = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(_DRIVER), forked_from],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )
    try:
        pids += [int(p) for p in driver.stdout.readline().split()]
        assert len(pids) == 2
        time.sleep(0.5)  # past the point where a thread's end would have killed them
        assert not any(_gone(pid, within=0.0) for pid in pids), "workers died with their thread"
        driver.kill()
        driver.wait(10)
        for pid in pids:
            assert _gone(pid, within=5.0), f"worker {pid} outlived its SIGKILLed driver"
    finally:
        driver.kill()
        driver.wait(10)
        driver.stdout.close()
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


# -- item 7: dead evaluation workers ------------------------------------------


@pytest.mark.parametrize("flag", ["ignore_worker_failures", "recreate_failed_workers"])
def test_dead_evaluation_worker_is_recovered(make, flag):
    t = make(
        **{flag: True},
        evaluation_num_workers=2,
        evaluation_interval=1,
        evaluation_num_episodes=2,
        evaluation_config={"explore": False},
    )
    t.train()
    victim = t.evaluation_workers.remote_workers()[0]
    os.kill(victim.pid, signal.SIGKILL)
    result = t.train()
    assert result["evaluation"]["episodes_this_iter"] >= 1
    eval_pids = [w.pid for w in t.evaluation_workers.remote_workers()]
    assert victim.pid not in eval_pids
    assert len(eval_pids) == (2 if flag == "recreate_failed_workers" else 1)
    assert result["num_healthy_workers"] == 2  # the rollout workers are untouched
    assert t.train()["training_iteration"] == 3


# -- item 8: envs that raise ---------------------------------------------------


def test_env_error_in_one_worker_drops_that_worker(make):
    # The raising worker still answers ping; it must be dropped all the same.
    t = make(FixedEnv, env_config={"fail_every": 30, "fail_on": 1}, ignore_worker_failures=True)
    failing_pid = t.workers.remote_workers()[0].pid
    result = t.train()
    assert result["num_healthy_workers"] == 1
    assert [w.worker_index for w in t.workers.remote_workers()] == [2]
    assert _gone(failing_pid)
    assert t.train()["training_iteration"] == 2


def test_env_error_without_flags_carries_the_env_exception(make):
    t = make(FixedEnv, env_config={"fail_every": 30, "fail_on": 2})
    with pytest.raises(RemoteWorkerError, match="worker 2") as err:
        t.train()
    assert "ValueError: flaky env failed at step 30" in str(err.value)


def test_env_error_on_every_worker_names_the_env_exception(make):
    t = make(
        FixedEnv,
        env_config={"fail_every": 30, "every_instance": True},
        recreate_failed_workers=True,
    )
    with pytest.raises(RuntimeError, match="Failed to recover") as err:
        t.train()
    assert "flaky env failed at step 30" in str(err.value)


def _worker(make, **config: Any):
    t = make(FixedEnv, num_workers=0, restart_failed_sub_environments=True, **config)
    return t.workers.local_worker()


def test_restart_drops_the_faulty_episode_from_a_truncated_fragment(make):
    worker = _worker(make, env_config={"fail_every": 30})
    batch = worker.sample()
    # Steps 1..30 were the broken episode (dropped); 20 steps of the new one remain.
    assert batch.count == 20
    assert len(set(batch[SampleBatch.EPS_ID])) == 1
    assert list(batch[SampleBatch.T]) == list(range(20))
    metrics = summarize_episodes(worker.get_metrics())
    assert metrics["num_faulty_episodes"] == 1
    assert metrics["num_env_restarts"] == 1
    assert metrics["episodes_this_iter"] == 0
    assert worker.env is not None and worker.async_env.envs[0].first is False


def test_restart_drops_the_faulty_episode_from_complete_episodes(make):
    worker = _worker(
        make,
        env_config={"fail_every": 130, "length": 40},
        batch_mode="complete_episodes",
        rollout_fragment_length=100,
    )
    batch = worker.sample()
    # Episodes 1-3 end at steps 40, 80, 120; the 4th breaks at step 130.
    lengths = [b.count for b in batch.split_by_episode()]
    assert all(n == 40 for n in lengths) and len(lengths) >= 3
    assert batch[SampleBatch.DONES].sum() == len(lengths)
    batch = worker.sample()
    assert all(b.count == 40 and b[SampleBatch.T][0] == 0 for b in batch.split_by_episode())
    metrics = summarize_episodes(worker.get_metrics())
    assert metrics["num_faulty_episodes"] == 1
    assert metrics["episode_len_mean"] == 40


def test_restart_with_remote_sub_envs(make):
    # Each sub-env runs in a process of its own; a rebuilt one is a new process.
    worker = _worker(
        make, env_config={"fail_every": 30}, remote_worker_envs=True, num_envs_per_worker=2
    )
    old_pids = [env.pid for env in worker.async_env.envs]
    batch = worker.sample()
    assert batch.count == 2 * 20  # both sub-envs broke at step 30 of 50
    new_pids = [env.pid for env in worker.async_env.envs]
    assert not set(old_pids) & set(new_pids)
    assert all(_gone(pid) for pid in old_pids)
    assert summarize_episodes(worker.get_metrics())["num_env_restarts"] == 2


def test_restart_in_a_multi_agent_env(make):
    env = make_multi_agent(lambda cfg: FixedEnv(cfg))
    t = make(
        env,
        num_workers=0,
        restart_failed_sub_environments=True,
        env_config={"fail_every": 30, "num_agents": 2},
        rollout_fragment_length=50,
    )
    batch = t.workers.local_worker().sample()
    # Only `default_policy`: a SampleBatch of both agents' rows (RLlib 1.13), 20 env steps.
    assert batch.count == 40 and len(set(batch["t"].tolist())) == 20
    result = t.train()
    assert result["num_env_restarts"] >= 1


def test_restart_reported_by_train_and_not_counted_as_an_episode(make):
    t = make(
        FixedEnv,
        env_config={"fail_every": 70, "length": 40, "every_instance": True},
        restart_failed_sub_environments=True,
        rollout_fragment_length=100,
        train_batch_size=200,
    )
    result = t.train()
    assert result["num_env_restarts"] >= 2 and result["num_faulty_episodes"] >= 2
    assert result["episode_len_mean"] == 40
    assert result["num_healthy_workers"] == 2


# -- item 11: episodes of discarded fragments ---------------------------------


def test_episodes_of_discarded_fragments_are_not_counted(make):
    # 10-step episodes: each 50-step fragment holds exactly 5. Worker 2 raises in
    # its first fragment, so worker 1's first fragment is discarded with it; the
    # iteration then trains on two fragments of worker 1: 10 episodes, not 15.
    t = make(
        FixedEnv,
        env_config={"fail_every": 20, "fail_on": 2, "length": 10},
        ignore_worker_failures=True,
    )
    result = t.train()
    assert result["num_healthy_workers"] == 1
    assert result["timesteps_this_iter"] == 100
    assert result["episodes_this_iter"] == 10
