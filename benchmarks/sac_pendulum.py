"""SAC time-to-solve on Pendulum-v1: corral against Stable-Baselines3, same machine.

Each run trains in its own child process with a budget of env steps and
evaluates the deterministic policy (10 episodes, fixed seeds) every
`--eval-every` env steps, with the training clock paused during evaluation.
A run is solved when the mean evaluation return reaches -200. corral uses
`tuned_examples/sac/pendulum-sac.yaml`; SB3 uses RL Zoo's Pendulum-v1 SAC
hyper-parameters (MlpPolicy, learning_rate 1e-3, everything else SB3's defaults:
[256, 256] actor and critic nets, batch 256, one gradient step per env step,
learning_starts 100). Every run records its libraries' network sizes (`net`) and
torch threads (`torch_threads`: both `--threads`, default 1; corral's driver gets
them through `num_cpus_for_driver`) and its construction time (`setup_s`, not
part of `train_s`).

Output: JSON lines on stdout (a header, one line per run, a summary with the
ratio of corral's median wall time to solve to SB3's; the target is <= 0.7).
Usage: python benchmarks/sac_pendulum.py [--seeds 0 1] [--budget 20000] [--libs corral sb3]
       python benchmarks/sac_pendulum.py --quick   # smoke test: 2000-step budget, 1 seed
"""

from __future__ import annotations

import argparse
import json
import time
from typing import Any

from _common import (
    Tracker,
    emit,
    load_tuned_config,
    log,
    machine_info,
    median,
    ratio,
    run_child,
)

ENV_ID = "Pendulum-v1"
TUNED_YAML = "sac/pendulum-sac.yaml"
SOLVED_AT = -200.0
EVAL_EPISODES = 10
EVAL_SEED = 10_000
# RL Zoo's Pendulum-v1 SAC settings; the rest (net_arch [256, 256], ...) are SB3's defaults.
ZOO = {"policy": "MlpPolicy", "learning_rate": 1e-3, "n_timesteps": 20000}


def corral_nets(config: dict[str, Any]) -> dict[str, list[int]]:
    """Hidden layer sizes of corral's SAC actor (`pi`) and critics (`qf`)."""
    return {
        "pi": list((config.get("policy_model") or {}).get("fcnet_hiddens", [256, 256])),
        "qf": list((config.get("Q_model") or {}).get("fcnet_hiddens", [256, 256])),
    }


def new_tracker(eval_every: int) -> Tracker:
    return Tracker(ENV_ID, eval_every, SOLVED_AT, EVAL_EPISODES, EVAL_SEED)


def run_corral(seed: int, budget: int, eval_every: int, threads: int) -> dict[str, Any]:
    env_id, config, _ = load_tuned_config(TUNED_YAML)
    t0 = time.perf_counter()
    from corral.agents.sac import SACTrainer

    # Iterations as long as the evaluation period, so evaluations fall on schedule.
    config = {**config, "seed": seed, "log_level": "ERROR", "timesteps_per_iteration": eval_every}
    if threads:
        config["num_cpus_for_driver"] = threads
    trainer = SACTrainer(config=config, env=env_id)
    setup_s = time.perf_counter() - t0
    tracker = new_tracker(eval_every)
    try:
        steps, _ = tracker.train(
            lambda: int(trainer.train()["timesteps_total"]),
            lambda obs: trainer.compute_single_action(obs, explore=False),
            budget,
        )
    finally:
        trainer.stop()
    return {
        **tracker.record(steps),
        "setup_s": setup_s,
        "net": corral_nets(config),
        "config_file": TUNED_YAML,
    }


