"""Engine cost at equal work: corral, Stable-Baselines3 and a hand-written torch loop.

Every row trains one algorithm for a fixed number of env steps with the same
work on all three sides: the same env, networks (sizes and activations),
batch sizes, epochs or gradient steps per env step, learning-start and
target-update schedule, optimiser (Adam), one torch thread, and no
evaluation. What differs is only the engine around the arithmetic:

- `corral`: the trainer built from the row's config, `train()` until the
  row's env steps are reached (`timesteps_per_iteration` 1,000, as an RLlib
  user's reporting interval; `min_iter_time_s` 0).
- `sb3`: Stable-Baselines3 with the row's settings translated, `learn(steps)`.
- `hand`: the shortest plain program doing the same work: gymnasium envs
  stepped in a Python loop, a numpy ring buffer, the loss written out in
  torch, Adam (fused), `torch._foreach_lerp_` for soft target updates. No
  statistics, no logging, no checks: the limit for an engine on this
  machine.

Rows (`--rows`):

- `ppo`: CartPole-v1, 8 envs x 64 steps, 8 epochs of 2 minibatches of 256,
  64x64 tanh policy and value nets (separate), lr 2.5e-3, gradient clipping 0.5
  (corral's tuned example without its lr schedule).
- `a2c`: CartPole-v1, 8 envs x 5 steps (SB3's A2C default), one Adam step
  per batch, 64x64 tanh nets (separate), gradient clipping 0.5.
- `dqn`: CartPole-v1, 1 env, 256x256 ReLU Q-network (no dueling, no double
  Q), batch 64, one gradient step per env step from 1,000 env steps on,
  hard target update every 500 env steps, uniform replay.
- `dqn_prioritized`: the same with proportional prioritized replay (alpha
  0.6, beta 0.4; priorities |TD error| + 1e-6). SB3 has no prioritized
  replay: its figure is SB3's uniform DQN, and the row also reports
  `over_uniform`, corral's prioritized over corral's uniform time (target
  <= 1.25). The hand loop samples by a cumulative sum over the priorities.
- `sac`: Pendulum-v1, 1 env, 256x256 actor and twin critics, batch 256, one
  gradient step per env step from 100 env steps on, tau 0.005, automatic
  entropy tuning.
- `td3`: Pendulum-v1, 1 env, 256x256 actor and twin critics, batch 256, one
  critic step per env step from 100 on, actor and target updates every 2
  (policy delay), target smoothing noise 0.2 clipped at 0.5, Gaussian
  exploration 0.1.

Off-policy rows act and train step by step on all sides
(`rollout_fragment_length` 1 in corral, SB3's `train_freq` 1,
`gradient_steps` 1), unless `--fragment F`: F env steps then F gradient steps.

Each run is a fresh interpreter; runs alternate between the three sides row
by row (the order rotates each repeat); medians over `--repeats`. A child
imports torch and gymnasium first (untimed, the same for all), then times
`setup_s` (importing the library and building the trainer / model / nets and
optimisers: torch's first optimiser construction imports its compiler stack,
about 1 s here, on the SB3 and hand-loop sides; corral's optimisers import it only
when something compiles, `corral.utils.lazy_dynamo`) and `train_s` (the training
loop, which no side's compiler import is in). Ratios are
corral / reference for `train_s` (the engine cost the targets are about), for
`train_s + setup_s`, and for `train_cpu_s` (the training loop's CPU time: the
figure a loaded machine inflates least).

`--torch-compile [BACKEND]` runs corral with `torch_compile_learner` (dynamo backend
BACKEND, default inductor); its compile time is in `train_s` (the loss is compiled on
its first update, in the first `train()`).

Usage:
    python benchmarks/equal_work.py                       # all rows, 3 repeats
    python benchmarks/equal_work.py --rows sac td3 --repeats 5
    python benchmarks/equal_work.py --quick               # smoke test: short runs, 1 repeat
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from types import SimpleNamespace
from typing import Any

from _common import emit, log, machine_info, median, ratio, run_child

IMPLS = ("corral", "sb3", "hand")

# Settings shared by all three sides of a row.
PPO = {
    "env": "CartPole-v1",
    "n_envs": 8,
    "n_steps": 64,
    "minibatch": 256,
    "epochs": 8,
    "lr": 2.5e-3,
    "adam_eps": 1e-5,
    "gamma": 0.98,
    "lambda": 0.8,
    "clip": 0.2,
    "vf_coeff": 0.5,
    "grad_clip": 0.5,
    "hiddens": [64, 64],
}
A2C = {
    "env": "CartPole-v1",
    "n_envs": 8,
    "n_steps": 5,
    "lr": 7e-4,
    "gamma": 0.99,
    "lambda": 1.0,
    "vf_coeff": 0.5,
    "entropy_coeff": 0.0,
    "grad_clip": 0.5,
    "hiddens": [64, 64],
}
DQN = {
    "env": "CartPole-v1",
    "hiddens": [256, 256],
    "batch": 64,
    "buffer": 50_000,
    "learning_starts": 1000,
    "target_update": 500,
    "lr": 1e-4,
    "gamma": 0.99,
    "grad_clip": 10.0,
    "eps_final": 0.05,
    "eps_steps": 5000,
    "alpha": 0.6,
    "beta": 0.4,
    "prio_eps": 1e-6,
}
SAC = {
    "env": "Pendulum-v1",
    "hiddens": [256, 256],
    "batch": 256,
    "buffer": 1_000_000,
    "learning_starts": 100,
    "lr": 3e-4,
    "gamma": 0.99,
    "tau": 0.005,
}
TD3 = {
    "env": "Pendulum-v1",
    "hiddens": [256, 256],
    "batch": 256,
    "buffer": 1_000_000,
    "learning_starts": 100,
    "lr": 1e-3,
    "gamma": 0.99,
    "tau": 0.005,
    "policy_delay": 2,
    "target_noise": 0.2,
    "target_noise_clip": 0.5,
    "explore_std": 0.1,
}
# Env steps per run (full, --quick).
STEPS = {
    "ppo": (16_384, 1024),
    "a2c": (20_000, 1000),
    "dqn": (6_000, 1200),
    "dqn_prioritized": (6_000, 1200),
    "sac": (1_000, 300),
    "td3": (2_000, 300),
}
SETTINGS = {
    "ppo": PPO,
    "a2c": A2C,
    "dqn": DQN,
    "dqn_prioritized": DQN,
    "sac": SAC,
    "td3": TD3,
}
TARGETS = {"ppo": 0.7, "a2c": 0.7, "dqn": 0.7, "dqn_prioritized": None, "sac": 0.75, "td3": 0.75}


# -- corral ---------------------------------------------------------------------


def corral_config(row: str, fragment: int, steps: int) -> tuple[str, str, dict[str, Any]]:
    """(trainer name, env id, config) of a row that runs `steps` env steps."""
    common = {
        "num_workers": 0,
        "seed": 0,
        "log_level": "ERROR",
        # RLlib 1.13's names of `min_iter_time_s` / `timesteps_per_iteration`.
        "min_time_s_per_reporting": 0,
        # Reports every 1,000 env steps (one report when `steps` is not a multiple).
        "min_sample_timesteps_per_reporting": 1000 if steps % 1000 == 0 else steps,
    }
    if row == "ppo":
        s = PPO
        return (
            "PPO",
            s["env"],
            {
                **common,
                "num_envs_per_worker": s["n_envs"],
                "rollout_fragment_length": s["n_steps"],
                "train_batch_size": s["n_envs"] * s["n_steps"],
                "sgd_minibatch_size": s["minibatch"],
                "num_sgd_iter": s["epochs"],
                "lr": s["lr"],
                "optimizer": {"eps": s["adam_eps"]},
                "gamma": s["gamma"],
                "lambda": s["lambda"],
                "clip_param": s["clip"],
                "kl_coeff": 0.0,
                "entropy_coeff": 0.0,
                "vf_loss_coeff": s["vf_coeff"],
                "vf_clip_param": 1e4,
                "grad_clip": s["grad_clip"],
                "min_sample_timesteps_per_reporting": 0,
                "model": {
                    "fcnet_hiddens": s["hiddens"],
                    "fcnet_activation": "tanh",
                    "vf_share_layers": False,
                },
            },
        )
    if row == "a2c":
        s = A2C
        return (
            "A2C",
            s["env"],
            {
                **common,
                "num_envs_per_worker": s["n_envs"],
                "rollout_fragment_length": s["n_steps"],
                "train_batch_size": s["n_envs"] * s["n_steps"],
                "lr": s["lr"],
                "gamma": s["gamma"],
                "lambda": s["lambda"],
                "vf_loss_coeff": s["vf_coeff"],
                "entropy_coeff": s["entropy_coeff"],
                "grad_clip": s["grad_clip"],
                "model": {
                    "fcnet_hiddens": s["hiddens"],
                    "fcnet_activation": "tanh",
                    "vf_share_layers": False,
                },
            },
        )
    off_policy = {
        **common,
        "num_envs_per_worker": 1,
        "rollout_fragment_length": fragment,
        "batch_mode": "truncate_episodes",
    }
    if row in ("dqn", "dqn_prioritized"):
        s = DQN
        return (
            "DQN",
            s["env"],
            {
                **off_policy,
                "model": {"fcnet_hiddens": s["hiddens"], "fcnet_activation": "relu"},
                "hiddens": [],
                "dueling": False,
                "double_q": False,
                "train_batch_size": s["batch"],
                "training_intensity": s["batch"],  # one gradient step per env step
                "replay_buffer_config": {"type": "MultiAgentReplayBuffer", "capacity": s["buffer"]},
                "prioritized_replay": row == "dqn_prioritized",
                "prioritized_replay_alpha": s["alpha"],
                "prioritized_replay_beta": s["beta"],
                "final_prioritized_replay_beta": s["beta"],
                "prioritized_replay_eps": s["prio_eps"],
                "learning_starts": s["learning_starts"],
                "target_network_update_freq": s["target_update"],
                "lr": s["lr"],
                "gamma": s["gamma"],
                "grad_clip": s["grad_clip"],
                "exploration_config": {
                    "type": "EpsilonGreedy",
                    "initial_epsilon": 1.0,
                    "final_epsilon": s["eps_final"],
                    "epsilon_timesteps": s["eps_steps"],
                },
            },
        )
    if row == "sac":
        s = SAC
        net = {"fcnet_hiddens": s["hiddens"], "fcnet_activation": "relu"}
        return (
            "SAC",
            s["env"],
            {
                **off_policy,
                "Q_model": net,
                "policy_model": net,
                "twin_q": True,
                "train_batch_size": s["batch"],
                "training_intensity": s["batch"],
                "replay_buffer_config": {"type": "MultiAgentReplayBuffer", "capacity": s["buffer"]},
                "learning_starts": s["learning_starts"],
                "optimization": {
                    "actor_learning_rate": s["lr"],
                    "critic_learning_rate": s["lr"],
                    "entropy_learning_rate": s["lr"],
                },
                "gamma": s["gamma"],
                "tau": s["tau"],
                "initial_alpha": 1.0,
                "target_entropy": "auto",
            },
        )
    if row == "td3":
        s = TD3
        return (
            "TD3",
            s["env"],
            {
                **off_policy,
                "actor_hiddens": s["hiddens"],
                "critic_hiddens": s["hiddens"],
                "train_batch_size": s["batch"],
                "training_intensity": s["batch"],
                "replay_buffer_config": {"type": "MultiAgentReplayBuffer", "capacity": s["buffer"]},
                "learning_starts": s["learning_starts"],
                "actor_lr": s["lr"],
                "critic_lr": s["lr"],
                "gamma": s["gamma"],
                "tau": s["tau"],
                "policy_delay": s["policy_delay"],
                "target_noise": s["target_noise"],
                "target_noise_clip": s["target_noise_clip"],
                "exploration_config": {
                    "type": "GaussianNoise",
                    "random_timesteps": s["learning_starts"],
                    "stddev": s["explore_std"],
                    "initial_scale": 1.0,
                    "final_scale": 1.0,
                    "scale_timesteps": 1,
                },
            },
        )
    raise ValueError(f"unknown row {row!r}")


# `--torch-compile BACKEND` (set in the child): corral's `torch_compile_learner`.
TORCH_COMPILE: str | None = None


def run_corral(row: str, steps: int, fragment: int) -> dict[str, Any]:
    name, env_id, config = corral_config(row, fragment, steps)
    if TORCH_COMPILE:
        config["torch_compile_learner"] = True
        config["torch_compile_learner_dynamo_backend"] = TORCH_COMPILE
    t0 = time.perf_counter()
    from corral.agents.registry import get_trainer_class

    trainer = get_trainer_class(name)(config=config, env=env_id)
    # corral builds its learners (and so its optimisers) on first use, in the first
    # `train()`; build them here, so that `setup_s` holds what it holds on the other
    # sides: the optimisers (whose first construction imports torch's compiler stack
    # there, not here).
    trainer.learner_group  # noqa: B018
    setup_s = time.perf_counter() - t0
    t0, c0 = time.perf_counter(), time.process_time()
    result: dict[str, Any] = {}
    while int(result.get("timesteps_total", 0)) < steps:
        result = trainer.train()
    train_s = time.perf_counter() - t0
    train_cpu_s = time.process_time() - c0
    trainer.stop()
    return {
        "setup_s": setup_s,
        "train_s": train_s,
        "train_cpu_s": train_cpu_s,
        "env_steps": int(result["timesteps_total"]),
        "iterations": int(result["training_iteration"]),
    }


# -- Stable-Baselines3 --------------------------------------------------------------


def _sb3_actor_critic_kwargs(s: dict[str, Any], fragment: int) -> dict[str, Any]:
    """SB3's arguments shared by the SAC and TD3 rows: `fragment` env steps, then as many
    gradient steps."""
    return {
        "policy": "MlpPolicy",
        "env": s["env"],
        "learning_rate": s["lr"],
        "buffer_size": s["buffer"],
        "learning_starts": s["learning_starts"],
        "batch_size": s["batch"],
        "tau": s["tau"],
        "gamma": s["gamma"],
        "train_freq": fragment,
        "gradient_steps": fragment,
        "policy_kwargs": {"net_arch": s["hiddens"]},
        "seed": 0,
        "device": "cpu",
    }


def run_sb3(row: str, steps: int, fragment: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    import stable_baselines3 as sb3
    import torch
    from stable_baselines3.common.env_util import make_vec_env

    if row == "ppo":
        s = PPO
        model = sb3.PPO(
            "MlpPolicy",
            make_vec_env(s["env"], n_envs=s["n_envs"], seed=0),
            n_steps=s["n_steps"],
            batch_size=s["minibatch"],
            n_epochs=s["epochs"],
            learning_rate=s["lr"],
            gamma=s["gamma"],
            gae_lambda=s["lambda"],
            clip_range=s["clip"],
            ent_coef=0.0,
            vf_coef=s["vf_coeff"],
            max_grad_norm=s["grad_clip"],
            policy_kwargs={"net_arch": s["hiddens"], "optimizer_kwargs": {"eps": s["adam_eps"]}},
            seed=0,
            device="cpu",
        )
    elif row == "a2c":
        s = A2C
        model = sb3.A2C(
            "MlpPolicy",
            make_vec_env(s["env"], n_envs=s["n_envs"], seed=0),
            n_steps=s["n_steps"],
            learning_rate=s["lr"],
            gamma=s["gamma"],
            gae_lambda=s["lambda"],
            ent_coef=s["entropy_coeff"],
            vf_coef=s["vf_coeff"],
            max_grad_norm=s["grad_clip"],
            # Adam like corral and the hand loop (SB3's A2C default is RMSprop).
            policy_kwargs={"net_arch": s["hiddens"], "optimizer_class": torch.optim.Adam},
            seed=0,
            device="cpu",
        )
    elif row in ("dqn", "dqn_prioritized"):
        s = DQN
        model = sb3.DQN(
            "MlpPolicy",
            s["env"],
            learning_rate=s["lr"],
            buffer_size=s["buffer"],
            learning_starts=s["learning_starts"],
            batch_size=s["batch"],
            gamma=s["gamma"],
            train_freq=fragment,
            gradient_steps=fragment,
            target_update_interval=s["target_update"],
            exploration_fraction=s["eps_steps"] / steps,
            exploration_final_eps=s["eps_final"],
            max_grad_norm=s["grad_clip"],
            policy_kwargs={"net_arch": s["hiddens"]},
            seed=0,
            device="cpu",
        )
    elif row == "sac":
        model = sb3.SAC(**_sb3_actor_critic_kwargs(SAC, fragment))
    elif row == "td3":
        import numpy as np
        from stable_baselines3.common.noise import NormalActionNoise

        s = TD3
        model = sb3.TD3(
            **_sb3_actor_critic_kwargs(s, fragment),
            policy_delay=s["policy_delay"],
            target_policy_noise=s["target_noise"],
            target_noise_clip=s["target_noise_clip"],
            action_noise=NormalActionNoise(np.zeros(1), s["explore_std"] * np.ones(1)),
        )
    else:
        raise ValueError(f"unknown row {row!r}")
    setup_s = time.perf_counter() - t0
    t0, c0 = time.perf_counter(), time.process_time()
    model.learn(total_timesteps=steps)
    train_s = time.perf_counter() - t0
    train_cpu_s = time.process_time() - c0
    return {
        "setup_s": setup_s,
        "train_s": train_s,
        "train_cpu_s": train_cpu_s,
        "env_steps": int(model.num_timesteps),
        "gradient_steps": int(getattr(model, "_n_updates", 0)),
        "sb3_version": sb3.__version__,
    }


# -- the hand-written loops ---------------------------------------------------------


def _mlp(sizes: list[int], activation: Any) -> Any:
    from torch import nn

    layers: list[Any] = []
    for i in range(len(sizes) - 1):
        layers.append(nn.Linear(sizes[i], sizes[i + 1]))
        if i < len(sizes) - 2:
            layers.append(activation())
    return nn.Sequential(*layers)


def _adam(params: Any, lr: float, eps: float = 1e-8) -> Any:
    import torch

    return torch.optim.Adam(list(params), lr=lr, eps=eps, fused=True)


def _step_zero_grad(optimizer: Any, loss: Any, params: list | None = None, clip: float = 0) -> None:
    import torch

    optimizer.zero_grad(set_to_none=True)
    loss.backward()
    if clip:
        torch.nn.utils.clip_grad_norm_(params, clip)
    optimizer.step()


class _Ring:
    """A numpy ring buffer of transitions (uniform sampling with replacement)."""

    def __init__(self, capacity: int, obs_dim: int, act_shape: tuple, act_dtype: Any) -> None:
        import numpy as np

        self.capacity, self.size, self.next = capacity, 0, 0
        self.obs = np.zeros((capacity, obs_dim), np.float32)
        self.next_obs = np.zeros((capacity, obs_dim), np.float32)
        self.actions = np.zeros((capacity, *act_shape), act_dtype)
        self.rewards = np.zeros(capacity, np.float32)
        self.terminated = np.zeros(capacity, np.float32)

    def add(self, obs: Any, action: Any, reward: float, next_obs: Any, terminated: bool) -> int:
        i = self.next
        self.obs[i], self.actions[i], self.rewards[i] = obs, action, reward
        self.next_obs[i], self.terminated[i] = next_obs, terminated
        self.next = (i + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)
        return i

    def take(self, idx: Any) -> tuple:
        import torch

        return tuple(
            torch.from_numpy(col[idx])
            for col in (self.obs, self.actions, self.rewards, self.next_obs, self.terminated)
        )


def _gae(rewards: Any, values: Any, dones: Any, last_values: Any, gamma: float, lam: float):
    """(advantages, value targets) for [T, N] arrays (dones: the episode ended at t)."""
    import numpy as np

    adv = np.zeros_like(rewards)
    running = np.zeros(rewards.shape[1], np.float32)
    for t in reversed(range(len(rewards))):
        next_v = last_values if t == len(rewards) - 1 else values[t + 1]
        not_done = 1.0 - dones[t]
        delta = rewards[t] + gamma * next_v * not_done - values[t]
        running = delta + gamma * lam * not_done * running
        adv[t] = running
    return adv, adv + values


def _vector_rollout(envs: list, obs: Any, pi: Any, vf: Any, n_steps: int, gamma: float):
    """n_steps x len(envs) steps with a categorical policy; resets finished envs
    (a truncated episode is bootstrapped with V of its last observation)."""
    import numpy as np
    import torch

    n = len(envs)
    obs_buf = np.zeros((n_steps, n, obs.shape[1]), np.float32)
    act_buf = np.zeros((n_steps, n), np.int64)
    logp_buf = np.zeros((n_steps, n), np.float32)
    val_buf = np.zeros((n_steps, n), np.float32)
    rew_buf = np.zeros((n_steps, n), np.float32)
    done_buf = np.zeros((n_steps, n), np.float32)
    for t in range(n_steps):
        with torch.inference_mode():
            x = torch.from_numpy(obs)
            logits = pi(x)
            values = vf(x).squeeze(-1)
            actions = torch.multinomial(torch.softmax(logits, -1), 1).squeeze(-1)
            logp = torch.log_softmax(logits, -1).gather(-1, actions.unsqueeze(-1)).squeeze(-1)
        obs_buf[t], act_buf[t], logp_buf[t], val_buf[t] = obs, actions, logp, values
        for i, env in enumerate(envs):
            o, r, term, trunc, _ = env.step(int(act_buf[t, i]))
            if trunc and not term:
                with torch.inference_mode():
                    r += gamma * float(vf(torch.from_numpy(o[None].astype(np.float32))))
            if term or trunc:
                o, _ = env.reset()
            rew_buf[t, i], done_buf[t, i] = r, term or trunc
            obs[i] = o
    with torch.inference_mode():
        last_values = vf(torch.from_numpy(obs)).squeeze(-1).numpy()
    return obs_buf, act_buf, logp_buf, val_buf, rew_buf, done_buf, last_values


def hand_on_policy(row: str, steps: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    import gymnasium as gym
    import numpy as np
    import torch
    from torch import nn

    s = PPO if row == "ppo" else A2C
    torch.manual_seed(0)
    envs = [gym.make(s["env"]) for _ in range(s["n_envs"])]
    obs = np.stack([env.reset(seed=i)[0] for i, env in enumerate(envs)]).astype(np.float32)
    obs_dim, n_act = obs.shape[1], envs[0].action_space.n
    pi = _mlp([obs_dim, *s["hiddens"], n_act], nn.Tanh)
    vf = _mlp([obs_dim, *s["hiddens"], 1], nn.Tanh)
    params = [*pi.parameters(), *vf.parameters()]
    optimizer = _adam(params, s["lr"], s.get("adam_eps", 1e-8))
    setup_s = time.perf_counter() - t0
    t0, c0 = time.perf_counter(), time.process_time()
    done_steps = updates = 0
    batch_steps = s["n_envs"] * s["n_steps"]
    while done_steps < steps:
        o, a, old_logp, v, r, d, last_v = _vector_rollout(
            envs, obs, pi, vf, s["n_steps"], s["gamma"]
        )
        adv, targets = _gae(r, v, d, last_v, s["gamma"], s["lambda"])
        done_steps += batch_steps
        b_obs = torch.from_numpy(o.reshape(batch_steps, -1))
        b_act = torch.from_numpy(a.reshape(-1))
        b_logp = torch.from_numpy(old_logp.reshape(-1))
        b_adv = torch.from_numpy(adv.reshape(-1))
        b_targets = torch.from_numpy(targets.reshape(-1))
        if row == "a2c":
            logp_all = torch.log_softmax(pi(b_obs), -1)
            logp = logp_all.gather(-1, b_act.unsqueeze(-1)).squeeze(-1)
            values = vf(b_obs).squeeze(-1)
            entropy = -(logp_all.exp() * logp_all).sum(-1)
            loss = (
                -(logp * b_adv).sum()
                + s["vf_coeff"] * 0.5 * ((values - b_targets) ** 2).sum()
                - s["entropy_coeff"] * entropy.sum()
            )
            _step_zero_grad(optimizer, loss, params, s["grad_clip"])
            updates += 1
            continue
        b_adv = (b_adv - b_adv.mean()) / (b_adv.std() + 1e-8)
        for _ in range(s["epochs"]):
            order = torch.randperm(batch_steps)
            for i in range(batch_steps // s["minibatch"]):
                idx = order[i * s["minibatch"] : (i + 1) * s["minibatch"]]
                logp = (
                    torch.log_softmax(pi(b_obs[idx]), -1)
                    .gather(-1, b_act[idx].unsqueeze(-1))
                    .squeeze(-1)
                )
                ratio_ = torch.exp(logp - b_logp[idx])
                mb_adv = b_adv[idx]
                surrogate = torch.minimum(
                    mb_adv * ratio_, mb_adv * ratio_.clamp(1 - s["clip"], 1 + s["clip"])
                )
                vf_loss = (vf(b_obs[idx]).squeeze(-1) - b_targets[idx]) ** 2
                loss = (-surrogate + s["vf_coeff"] * vf_loss).mean()
                _step_zero_grad(optimizer, loss, params, s["grad_clip"])
                updates += 1
    train_s = time.perf_counter() - t0
    train_cpu_s = time.process_time() - c0
    return {
        "setup_s": setup_s,
        "train_s": train_s,
        "train_cpu_s": train_cpu_s,
        "env_steps": done_steps,
        "gradient_steps": updates,
    }


class HandDQN:
    """The hand-written DQN of the `dqn` / `dqn_prioritized` rows: a Q-network and its
    target, a numpy ring buffer (priorities for `dqn_prioritized`), fused Adam, one
    CartPole env. `act_and_store(t)` is one env step at global step `t` (epsilon-greedy,
    no forward pass on exploring steps); `update()` one gradient step on 64 rows."""

    def __init__(self, row: str) -> None:
        import gymnasium as gym
        import numpy as np
        import torch
        from torch import nn

        s = self.s = DQN
        self.prioritized = row == "dqn_prioritized"
        torch.manual_seed(0)
        self.rng = np.random.default_rng(0)
        self.env = gym.make(s["env"])
        self.obs, _ = self.env.reset(seed=0)
        obs_dim, self.n_act = self.obs.shape[0], self.env.action_space.n
        self.q = _mlp([obs_dim, *s["hiddens"], self.n_act], nn.ReLU)
        self.q_target = _mlp([obs_dim, *s["hiddens"], self.n_act], nn.ReLU)
        self.q_target.load_state_dict(self.q.state_dict())
        self.q_target.requires_grad_(False)
        self.params = list(self.q.parameters())
        self.optimizer = _adam(self.params, s["lr"])
        self.buf = _Ring(s["buffer"], obs_dim, (), np.int64)
        self.priorities = np.zeros(s["buffer"], np.float64)  # p^alpha per row
        self.max_priority = 1.0
        self.rows = torch.arange(s["batch"])

    def act_and_store(self, t: int) -> None:
        import torch

        s = self.s
        eps = max(s["eps_final"], 1.0 - (1.0 - s["eps_final"]) * t / s["eps_steps"])
        if self.rng.random() < eps:
            action = int(self.rng.integers(self.n_act))
        else:
            with torch.inference_mode():
                action = int(self.q(torch.from_numpy(self.obs)).argmax())
        next_obs, reward, term, trunc, _ = self.env.step(action)
        i = self.buf.add(self.obs, action, reward, next_obs, term)
        if self.prioritized:
            self.priorities[i] = self.max_priority ** s["alpha"]
        self.obs = next_obs
        if term or trunc:
            self.obs, _ = self.env.reset()

    def update(self) -> None:
        import torch
        from torch import nn

        s = self.s
        idx, weights = self.draw()
        o, a, r, o2, d = self.buf.take(idx)
        with torch.no_grad():
            target = r + s["gamma"] * (1.0 - d) * self.q_target(o2).max(-1).values
        td = self.q(o)[self.rows, a] - target
        per_row = nn.functional.huber_loss(td, torch.zeros_like(td), reduction="none")
        loss = (weights * per_row).mean() if weights is not None else per_row.mean()
        _step_zero_grad(self.optimizer, loss, self.params, s["grad_clip"])
        if self.prioritized:
            self.reprioritize(idx, td.detach().numpy())

    def draw(self) -> tuple[Any, Any]:
        """A train batch's rows: (indexes, importance weights as a tensor, or None
        with uniform replay)."""
        import numpy as np
        import torch

        s, size, priorities = self.s, self.buf.size, self.priorities
        if not self.prioritized:
            return self.rng.integers(0, size, s["batch"]), None
        cum = np.cumsum(priorities[:size])
        idx = np.searchsorted(cum, self.rng.random(s["batch"]) * cum[-1], side="right")
        idx = np.minimum(idx, size - 1)
        p = priorities[idx] / cum[-1]
        p_min = priorities[:size].min() / cum[-1]
        return idx, torch.from_numpy(((p / p_min) ** (-s["beta"])).astype(np.float32))

    def reprioritize(self, idx: Any, td: Any) -> None:
        """The rows' new priorities from their TD errors (`td`, numpy)."""
        import numpy as np

        new = np.abs(td).astype(np.float64) + self.s["prio_eps"]
        self.priorities[idx] = new ** self.s["alpha"]
        self.max_priority = max(self.max_priority, float(new.max()))

    def replay(self, td: Any) -> None:
        """The replay bookkeeping of one gradient step without the gradient step: a
        train batch drawn and taken, and (prioritized) new priorities from `td`."""
        idx, _ = self.draw()
        self.buf.take(idx)
        if self.prioritized:
            self.reprioritize(idx, td)

    def update_target(self) -> None:
        self.q_target.load_state_dict(self.q.state_dict())


