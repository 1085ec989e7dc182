"""DQN time-to-solve on CartPole-v1: corral against Stable-Baselines3.

A run trains until a deterministic evaluation (20 episodes on a separate
CartPole-v1 env, fixed seeds) reaches a mean return >= 475, or until the
budget of env steps is spent (then `solved: false`). It reports the training
wall-clock seconds (the clock is paused during evaluations; construction is
reported separately as `setup_s`) and the env steps at the solving evaluation.
The evaluation schedule, clock and episode loop are `ppo_cartpole.py`'s.

- corral: the tuned example `tuned_examples/dqn/cartpole-dqn.yaml` (read from
  the file), `trainer.train()` in a loop, evaluated after the first `train()`
  call that passes each multiple of `--eval-every` env steps, acting with
  `trainer.compute_single_action(obs, explore=False)`.
- Stable-Baselines3: DQN with RL Zoo's CartPole-v1 hyper-parameters (lr 2.3e-3,
  batch 64, buffer 100k, learning_starts 1000, gamma 0.99,
  target_update_interval 10, train_freq 256, gradient_steps 128, epsilon to
  0.04 over the first 8,000 env steps (RL Zoo's exploration_fraction 0.16 of
  its 50k-step budget), net [256, 256]), evaluated by a callback at the start
  of the first rollout after each multiple of `--eval-every` env steps (after
  the gradient steps on the previous rollout, like corral), acting with
  `model.predict(obs, deterministic=True)`.

Each run is a fresh subprocess; runs alternate between the libraries seed by
seed; every library trains with `--threads` torch threads (default 1; corral's
driver gets them through `num_cpus_for_driver`). Each run records its hidden
layer sizes (`net`: corral's `fcnet_hiddens` plus any Q-head `hiddens`, SB3's
`net_arch`), so the difference in network size is visible next to the times.

Usage:
    python benchmarks/dqn_cartpole.py                # seeds 0 1 2
    python benchmarks/dqn_cartpole.py --seeds 0 1
    python benchmarks/dqn_cartpole.py --quick        # smoke test: 4096-step budget, 1 seed
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from _common import emit, load_tuned_config, log, machine_info, median, ratio, run_child
from ppo_cartpole import EVAL_EPISODES, SOLVED_AT, new_tracker

TUNED_YAML = "dqn/cartpole-dqn.yaml"
ENV_ID = "CartPole-v1"
BENCH = "dqn_cartpole"

# RL Zoo's hyper-parameters for DQN on CartPole-v1 (n_timesteps 5e4).
ZOO = {
    "learning_rate": 2.3e-3,
    "batch_size": 64,
    "buffer_size": 100_000,
    "learning_starts": 1000,
    "gamma": 0.99,
    "target_update_interval": 10,
    "train_freq": 256,
    "gradient_steps": 128,
    "exploration_steps": 8000,  # exploration_fraction 0.16 x 50k
    "exploration_final_eps": 0.04,
    "net_arch": [256, 256],
}


def corral_net(config: dict[str, Any]) -> list[int]:
    """Hidden layer sizes of corral's Q-network: the model trunk, then the Q-head."""
    trunk = (config.get("model") or {}).get("fcnet_hiddens", [256, 256])
    return [*trunk, *config.get("hiddens", [256])]


def run_corral(seed: int, budget: int, eval_every: int, threads: int) -> dict[str, Any]:
    env_id, config, _ = load_tuned_config(TUNED_YAML)
    config = {**config, "seed": seed, "log_level": "ERROR"}
    if threads:
        config["num_cpus_for_driver"] = threads
    t0 = time.perf_counter()
    from corral.agents.dqn import DQNTrainer

    trainer = DQNTrainer(config=config, env=env_id)
    setup_s = time.perf_counter() - t0
    tracker = new_tracker(eval_every)
    try:
        steps, iterations = tracker.train(
            lambda: int(trainer.train()["timesteps_total"]),
            lambda obs: trainer.compute_single_action(obs, explore=False),
            budget,
        )
    finally:
        trainer.stop()
    out = tracker.record(steps)
    out.update(
        setup_s=setup_s, iterations=iterations, net=corral_net(config), config_file=TUNED_YAML
    )
    return out


