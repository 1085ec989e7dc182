"""A bounded fault-injection run (issue 11): PPO on CartPole with 2 workers for 20
iterations while workers are SIGKILLed every 5 iterations, one is SIGSTOPped once,
and every sub-env raises every 500 steps. Training must complete, every reported
timestep must have been trained on, and the final return must be in the range of
a fault-free run with the same settings.
"""

from __future__ import annotations

import os
import random
import signal
import time

import gymnasium as gym

from corral.agents.ppo import PPOTrainer

ITERATIONS = 20
KILL_EVERY = 5  # a random worker is SIGKILLed after iterations 5, 10 and 15
STOP_AFTER = 12  # ... and one is SIGSTOPped (hung) after iteration 12
ENV_FAILS_EVERY = 500  # steps in a sub-env's life

CONFIG = {
    "num_workers": 2,
    "num_envs_per_worker": 2,
    "rollout_fragment_length": 100,
    "train_batch_size": 800,
    "sgd_minibatch_size": 200,
    "num_sgd_iter": 6,
    "lr": 1e-3,
    "model": {"fcnet_hiddens": [32, 32]},
    "seed": 1,
    "recreate_failed_workers": True,
    "restart_failed_sub_environments": True,
    # A hung worker is given up on after 3 s (the default is 600 s).
    "sample_timeout_s": 3.0,
    "worker_health_probe_timeout_s": 1.0,
    "log_level": "ERROR",
}


class FlakyCartPole(gym.Wrapper):
    """CartPole whose `step` raises on every `ENV_FAILS_EVERY`-th step of its life."""

    def __init__(self, env_context: dict | None = None) -> None:
        super().__init__(gym.make("CartPole-v1"))
        self.life = 0

    def step(self, action):
        self.life += 1
        if self.life % ENV_FAILS_EVERY == 0:
            raise RuntimeError(f"injected env failure at step {self.life}")
        return self.env.step(action)


def _gone(pid: int, within: float = 5.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "Z":
                    return True
        except FileNotFoundError:
            return True
        time.sleep(0.05)
    return False


def _run(env: object, inject: bool) -> tuple[list[dict], list[int]]:
    """Trains ITERATIONS iterations; returns the results and the pids of the victims."""
    trainer = PPOTrainer(config=CONFIG, env=env)
    rng = random.Random(0)
    victims: list[int] = []
    results: list[dict] = []
    try:
        for i in range(1, ITERATIONS + 1):
            results.append(trainer.train())
            if not inject:
                continue
            workers = trainer.workers.remote_workers()
            if i % KILL_EVERY == 0 and i < ITERATIONS:
                victim = rng.choice(workers).pid
                os.kill(victim, signal.SIGKILL)
                victims.append(victim)
            if i == STOP_AFTER:
                victim = rng.choice(workers).pid
                os.kill(victim, signal.SIGSTOP)
                victims.append(victim)
    finally:
        trainer.stop()
    return results, victims


def test_training_survives_injected_faults():
    clean, _ = _run("CartPole-v1", inject=False)
    faulty, victims = _run(FlakyCartPole, inject=True)

    assert len(faulty) == ITERATIONS
    assert [r["training_iteration"] for r in faulty] == list(range(1, ITERATIONS + 1))
    for r in faulty:
        # Every reported timestep was trained on, and none twice.
        assert r["num_env_steps_trained"] == r["num_env_steps_sampled"] == r["timesteps_total"]
        assert r["timesteps_this_iter"] >= CONFIG["train_batch_size"]
        assert r["num_healthy_workers"] == 2  # every lost worker was recreated
    assert sum(r["timesteps_this_iter"] for r in faulty) == faulty[-1]["timesteps_total"]
    # The sub-envs failed and were restarted; their broken episodes were dropped.
    assert sum(r["num_env_restarts"] for r in faulty) >= 10
    assert sum(r["num_faulty_episodes"] for r in faulty) >= 10
    # Killed and hung workers are gone, not left behind.
    assert len(victims) == 4
    assert all(_gone(pid) for pid in victims)

    clean_return = clean[-1]["episode_reward_mean"]
    faulty_return = faulty[-1]["episode_reward_mean"]
    first_return = clean[0]["episode_reward_mean"]
    assert clean_return > 2 * first_return, "the fault-free run did not learn"
    assert 0.5 * clean_return <= faulty_return <= 2.0 * clean_return, (
        f"final return {faulty_return:.1f} with faults, {clean_return:.1f} without"
    )