def hand_dqn(row: str, steps: int, fragment: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    s = DQN
    dqn = HandDQN(row)
    setup_s = time.perf_counter() - t0
    t0, c0 = time.perf_counter(), time.process_time()
    updates = 0
    pending = 0
    for t in range(steps):
        dqn.act_and_store(t)
        if t + 1 >= s["learning_starts"]:
            pending += 1
        if pending < fragment:
            continue
        for _ in range(pending):
            dqn.update()
            updates += 1
        pending = 0
        if (t + 1) % s["target_update"] == 0:
            dqn.update_target()
    train_s = time.perf_counter() - t0
    train_cpu_s = time.process_time() - c0
    return {
        "setup_s": setup_s,
        "train_s": train_s,
        "train_cpu_s": train_cpu_s,
        "env_steps": steps,
        "gradient_steps": updates,
    }


class _SquashedGaussianActor:
    """SAC's actor: an MLP to (mean, log std), tanh-squashed Gaussian samples."""

    LOG_2PI = math.log(2 * math.pi)

    def __init__(self, obs_dim: int, act_dim: int, hiddens: list[int]) -> None:
        from torch import nn

        self.net = _mlp([obs_dim, *hiddens, 2 * act_dim], nn.ReLU)

    def sample(self, obs: Any) -> tuple[Any, Any]:
        import torch
        from torch.nn.functional import softplus

        mean, log_std = self.net(obs).chunk(2, -1)
        log_std = log_std.clamp(-20, 2)
        std = log_std.exp()
        noise = torch.randn_like(mean)
        u = mean + std * noise
        logp = (-0.5 * noise.pow(2) - log_std - 0.5 * self.LOG_2PI).sum(-1)
        # log det of tanh's Jacobian: log(1 - tanh(u)^2) = 2 (log 2 - u - softplus(-2u)).
        logp = logp - (2 * (math.log(2) - u - softplus(-2 * u))).sum(-1)
        return torch.tanh(u), logp


class HandContinuous:
    """The hand-written SAC or TD3 of the `sac` / `td3` rows: an actor, two critic MLPs
    and their targets, a numpy ring buffer, fused Adam, `torch._foreach_lerp_` for the
    soft target updates, one Pendulum env. `act_and_store(t)` is one env step at global
    step `t` (uniform random actions before `learning_starts`); `update()` one gradient
    step on a `batch`-row replay sample (TD3: the actor and targets every
    `policy_delay`-th)."""

    def __init__(self, row: str) -> None:
        import copy

        import gymnasium as gym
        import numpy as np
        import torch
        from torch import nn

        s = self.s = SETTINGS[row]
        self.sac = row == "sac"
        torch.manual_seed(0)
        self.rng = np.random.default_rng(0)
        self.env = gym.make(s["env"])
        self.obs, _ = self.env.reset(seed=0)
        obs_dim, self.act_dim = self.obs.shape[0], self.env.action_space.shape[0]
        self.scale = float(self.env.action_space.high[0])  # actions live in [-1, 1] inside
        self.critics = [_mlp([obs_dim + self.act_dim, *s["hiddens"], 1], nn.ReLU) for _ in range(2)]
        self.critic_params = [p for c in self.critics for p in c.parameters()]
        self.critic_targets = copy.deepcopy(self.critics)
        self.target_params = [p for c in self.critic_targets for p in c.parameters()]
        for p in self.target_params:
            p.requires_grad_(False)
        self.critic_opt = _adam(self.critic_params, s["lr"])
        if self.sac:
            self.actor = _SquashedGaussianActor(obs_dim, self.act_dim, s["hiddens"])
            self.actor_opt = _adam(self.actor.net.parameters(), s["lr"])
            self.log_alpha = torch.zeros(1, requires_grad=True)
            self.alpha_opt = _adam([self.log_alpha], s["lr"])
            self.target_entropy = -float(self.act_dim)
        else:
            self.actor_net = nn.Sequential(
                _mlp([obs_dim, *s["hiddens"], self.act_dim], nn.ReLU), nn.Tanh()
            )
            self.actor_target = copy.deepcopy(self.actor_net).requires_grad_(False)
            self.actor_opt = _adam(self.actor_net.parameters(), s["lr"])
            self.actor_params = list(self.actor_net.parameters())
            self.actor_target_params = list(self.actor_target.parameters())
        self.buf = _Ring(s["buffer"], obs_dim, (self.act_dim,), np.float32)
        self.updates = 0

    def _q_both(self, nets: list, o: Any, a: Any) -> tuple[Any, Any]:
        import torch

        x = torch.cat([o, a], -1)
        return nets[0](x).squeeze(-1), nets[1](x).squeeze(-1)

    def act_and_store(self, t: int) -> None:
        import numpy as np
        import torch

        s, rng = self.s, self.rng
        if t < s["learning_starts"]:
            action = rng.uniform(-1.0, 1.0, self.act_dim).astype(np.float32)
        else:
            with torch.inference_mode():
                x = torch.from_numpy(self.obs.astype(np.float32))
                if self.sac:
                    action = self.actor.sample(x)[0].numpy()
                else:
                    action = self.actor_net(x).numpy()
                    action += rng.normal(0.0, s["explore_std"], self.act_dim).astype(np.float32)
                    action = action.clip(-1.0, 1.0)
        next_obs, reward, term, trunc, _ = self.env.step(action * self.scale)
        self.buf.add(self.obs, action, reward, next_obs, term)
        self.obs = next_obs
        if term or trunc:
            self.obs, _ = self.env.reset()

    def update(self) -> None:
        batch = self.buf.take(self.draw())
        self.updates += 1
        if self.sac:
            self._sac_update(*batch)
        else:
            self._td3_update(*batch)

    def draw(self) -> Any:
        """A train batch's row indexes (uniform replay)."""
        return self.rng.integers(0, self.buf.size, self.s["batch"])

    def replay(self, td: Any = None) -> None:
        """The replay bookkeeping of one gradient step without it: a train batch drawn
        and taken (uniform replay: no priorities, `td` unused)."""
        self.buf.take(self.draw())

    def _sac_update(self, o: Any, a: Any, r: Any, o2: Any, d: Any) -> None:
        import torch

        s, actor = self.s, self.actor
        alpha = self.log_alpha.detach().exp()
        with torch.no_grad():
            a2, logp2 = actor.sample(o2)
            q1_t, q2_t = self._q_both(self.critic_targets, o2, a2)
            y = r + s["gamma"] * (1.0 - d) * (torch.minimum(q1_t, q2_t) - alpha * logp2)
        q1, q2 = self._q_both(self.critics, o, a)
        _step_zero_grad(
            self.critic_opt, 0.5 * ((q1 - y) ** 2).mean() + 0.5 * ((q2 - y) ** 2).mean()
        )
        a_pi, logp = actor.sample(o)
        q1_pi, q2_pi = self._q_both(self.critics, o, a_pi)
        _step_zero_grad(self.actor_opt, (alpha * logp - torch.minimum(q1_pi, q2_pi)).mean())
        _step_zero_grad(
            self.alpha_opt, -(self.log_alpha * (logp.detach() + self.target_entropy)).mean()
        )
        with torch.no_grad():
            torch._foreach_lerp_(self.target_params, self.critic_params, s["tau"])

    def _td3_update(self, o: Any, a: Any, r: Any, o2: Any, d: Any) -> None:
        import torch

        s = self.s
        with torch.no_grad():
            noise = (torch.randn_like(a) * s["target_noise"]).clamp(
                -s["target_noise_clip"], s["target_noise_clip"]
            )
            a2 = (self.actor_target(o2) + noise).clamp(-1.0, 1.0)
            q1_t, q2_t = self._q_both(self.critic_targets, o2, a2)
            y = r + s["gamma"] * (1.0 - d) * torch.minimum(q1_t, q2_t)
        q1, q2 = self._q_both(self.critics, o, a)
        _step_zero_grad(self.critic_opt, ((q1 - y) ** 2).mean() + ((q2 - y) ** 2).mean())
        if self.updates % s["policy_delay"] == 0:
            x = torch.cat([o, self.actor_net(o)], -1)
            _step_zero_grad(self.actor_opt, -self.critics[0](x).mean())
            with torch.no_grad():
                torch._foreach_lerp_(self.target_params, self.critic_params, s["tau"])
                torch._foreach_lerp_(self.actor_target_params, self.actor_params, s["tau"])


def hand_continuous(row: str, steps: int, fragment: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    agent = HandContinuous(row)
    setup_s = time.perf_counter() - t0
    t0, c0 = time.perf_counter(), time.process_time()
    pending = 0
    for t in range(steps):
        agent.act_and_store(t)
        if t + 1 >= agent.s["learning_starts"]:
            pending += 1
        if pending < fragment:
            continue
        for _ in range(pending):
            agent.update()
        pending = 0
    train_s = time.perf_counter() - t0
    train_cpu_s = time.process_time() - c0
    return {
        "setup_s": setup_s,
        "train_s": train_s,
        "train_cpu_s": train_cpu_s,
        "env_steps": steps,
        "gradient_steps": agent.updates,
    }


def run_hand(row: str, steps: int, fragment: int) -> dict[str, Any]:
    if row in ("ppo", "a2c"):
        return hand_on_policy(row, steps)
    if row in ("dqn", "dqn_prioritized"):
        return hand_dqn(row, steps, fragment)
    return hand_continuous(row, steps, fragment)


RUNNERS = {"corral": run_corral, "sb3": run_sb3, "hand": run_hand}


# -- driver ---------------------------------------------------------------------------


def child_main(args: argparse.Namespace) -> None:
    # torch and gymnasium first, untimed: every side imports them.
    import gymnasium  # noqa: F401
    import torch

    torch.set_num_threads(args.threads)
    global TORCH_COMPILE
    TORCH_COMPILE = args.torch_compile
    out = RUNNERS[args.child](args.row, args.budget, args.fragment)
    out["torch_threads"] = torch.get_num_threads()  # after training: a library may set it
    print("JSON:" + json.dumps(out), flush=True)


def sb3_importable() -> bool:
    import importlib.util

    return importlib.util.find_spec("stable_baselines3") is not None


def summarize(row: str, runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    out: dict[str, Any] = {"row": row}
    for impl, impl_runs in runs.items():
        out[impl] = {
            "runs": len(impl_runs),
            "median_train_s": median(r["train_s"] for r in impl_runs),
            "median_setup_s": median(r["setup_s"] for r in impl_runs),
            "median_total_s": median(r["train_s"] + r["setup_s"] for r in impl_runs),
            # CPU time of the training loop (the child's, all threads): what the
            # machine's other load inflates least.
            "median_train_cpu_s": median(r["train_cpu_s"] for r in impl_runs),
        }
    for ref in ("sb3", "hand"):
        if "corral" in out and ref in out:
            c, r = out["corral"], out[ref]
            out[f"ratio_corral_{ref}"] = {
                "train_s": ratio(c["median_train_s"], r["median_train_s"]),
                "total_s": ratio(c["median_total_s"], r["median_total_s"]),
                "train_cpu_s": ratio(c["median_train_cpu_s"], r["median_train_cpu_s"]),
            }
    if "sb3" in out and "hand" in out:
        out["ratio_sb3_hand"] = {
            "train_s": ratio(out["sb3"]["median_train_s"], out["hand"]["median_train_s"]),
            "train_cpu_s": ratio(
                out["sb3"]["median_train_cpu_s"], out["hand"]["median_train_cpu_s"]
            ),
        }
    out["target_corral_sb3"] = TARGETS[row]
    out["target_corral_hand"] = 1.15
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", nargs="+", default=list(STEPS), choices=list(STEPS))
    parser.add_argument("--impls", nargs="+", default=list(IMPLS), choices=IMPLS)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=0, help="env steps per run (0: the row's)")
    parser.add_argument(
        "--fragment",
        type=int,
        default=1,
        help="off-policy rows: env steps between blocks of as many gradient steps",
    )
    parser.add_argument("--threads", type=int, default=1, help="torch threads in every run")
    parser.add_argument(
        "--torch-compile",
        nargs="?",
        const="inductor",
        default=None,
        metavar="BACKEND",
        help="corral: `torch_compile_learner` with this dynamo backend (default inductor)",
    )
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    parser.add_argument("--quick", action="store_true", help="short runs, 1 repeat")
    parser.add_argument("--child", choices=IMPLS, help=argparse.SUPPRESS)
    parser.add_argument("--row", choices=list(STEPS), help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--budget", type=int, default=0, help=argparse.SUPPRESS)
    parser.add_argument("--eval-every", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_main(args)
        return
    if args.quick:
        args.repeats = 1
    impls = list(args.impls)
    header: dict[str, Any] = {"bench": "equal_work", "machine": machine_info()}
    if "sb3" in impls and not sb3_importable():
        impls.remove("sb3")
        header["sb3"] = "not installed"
    header.update(
        rows=args.rows,
        impls=impls,
        repeats=args.repeats,
        fragment=args.fragment,
        threads=args.threads,
        torch_compile=args.torch_compile,
        settings={row: SETTINGS[row] for row in args.rows},
    )
    emit(header)
    runs = {row: {impl: [] for impl in impls} for row in args.rows}
    errors = 0
    for rep in range(args.repeats):
        for row in args.rows:
            steps = args.steps or STEPS[row][1 if args.quick else 0]
            order = impls[rep % len(impls) :] + impls[: rep % len(impls)]  # rotate per repeat
            for impl in order:
                log(f"equal_work: {row} {impl} repeat {rep} ({steps} env steps)")
                child_args = SimpleNamespace(
                    budget=steps,
                    eval_every=0,
                    threads=args.threads,
                    timeout=args.timeout,
                    child_args=["--row", row, "--fragment", str(args.fragment)]
                    + (["--torch-compile", args.torch_compile] if args.torch_compile else []),
                )
                out = run_child(__file__, impl, 0, child_args)
                out = {"bench": "equal_work", "row": row, "impl": impl, "repeat": rep, **out}
                emit(out)
                if "error" in out:
                    errors += 1
                else:
                    runs[row][impl].append(out)
    summary: dict[str, Any] = {"bench": "equal_work", "summary": True, "errors": errors}
    for row in args.rows:
        summary[row] = summarize(row, runs[row])
    if "dqn" in runs and "dqn_prioritized" in runs:
        for impl in ("corral", "hand"):
            if impl in impls:
                summary["dqn_prioritized"][f"{impl}_over_uniform"] = {
                    "train_s": ratio(
                        summary["dqn_prioritized"][impl]["median_train_s"],
                        summary["dqn"][impl]["median_train_s"],
                    ),
                    "train_cpu_s": ratio(
                        summary["dqn_prioritized"][impl]["median_train_cpu_s"],
                        summary["dqn"][impl]["median_train_cpu_s"],
                    ),
                    "target": 1.25,
                }
    emit(summary)
    if errors:
        sys.exit(1)


if __name__ == "__main__":
    main()