def run_sb3(seed: int, budget: int, eval_every: int, threads: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    import gymnasium as gym
    import stable_baselines3
    from stable_baselines3 import DQN

    env = gym.make(ENV_ID)
    model = DQN(
        "MlpPolicy",
        env,
        learning_rate=ZOO["learning_rate"],
        batch_size=ZOO["batch_size"],
        buffer_size=ZOO["buffer_size"],
        learning_starts=ZOO["learning_starts"],
        gamma=ZOO["gamma"],
        target_update_interval=ZOO["target_update_interval"],
        train_freq=ZOO["train_freq"],
        gradient_steps=ZOO["gradient_steps"],
        # SB3 expresses the decay as a fraction of the `learn()` budget.
        exploration_fraction=ZOO["exploration_steps"] / budget,
        exploration_final_eps=ZOO["exploration_final_eps"],
        policy_kwargs={"net_arch": ZOO["net_arch"]},
        seed=seed,
        device="cpu",
        verbose=0,
    )
    setup_s = time.perf_counter() - t0
    tracker = new_tracker(eval_every)
    tracker.train_sb3(model, lambda obs: int(model.predict(obs, deterministic=True)[0]), budget)
    env.close()
    out = tracker.record(model.num_timesteps)
    out.update(
        setup_s=setup_s,
        net=list(model.policy.net_arch),
        sb3_version=stable_baselines3.__version__,
        hyperparams=ZOO,
    )
    return out


RUNNERS = {"corral": run_corral, "sb3": run_sb3}


def child_main(args: argparse.Namespace) -> None:
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    out = RUNNERS[args.child](args.seed, args.budget, args.eval_every, args.threads)
    out["torch_threads"] = torch.get_num_threads()
    print("JSON:" + json.dumps(out), flush=True)


def summarize(runs: list[dict[str, Any]]) -> dict[str, Any]:
    solved = [r for r in runs if r.get("solved")]
    return {
        "net": runs[0].get("net") if runs else None,
        "runs": len(runs),
        "solved": len(solved),
        "median_train_s": median(r["train_s"] for r in solved),
        "median_steps": median(r["steps"] for r in solved),
        "median_setup_s": median(r.get("setup_s") for r in runs),
        "median_s_per_1k_steps": median(
            1000 * r["train_s_run"] / r["steps_run"] for r in runs if r.get("steps_run")
        ),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    parser.add_argument("--budget", type=int, default=100_000, help="env steps per run")
    parser.add_argument("--eval-every", type=int, default=2048, help="env steps")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: defaults)")
    parser.add_argument("--libs", nargs="+", default=["corral", "sb3"], choices=sorted(RUNNERS))
    parser.add_argument("--timeout", type=float, default=3600, help="seconds per run")
    parser.add_argument("--quick", action="store_true", help="4096-step budget, one seed")
    parser.add_argument("--child", choices=sorted(RUNNERS), help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child_main(args)
        return
    if args.quick:
        args.budget, args.seeds = 4096, args.seeds[:1]
    info = machine_info()
    info["threads_arg"] = args.threads
    corral_config = load_tuned_config(TUNED_YAML)[1]
    emit(
        {
            "bench": BENCH,
            "machine": info,
            "budget": args.budget,
            "eval_every": args.eval_every,
            "eval_episodes": EVAL_EPISODES,
            "solved_at": SOLVED_AT,
            "seeds": args.seeds,
            "corral_config": corral_config,
            "corral_net": corral_net(corral_config),
            "sb3_hyperparams": ZOO,
            "sb3_net": ZOO["net_arch"],
        }
    )
    runs: dict[str, list[dict[str, Any]]] = {lib: [] for lib in args.libs}
    for seed in args.seeds:
        for lib in args.libs:
            log(f"{BENCH}: {lib} seed {seed}")
            out = {"bench": BENCH, "lib": lib, "seed": seed, **run_child(__file__, lib, seed, args)}
            emit(out)
            if "error" not in out:
                runs[lib].append(out)
    summary: dict[str, Any] = {"bench": BENCH, "summary": True}
    for lib, lib_runs in runs.items():
        summary[lib] = summarize(lib_runs)
    if "corral" in runs and "sb3" in runs:
        c, s = summary["corral"], summary["sb3"]
        summary["ratio_corral_sb3"] = {
            "train_s": ratio(c["median_train_s"], s["median_train_s"]),
            "steps": ratio(c["median_steps"], s["median_steps"]),
            "s_per_1k_steps": ratio(c["median_s_per_1k_steps"], s["median_s_per_1k_steps"]),
        }
        summary["target_ratio_train_s"] = 0.7
    emit(summary)


if __name__ == "__main__":
    main()
