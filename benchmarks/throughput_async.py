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


def run_child(name: str, seconds: float, timeout: float) -> dict[str, Any]:
    cmd = [sys.executable, os.path.abspath(__file__), "--child", name, "--seconds", str(seconds)]
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
    parser.add_argument("--timeout", type=float, default=600.0, help="per child run (s)")
    args = parser.parse_args()
    if args.child:
        if args.child == "env-alone":
            out: dict[str, Any] = {"env_steps_per_s": env_alone(args.seconds)}
        else:
            out = child(args.child, args.seconds)
        print("JSON:" + json.dumps(out), flush=True)
        return
    if args.quick:
        args.seconds, args.repeats = 3.0, 1
    emit({"bench": "throughput_async", "machine": machine_info()})
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


if __name__ == "__main__":
    main()
