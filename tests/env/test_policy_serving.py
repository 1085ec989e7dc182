"""Policy serving (RLlib 1.13's PolicyClient / PolicyServerInput, remote inference): a
trainer learns from envs that ask it for actions over HTTP; messages are JSON."""

from __future__ import annotations

import threading
import urllib.request

import gymnasium as gym
import numpy as np
import pytest

from corral.agents.dqn import DQNTrainer
from corral.agents.ppo import PPOTrainer
from corral.env.policy_client import PolicyClient
from corral.env.policy_server_input import PolicyServerInput
from corral.env.serving_wire import dumps, loads
from corral.utils.error import EnvError

CARTPOLE = gym.make("CartPole-v1")


def _serving_trainer(cls, **config):
    return cls(
        env=None,
        config={
            "num_workers": 0,
            "observation_space": CARTPOLE.observation_space,
            "action_space": CARTPOLE.action_space,
            "input": lambda ioctx: PolicyServerInput(ioctx, "127.0.0.1", 0, idle_timeout=0.5),
            "input_evaluation": [],
            "rollout_fragment_length": 100,
            "train_batch_size": 200,
            **config,
        },
    )


def _address(trainer) -> str:
    host, port = trainer.workers.local_worker().input_reader.server_address[:2]
    return f"http://{host}:{port}"


def _play(address: str, stop: threading.Event, logged: bool = False, seed: int = 0) -> None:
    try:
        _episodes(address, stop, logged, seed)
    except EnvError:
        if not stop.is_set():  # (the server closing under a request is expected)
            raise


def _episodes(address: str, stop: threading.Event, logged: bool, seed: int) -> None:
    client = PolicyClient(address, inference_mode="remote")
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=seed)
    while not stop.is_set():
        eid = client.start_episode()
        while True:
            if logged:
                action = 0
                client.log_action(eid, obs, action)
            else:
                action = client.get_action(eid, obs)
            obs, reward, terminated, truncated, _ = env.step(int(action))
            client.log_returns(eid, reward, info={"note": "ok"})
            if terminated or truncated:
                client.end_episode(eid, obs)
                obs, _ = env.reset()
                break


def _with_clients(trainer, n: int = 1, logged: bool = False):
    stop = threading.Event()
    threads = [
        threading.Thread(target=_play, args=(_address(trainer), stop, logged, i), daemon=True)
        for i in range(n)
    ]
    for thread in threads:
        thread.start()
    return stop


def test_ppo_learns_from_clients_over_http():
    trainer = _serving_trainer(PPOTrainer, sgd_minibatch_size=50, num_sgd_iter=2)
    stop = _with_clients(trainer, n=2)
    try:
        results = [trainer.train() for _ in range(2)]
        assert results[-1]["timesteps_total"] >= 400
        # The clients' episodes are the trainer's metrics (CartPole: return = length).
        assert results[-1]["episodes_total"] > 0
        assert results[-1]["episode_reward_mean"] == pytest.approx(results[-1]["episode_len_mean"])
    finally:
        stop.set()
        trainer.stop()


def test_logged_actions_reach_an_off_policy_learner():
    trainer = _serving_trainer(
        DQNTrainer, rollout_fragment_length=20, train_batch_size=32, learning_starts=40
    )
    stop = _with_clients(trainer, logged=True)
    try:
        for _ in range(4):
            result = trainer.train()
        assert result["timesteps_total"] > 40
        reader = trainer.workers.local_worker().input_reader
        batch = reader.next()
        while not batch.count:  # (empty while no experience came within idle_timeout)
            batch = reader.next()
        assert (batch["actions"] == 0).all()  # logged as the client took them
    finally:
        stop.set()
        trainer.stop()


def test_client_errors_name_the_server_s_reason():
    trainer = _serving_trainer(PPOTrainer, sgd_minibatch_size=50)
    try:
        client = PolicyClient(_address(trainer), inference_mode="remote")
        with pytest.raises(EnvError, match="was never started"):
            client.log_returns("nope", 1.0)
        with pytest.raises(EnvError, match="unreachable"):
            PolicyClient("http://127.0.0.1:9", inference_mode="remote").start_episode()
        # Pickles are not read: the server answers 500 and runs nothing.
        request = urllib.request.Request(_address(trainer), data=b"\x80\x04K\x01.", method="POST")
        with pytest.raises(urllib.error.HTTPError) as info:
            urllib.request.urlopen(request, timeout=10)
        assert info.value.code == 500
    finally:
        trainer.stop()


def test_local_inference_runs_remotely_with_a_warning():
    with pytest.warns(UserWarning, match="runs as 'remote'"):
        client = PolicyClient("http://127.0.0.1:1")
    assert client.inference_mode == "remote"
    with pytest.raises(ValueError, match="inference_mode"):
        PolicyClient("http://127.0.0.1:1", inference_mode="elsewhere")


def test_wire_format_round_trips_and_refuses_objects():
    message = {
        "obs": np.arange(6, dtype=np.float32).reshape(2, 3),
        "pair": (np.int64(3), 1.5),
        "by_agent": {0: np.ones(2), "b": [1, 2]},
        "none": None,
    }
    back = loads(dumps(message))
    np.testing.assert_array_equal(back["obs"], message["obs"])
    assert back["obs"].dtype == np.float32
    assert back["pair"] == (3, 1.5) and back["none"] is None
    assert set(back["by_agent"]) == {0, "b"} and back["by_agent"]["b"] == [1, 2]
    with pytest.raises(TypeError, match="Cannot send a object"):
        dumps({"x": object()})
    with pytest.raises(ValueError, match="JSON object"):
        loads(b"[1, 2]")


def _play_two_agents(address: str, stop: threading.Event) -> None:
    client = PolicyClient(address, inference_mode="remote")
    envs = {a: gym.make("CartPole-v1") for a in (0, 1)}
    try:
        while not stop.is_set():
            obs = {a: env.reset()[0] for a, env in envs.items()}
            eid = client.start_episode()
            while obs:
                actions = client.get_action(eid, obs)
                rewards, dones, next_obs = {}, {}, {}
                for agent, action in actions.items():
                    o, r, terminated, truncated, _ = envs[agent].step(int(action))
                    rewards[agent], dones[agent] = r, terminated or truncated
                    if not dones[agent]:
                        next_obs[agent] = o
                dones["__all__"] = not next_obs
                client.log_returns(eid, rewards, multiagent_done_dict=dones)
                obs = next_obs
            client.end_episode(eid, {})
    except EnvError:
        if not stop.is_set():
            raise


def test_a_multi_agent_trainer_serves_each_agent_s_policy():
    space, actions = CARTPOLE.observation_space, CARTPOLE.action_space
    trainer = _serving_trainer(
        PPOTrainer,
        sgd_minibatch_size=50,
        num_sgd_iter=1,
        multiagent={
            "policies": {"p0": (None, space, actions, {}), "p1": (None, space, actions, {})},
            "policy_mapping_fn": lambda agent_id, episode, worker, **kw: f"p{agent_id}",
        },
    )
    stop = threading.Event()
    threading.Thread(target=_play_two_agents, args=(_address(trainer), stop), daemon=True).start()
    try:
        result = trainer.train()
        assert set(result["info"]["learner"]) == {"p0", "p1"}
        assert set(result["policy_reward_mean"]) == {"p0", "p1"}
    finally:
        stop.set()
        trainer.stop()