def run_sb3(seed: int, budget: int, eval_every: int, threads: int) -> dict[str, Any]:
    t0 = time.perf_counter()
    import stable_baselines3
    from stable_baselines3 import SAC

    model = SAC(ZOO["policy"], ENV_ID, learning_rate=ZOO["learning_rate"], seed=seed, device="cpu")
    setup_s = time.perf_counter() - t0
    tracker = new_tracker(eval_every)
    tracker.train_sb3(model, lambda obs: model.predict(obs, deterministic=True)[0], budget)
    arch = model.policy.net_arch
    net = arch if isinstance(arch, dict) else {"pi": list(arch), "qf": list(arch)}
    return {
        **tracker.record(model.num_timesteps),
        "setup_s": setup_s,
        "net": net,
        "sb3_version": stable_baselines3.__version__,
    }


RUNNERS = {"corral": run_corral, "sb3": run_sb3}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--budget", type=int, default=20_000, help="env steps per run")
    parser.add_argument("--eval-every", type=int, default=1000, help="env steps")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: defaults)")
    parser.add_argument("--libs", nargs="+", default=["corral", "sb3"], choices=sorted(RUNNERS))
    parser.add_argument("--timeout", type=float, default=1800, help="seconds per run")
    parser.add_argument("--quick", action="store_true", help="2000-step budget, one seed")
    parser.add_argument("--child", choices=sorted(RUNNERS), help=argparse.SUPPRESS)
    parser.add_argument("--seed", type=int, default=0, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        import torch

        if args.threads:  # the same number of torch threads for both libraries
            torch.set_num_threads(args.threads)
        out = RUNNERS[args.child](args.seed, args.budget, args.eval_every, args.threads)
        out["torch_threads"] = torch.get_num_threads()
        print("JSON:" + json.dumps(out), flush=True)
        return
    if args.quick:
        args.budget, args.seeds = 2000, args.seeds[:1]
    info = machine_info()
    info["threads_arg"] = args.threads
    corral_config = load_tuned_config(TUNED_YAML)[1]
    emit(
        {
            "bench": "sac_pendulum",
            "machine": info,
            "budget": args.budget,
            "eval_every": args.eval_every,
            "eval_episodes": EVAL_EPISODES,
            "solved_at": SOLVED_AT,
            "seeds": args.seeds,
            "sb3_hyperparams": ZOO,
            "sb3_net": {"pi": [256, 256], "qf": [256, 256]},
            "corral_net": corral_nets(corral_config),
            "corral_config": corral_config,
        }
    )
    runs: dict[str, list[dict[str, Any]]] = {lib: [] for lib in args.libs}
    for seed in args.seeds:
        for lib in args.libs:  # alternate the libraries seed by seed
            log(f"sac_pendulum: {lib} seed {seed}")
            out = {
                "bench": "sac_pendulum",
                "lib": lib,
                "seed": seed,
                **run_child(__file__, lib, seed, args),
            }
            emit(out)
            if "error" not in out:
                runs[lib].append(out)
    summary: dict[str, Any] = {"bench": "sac_pendulum", "summary": True}
    for lib, lib_runs in runs.items():
        solved = [r for r in lib_runs if r["solved"]]
        summary[lib] = {
            "net": lib_runs[0]["net"] if lib_runs else None,
            "runs": len(lib_runs),
            "solved": len(solved),
            "median_train_s": median(r["train_s"] for r in solved),
            "median_steps": median(r["steps"] for r in solved),
            "median_setup_s": median(r.get("setup_s") for r in lib_runs),
            "median_s_per_1k_steps": median(
                1000 * r["train_s_run"] / r["steps_run"] for r in lib_runs if r["steps_run"]
            ),
        }
    if "corral" in summary and "sb3" in summary:
        summary["ratio_train_s_corral_over_sb3"] = ratio(
            summary["corral"]["median_train_s"], summary["sb3"]["median_train_s"]
        )
        summary["ratio_s_per_1k_steps_corral_over_sb3"] = ratio(
            summary["corral"]["median_s_per_1k_steps"], summary["sb3"]["median_s_per_1k_steps"]
        )
        summary["target_ratio"] = 0.7
    emit(summary)


if __name__ == "__main__":
    main()
