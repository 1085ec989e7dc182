"""Policy serving: CartPole played by clients of a PPO trainer over HTTP.

The trainer reads its experience from a `PolicyServerInput` (no env of its own); each
client runs CartPole itself and calls `start_episode`, `get_action`, `log_returns` and
`end_episode` on a `PolicyClient`, as RLlib 1.x's `cartpole_server.py` /
`cartpole_client.py` pair did (here both in one process, the clients in threads; run them
as separate programs the same way). With `--inference-mode local` (RLlib's default) each
client acts with its own copy of the policy, reports its batches to the server and pulls
the trained weights every second; with `--inference-mode remote` the server computes every
action. The trainer learns from the clients' episodes until their mean return reaches 150.

    python examples/serving_cartpole.py                          # train to a return of 150
    python examples/serving_cartpole.py --inference-mode remote  # the server acts
    python examples/serving_cartpole.py --smoke                  # two iterations
"""

from __future__ import annotations

import argparse
import threading

import gymnasium as gym

from corral.agents.ppo import PPOTrainer
from corral.env.policy_client import PolicyClient
from corral.env.policy_server_input import PolicyServerInput
from corral.utils.error import EnvError


def play(client: PolicyClient, stop: threading.Event, seed: int) -> None:
    """A client: CartPole episodes with the policy's actions until `stop`."""
    env = gym.make("CartPole-v1")
    obs, _ = env.reset(seed=seed)
    try:
        while not stop.is_set():
            episode_id = client.start_episode(training_enabled=True)
            done = False
            while not done:
                action = client.get_action(episode_id, obs)
                obs, reward, terminated, truncated, _ = env.step(action)
                client.log_returns(episode_id, reward)
                done = terminated or truncated
            client.end_episode(episode_id, obs)
            obs, _ = env.reset()
    except EnvError:
        if not stop.is_set():  # the server closing under a request is how clients end
            raise


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="two iterations only")
    parser.add_argument("--port", type=int, default=0, help="server port (0: any free one)")
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--inference-mode", choices=["local", "remote"], default="local")
    args = parser.parse_args()

    cartpole = gym.make("CartPole-v1")
    trainer = PPOTrainer(
        env=None,
        config={
            "num_workers": 0,
            # No env: the spaces come from the config, the experience from the clients.
            "observation_space": cartpole.observation_space,
            "action_space": cartpole.action_space,
            "input": lambda ioctx: PolicyServerInput(ioctx, "127.0.0.1", args.port),
            "input_evaluation": [],
            "rollout_fragment_length": 500,
            "train_batch_size": 2000,
            "sgd_minibatch_size": 128,
            "num_sgd_iter": 10,
            "lr": 3e-4,
        },
    )
    host, port = trainer.workers.local_worker().input_reader.server_address[:2]
    print(f"Serving the policy at http://{host}:{port}")
    stop = threading.Event()
    clients = [
        PolicyClient(f"http://{host}:{port}", inference_mode=args.inference_mode, update_interval=1)
        for _ in range(args.clients)
    ]
    threads = [
        threading.Thread(target=play, args=(client, stop, i), daemon=True)
        for i, client in enumerate(clients)
    ]
    for thread in threads:
        thread.start()
    try:
        for i in range(2 if args.smoke else 100):
            result = trainer.train()
            reward = result["episode_reward_mean"]
            print(f"iteration {i + 1}: clients' mean return {reward:.1f}")
            if not args.smoke and reward >= 150:
                print("The clients' episodes reach a mean return of 150.")
                break
    finally:
        stop.set()
        for client in clients:
            client.close()  # local inference: ends its sampling thread
        trainer.stop()  # remote inference: requests waiting for an action end
        for thread in threads:
            thread.join(timeout=30)


if __name__ == "__main__":
    main()
