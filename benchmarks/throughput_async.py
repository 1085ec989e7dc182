"""Env steps/s of the asynchronous algorithms (IMPALA, APPO) against synchronous PPO.

Each row runs in a fresh interpreter (`--child NAME`), so no run's one-off costs (the
first optimiser import, thread pools, forked workers) land on another's clock, and the
rows alternate per repeat; the median over `--repeats` is reported. Rows:

- `IMPALA`, `APPO`, `PPO`: CartPole-v1, 2 remote workers x 4 envs, the same 64x64 tanh
  policy and value nets. IMPALA and APPO use their tuned examples' learning settings
  (train batches of 500 steps), PPO its tuned example's (512-step batches, 8 epochs of
  256-step minibatches). The figure is env steps sampled per second of `train()`, and
  for IMPALA/APPO the learner thread's busy fraction (time updating / time updating or
  waiting for a batch).
- `IMPALA-learner-bound`: the same sampling with a 512x512 net and 4 replays per batch
  (`num_sgd_iter=4`, `minibatch_buffer_size=4`), where learning, not sampling, is the
  bottleneck: its busy fraction is the figure (target >= 0.8).
- `--solve`: time to a greedy evaluation return of 450 on CartPole-v1 (10 episodes,
  evaluated every 10,000 env steps for all three), IMPALA's and APPO's tuned examples
  against PPO's tuned example run on the same 2 workers x 4 envs, one fresh process
  per run and seed (`--seeds`), alternated; the figure is the median of the training
  seconds (evaluations included, set-up not) and of the env steps.
- `--pong`: IMPALA on ALE/Pong-v5 with DeepMind preprocessing (84x84x4 frames, the
  default conv net, shared by policy and value), 2 workers x 4 envs, against the same
  wrapped env stepped alone with random actions in one process (what emulation and
  frame processing cost by themselves; 2 workers reach at most 2x that on 2 free cores).

The numbers are noisy on a shared machine: everything here competes for the same cores
(2 workers and the driver's learner thread on a 2-core machine already oversubscribe
it), and other processes on the machine take their share; `machine.load_avg` is
printed with the results. Every line on stdout is one JSON object.

Usage:
    python benchmarks/throughput_async.py              # CartPole rows, 3 repeats
    python benchmarks/throughput_async.py --pong       # and the Pong row
    python benchmarks/throughput_async.py --solve --seeds 0 1 2 3 4   # time to 450
    python benchmarks/throughput_async.py --quick      # smoke test, a few seconds per row
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

import _common
from _common import emit, log, machine_info, median, ratio

CARTPOLE = "CartPole-v1"
PONG = "ALE/Pong-v5"
MODEL = {"fcnet_hiddens": [64, 64], "fcnet_activation": "tanh", "vf_share_layers": False}
SAMPLING = {"num_workers": 2, "num_envs_per_worker": 4, "log_level": "ERROR", "seed": 0}

ROWS: dict[str, tuple[str, str, dict[str, Any]]] = {
    "IMPALA": (
        "IMPALA",
        CARTPOLE,
        {"rollout_fragment_length": 50, "train_batch_size": 500, "lr": 0.001, "model": MODEL},
    ),
    "APPO": (
        "APPO",
        CARTPOLE,
        {
            "rollout_fragment_length": 50,
            "train_batch_size": 500,
            "num_sgd_iter": 2,
            "lr": 0.001,
            "model": MODEL,
        },
    ),
    "PPO": (
        "PPO",
        CARTPOLE,
        {
            "rollout_fragment_length": 64,
            "train_batch_size": 512,
            "sgd_minibatch_size": 256,
            "num_sgd_iter": 8,
            "model": MODEL,
        },
    ),
    "IMPALA-learner-bound": (
        "IMPALA",
        CARTPOLE,
        {
            "rollout_fragment_length": 50,
            "train_batch_size": 500,
            "num_sgd_iter": 4,
            "minibatch_buffer_size": 4,
            "model": {**MODEL, "fcnet_hiddens": [512, 512]},
        },
    ),
    "IMPALA-Pong": (
        "IMPALA",
        PONG,
        {
            "num_envs_per_worker": 4,
            "rollout_fragment_length": 50,
            "train_batch_size": 500,
            "preprocessor_pref": "deepmind",
            # One conv trunk for policy and value (IMPALA's usual Atari net): half the
            # forward cost per step of separate nets.
            "model": {"vf_share_layers": True},
        },
    ),
}


def child(name: str, seconds: float) -> dict[str, Any]:
    """Trains row `name` for about `seconds` after one warm-up iteration."""
    from corral.agents.registry import get_trainer_class

    algo, env, extra = ROWS[name]
    config = {
        **SAMPLING,
        **extra,
        "min_time_s_per_reporting": 0,
        "min_sample_timesteps_per_reporting": 0,
    }
    trainer = get_trainer_class(algo)(config=config, env=env)
    try:
        trainer.train()  # warm-up: workers started, first weights out, optimisers built
        steps0 = trainer.train()["num_env_steps_sampled"]
        thread = getattr(trainer, "_learner_thread", None)
        busy0 = (thread.busy_s_total, thread.wait_s_total) if thread else None
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            result = trainer.train()
        wall = time.perf_counter() - t0
        busy = None
        if thread is not None and busy0 is not None:
            # Over the whole timed window: time updating / (updating + waiting for batches).
            busy_s = thread.busy_s_total - busy0[0]
            wait_s = thread.wait_s_total - busy0[1]
            busy = busy_s / (busy_s + wait_s) if busy_s + wait_s > 0 else None
        steps = result["num_env_steps_sampled"] - steps0
        trained = result["num_env_steps_trained"]
        return {
            "env_steps_per_s": steps / wall,
            "learner_busy_fraction": busy,
            "env_steps_trained_total": trained,
            "policy_lag_mean": (result["info"].get("policy_lag") or {}).get("mean"),
            "wall_s": wall,
        }
    finally:
        trainer.stop()


SOLVE_THRESHOLD = 450.0
SOLVE_MAX_STEPS = 500_000
TUNED = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tuned_examples")
SOLVE_ROWS: dict[str, tuple[str, dict[str, Any]]] = {
    "IMPALA": ("impala/cartpole-impala.yaml", {}),
    "APPO": ("appo/cartpole-appo.yaml", {}),
    # PPO's tuned example on the asynchronous rows' workers, and their evaluation schedule.
    "PPO": (
        "ppo/cartpole-ppo.yaml",
        {
            "num_workers": 2,
            "num_envs_per_worker": 4,
            "evaluation_interval": 1,
            "min_time_s_per_reporting": 0,
            "min_sample_timesteps_per_reporting": 10_000,
        },
    ),
}


def child_solve(name: str, seed: int) -> dict[str, Any]:
    """Trains row `name`'s tuned example with `seed` until the greedy evaluation reaches
    `SOLVE_THRESHOLD` (or `SOLVE_MAX_STEPS`)."""
    from corral.agents.registry import get_trainer_class
    from corral.cli.experiments import load_experiments

    path, overrides = SOLVE_ROWS[name]
    (spec,) = load_experiments(os.path.join(TUNED, path)).values()
    config = {**spec["config"], **overrides, "seed": seed, "log_level": "ERROR"}
    t0 = time.perf_counter()
    trainer = get_trainer_class(spec["run"])(config=config, env=spec["env"])
    setup_s, t0 = time.perf_counter() - t0, time.perf_counter()
    try:
        while True:
            result = trainer.train()
            score = (result.get("evaluation") or {}).get("episode_reward_mean")
            solved = score is not None and score >= SOLVE_THRESHOLD
            if solved or result["timesteps_total"] >= SOLVE_MAX_STEPS:
                return {
                    "solved": solved,
                    "train_s": time.perf_counter() - t0,
                    "setup_s": setup_s,
                    "env_steps": result["timesteps_total"],
                }
    finally:
        trainer.stop()


def env_alone(seconds: float) -> float:
    """Steps/s of one DeepMind-wrapped Pong env stepped with random actions."""
    import numpy as np

    from corral.env import EnvContext
    from corral.env.utils import make_env_creator

    env = make_env_creator(PONG, preprocessor_pref="deepmind")(EnvContext())
    rng = np.random.default_rng(0)
    env.reset(seed=0)
    done, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        _, _, term, trunc, _ = env.step(int(rng.integers(env.action_space.n)))
        done += 1
        if term or trunc:
            env.reset()
    rate = done / (time.perf_counter() - t0)
    env.close()
    return rate


def run_child(name: str, seconds: float, timeout: float, seed: int | None = None) -> dict[str, Any]:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", name, "--seconds", str(seconds)]
    if seed is not None:
        cmd += ["--solve", "--seeds", str(seed)]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, timeout=timeout)
    lines = [line for line in proc.stdout.splitlines() if line.startswith("JSON:")]
    if proc.returncode != 0 or not lines:
        return {"error": f"exit code {proc.returncode}"}
    return json.loads(lines[-1][5:])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, default=20.0, help="timed seconds per run")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pong", action="store_true", help="also the IMPALA Pong row")
    parser.add_argument("--quick", action="store_true", help="smoke test")
    parser.add_argument("--rows", nargs="+", help="only these rows (names as printed)")
    parser.add_argument(
        "--solve", action="store_true", help="time to 450 instead of throughput (see above)"
    )
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2], help="--solve's seeds")
    parser.add_argument("--timeout", type=float, default=600.0, help="per child run (s)")
    args = parser.parse_args()
    if args.child:
        if args.solve:
            out: dict[str, Any] = child_solve(args.child, args.seeds[0])
        elif args.child == "env-alone":
            out = {"env_steps_per_s": env_alone(args.seconds)}
        else:
            out = child(args.child, args.seconds)
        print("JSON:" + json.dumps(out), flush=True)
        return
    if args.quick:
        args.seconds, args.repeats = 3.0, 1
    emit({"bench": "throughput_async", "machine": machine_info()})
    if args.solve:
        solve(args)
        return
    names = ["IMPALA", "APPO", "PPO", "IMPALA-learner-bound"]
    if args.pong:
        names += ["IMPALA-Pong", "env-alone"]
    if args.rows:
        names = [n for n in names if n in args.rows]
    runs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    for repeat in range(args.repeats):
        for name in names:  # alternating: drifts in the machine's load hit every row
            log(f"throughput_async: {name}, repeat {repeat + 1}/{args.repeats}")
            runs[name].append(run_child(name, args.seconds, args.timeout))
    summary: dict[str, Any] = {}
    for name, results in runs.items():
        rates = [r.get("env_steps_per_s") for r in results]
        busy = [r.get("learner_busy_fraction") for r in results]
        row = {
            "bench": "throughput_async",
            "row": name,
            "env_steps_per_s": median(rates),
            "env_steps_per_s_runs": rates,
            "learner_busy_fraction": median(busy),
            "policy_lag_mean": median(r.get("policy_lag_mean") for r in results),
            "errors": [r["error"] for r in results if "error" in r],
        }
        emit(row)
        summary[name] = row
    rate = {n: summary[n]["env_steps_per_s"] for n in summary}

    def busy(name: str) -> Any:
        return summary[name]["learner_busy_fraction"] if name in summary else None

    emit(
        {
            "bench": "throughput_async",
            "summary": {
                "impala_over_ppo": ratio(rate.get("IMPALA"), rate.get("PPO")),
                "appo_over_ppo": ratio(rate.get("APPO"), rate.get("PPO")),
                "impala_learner_busy": busy("IMPALA"),
                "learner_bound_busy": busy("IMPALA-learner-bound"),
                "pong_impala_over_env_alone": ratio(rate.get("IMPALA-Pong"), rate.get("env-alone")),
                "load_avg_after": machine_info()["load_avg"],
                "results_dir": _common.use_temp_results_dir(),
                "note": "shared machine: other processes compete for the cores; noisy",
            },
        }
    )


def solve(args: argparse.Namespace) -> None:
    """The `--solve` rows: per seed, every row in a fresh process, rows alternated."""
    names = [n for n in SOLVE_ROWS if not args.rows or n in args.rows]
    runs: dict[str, list[dict[str, Any]]] = {n: [] for n in names}
    for seed in args.seeds:
        for name in names:
            log(f"throughput_async: time to {SOLVE_THRESHOLD:g}, {name}, seed {seed}")
            out = {"seed": seed, **run_child(name, 0.0, args.timeout, seed)}
            emit({"bench": "time_to_solve", "row": name, **out})
            runs[name].append(out)
    train_s = {n: median(r.get("train_s") for r in rs) for n, rs in runs.items()}
    emit(
        {
            "bench": "time_to_solve",
            "summary": {
                "threshold": SOLVE_THRESHOLD,
                "seeds": args.seeds,
                "median_train_s": train_s,
                "median_env_steps": {
                    n: median(r.get("env_steps") for r in rs) for n, rs in runs.items()
                },
                "solved": {n: sum(bool(r.get("solved")) for r in rs) for n, rs in runs.items()},
                "impala_over_ppo_train_s": ratio(train_s.get("IMPALA"), train_s.get("PPO")),
                "appo_over_ppo_train_s": ratio(train_s.get("APPO"), train_s.get("PPO")),
                "load_avg_after": machine_info()["load_avg"],
            },
        }
    )


if __name__ == "__main__":
    main()
