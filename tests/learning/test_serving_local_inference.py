"""PPO learns CartPole from policy-serving clients that act with local inference (RLlib
1.13's default `PolicyClient` mode): each client samples with its own copy of the policy,
reports its batches and pulls the trained weights."""

import threading
import time

import gymnasium as gym
import pytest

from corral.agents.ppo import PPOTrainer
from corral.env.policy_client import PolicyClient
from corral.env.policy_server_input import PolicyServerInput
from corral.utils.error import EnvError

THRESHOLD = 100.0


def _play(client: PolicyClient, stop: threading.Event, seed: int) -> None:
    """CartPole episodes driven like RLlib's cartpole_client.py."""
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=seed)
    try:
        while not stop.is_set():
            episode_id = client.start_episode()
            done = False
            while not done:
                action = client.get_action(episode_id, obs)
                obs, reward, terminated, truncated, _ = env.step(int(action))
                client.log_returns(episode_id, reward)
                done = terminated or truncated
            client.end_episode(episode_id, obs)
            obs, _ = env.reset()
    except EnvError:
        if not stop.is_set():
            raise


@pytest.mark.learning
def test_ppo_learns_cartpole_from_local_inference_clients():
    cartpole = gym.make("CartPole-v1")
    trainer = PPOTrainer(
        env=None,
        config={
            "num_workers": 0,
            "seed": 0,
            "observation_space": cartpole.observation_space,
            "action_space": cartpole.action_space,
            "input": lambda ioctx: PolicyServerInput(ioctx, "127.0.0.1", 0),
            "input_evaluation": [],
            "rollout_fragment_length": 200,
            "train_batch_size": 1000,
            "sgd_minibatch_size": 128,
            "num_sgd_iter": 10,
            "lr": 1e-3,
            "vf_loss_coeff": 0.01,
            "model": {"fcnet_hiddens": [64, 64]},
        },
    )
    host, port = trainer.workers.local_worker().input_reader.server_address[:2]
    clients = [
        PolicyClient(f"http://{host}:{port}", inference_mode="local", update_interval=0.5)
        for _ in range(2)
    ]
    stop = threading.Event()
    threads = [
        threading.Thread(target=_play, args=(client, stop, i), daemon=True)
        for i, client in enumerate(clients)
    ]
    for thread in threads:
        thread.start()
    curve = []
    start = time.monotonic()
    try:
        while time.monotonic() - start < 60:
            result = trainer.train()
            curve.append((result["timesteps_total"], round(result["episode_reward_mean"], 1)))
            if result["episode_reward_mean"] >= THRESHOLD or result["timesteps_total"] >= 60_000:
                break
    finally:
        stop.set()
        for client in clients:
            client.close()
        for thread in threads:
            thread.join(timeout=30)
        trainer.stop()
    print(f"local-inference PPO: {curve}")
    assert curve[-1][1] >= THRESHOLD, f"only {curve[-1]} (env steps, mean return): {curve}"
