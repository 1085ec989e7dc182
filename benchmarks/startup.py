"""Start-up time and memory: from a fresh interpreter's `import corral` to the first sample.

Each measurement runs in a new `python -c` subprocess that imports corral,
builds `PPOTrainer(config={"num_workers": n, ...}, env="CartPole-v1")` and
takes one sample: `trainer.workers.local_worker().sample()` when n = 0, one
remote worker's `sample()` when n > 0. The child times each phase itself
(`import corral`, trainer construction, first sample) and reports the
resident memory (RSS, and USS: memory unique to the process, which for forked
workers leaves out the pages they still share with the driver) of the driver
and of each worker process (psutil, children of the driver) after the sample.

The child imports torch and gymnasium first and times that apart
(`deps_import_s`): `corral_own_s` is what corral itself adds, from `import
corral` (its own modules) to the first sample. For scale, the same run also
times a baseline child that only does `import torch, gymnasium` and steps one
CartPole env (the floor any PyTorch + Gymnasium library pays).

Children run with bytecode caching on, as a normal install has it (pip
compiles `.pyc` files at install time): `PYTHONDONTWRITEBYTECODE` is removed
from their environment and an unrecorded warm-up child fills the cache first.
With `--no-bytecode-cache` every import recompiles corral's sources (what an
editable install under `PYTHONDONTWRITEBYTECODE=1` pays, about 0.3 s here).

Usage:
    python benchmarks/startup.py             # num_workers 0 and 2, 3 repeats
    python benchmarks/startup.py --quick     # num_workers 0, 1 repeat
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from typing import Any

from _common import emit, log, machine_info, median, ratio

CHILD = r"""
import json, os, sys, time
t0 = time.perf_counter()
import torch, gymnasium  # timed apart: every PyTorch + Gymnasium library pays this floor
t_deps = time.perf_counter()
import corral
t_import = time.perf_counter()
from corral.agents.ppo import PPOTrainer
num_workers = int(sys.argv[1])
config = {
    "num_workers": num_workers,
    "num_envs_per_worker": 8,
    "rollout_fragment_length": 32,
    "train_batch_size": 256 * max(num_workers, 1),
    "sgd_minibatch_size": 256,
    "model": {"fcnet_hiddens": [64, 64], "fcnet_activation": "tanh", "vf_share_layers": False},
    "log_level": "ERROR",
}
trainer = PPOTrainer(config=config, env="CartPole-v1")
t_trainer = time.perf_counter()
if num_workers == 0:
    batch = trainer.workers.local_worker().sample()
else:
    batch = trainer.workers.remote_workers()[0].call("sample").result(timeout=300)
t_sample = time.perf_counter()

import psutil

def mem(p):
    try:
        full = p.memory_full_info()
        return {"pid": p.pid, "rss_mb": full.rss / 2**20, "uss_mb": full.uss / 2**20}
    except (psutil.AccessDenied, AttributeError):
        return {"pid": p.pid, "rss_mb": p.memory_info().rss / 2**20, "uss_mb": None}

me = psutil.Process()
workers = [mem(c) for c in me.children(recursive=True)]
out = {
    "deps_import_s": t_deps - t0,
    "import_s": t_import - t_deps,
    "trainer_s": t_trainer - t_import,
    "first_sample_s": t_sample - t_trainer,
    "import_to_first_sample_s": t_sample - t0,
    "corral_own_s": t_sample - t_deps,
    "sample_count": batch.count,
    "driver": mem(me),
    "workers": workers,
    "driver_torch_threads": __import__("torch").get_num_threads(),
    "torch_dynamo_imported": "torch._dynamo" in sys.modules,
}
trainer.stop()
print("JSON:" + json.dumps(out), flush=True)
"""

BASELINE = r"""
import json, time
t0 = time.perf_counter()
import torch, gymnasium
env = gymnasium.make("CartPole-v1")
env.reset(seed=0)
env.step(env.action_space.sample())
print("JSON:" + json.dumps({"import_to_first_step_s": time.perf_counter() - t0}), flush=True)
"""


def run_child(
    code: str, *args: str, timeout: float = 600, bytecode_cache: bool = True
) -> tuple[dict[str, Any], float]:
    """Runs `python -c code args`; returns its JSON line and the parent-side wall time."""
    env = dict(os.environ)
    if bytecode_cache:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
    else:
        env["PYTHONDONTWRITEBYTECODE"] = "1"
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env,
    )
    wall = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"startup child failed (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
    lines = [line for line in proc.stdout.splitlines() if line.startswith("JSON:")]
    if not lines:
        raise RuntimeError(f"startup child printed no result:\n{proc.stdout[-2000:]}")
    return json.loads(lines[-1][5:]), wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--num-workers", nargs="+", type=int, default=[0, 2])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="num_workers 0, one repeat")
    parser.add_argument(
        "--no-bytecode-cache",
        action="store_true",
        help="recompile corral's sources in every child (no .pyc cache)",
    )
    args = parser.parse_args()
    cache = not args.no_bytecode_cache
    if args.quick:
        args.num_workers, args.repeats = args.num_workers[:1], 1

    emit({"bench": "startup", "machine": machine_info(), "bytecode_cache": cache})
    if cache:
        run_child(CHILD, "0")  # warm-up: writes the .pyc files the timed children read
    baseline_runs, runs = [], {n: [] for n in args.num_workers}
    # Alternate the configurations within each repeat (machine noise hits all alike).
    for rep in range(args.repeats):
        result, wall = run_child(BASELINE, bytecode_cache=cache)
        baseline_runs.append(result["import_to_first_step_s"])
        log(f"startup rep {rep}: baseline torch+gymnasium {baseline_runs[-1]:.2f}s")
        for n in args.num_workers:
            result, wall = run_child(CHILD, str(n), bytecode_cache=cache)
            result["process_wall_s"] = wall
            runs[n].append(result)
            log(
                f"startup rep {rep}: num_workers={n} import->sample "
                f"{result['import_to_first_sample_s']:.2f}s, corral's own "
                f"{result['corral_own_s']:.2f}s (wall {wall:.2f}s)"
            )
    base = median(baseline_runs)
    emit(
        {
            "bench": "startup",
            "baseline": "import torch+gymnasium, one env step",
            "s": base,
            "runs": baseline_runs,
        }
    )
    summary: dict[str, Any] = {"bench": "startup", "summary": True, "baseline_s": base}
    for n, results in runs.items():
        # The memory figures of the run with the median start-up time.
        by_time = sorted(results, key=lambda r: r["import_to_first_sample_s"])
        mid = by_time[len(by_time) // 2]
        t = median(r["import_to_first_sample_s"] for r in results)
        row = {
            "bench": "startup",
            "num_workers": n,
            "import_to_first_sample_s": t,
            "corral_own_s": median(r["corral_own_s"] for r in results),
            "deps_import_s": median(r["deps_import_s"] for r in results),
            "import_s": median(r["import_s"] for r in results),
            "trainer_s": median(r["trainer_s"] for r in results),
            "first_sample_s": median(r["first_sample_s"] for r in results),
            "process_wall_s": median(r["process_wall_s"] for r in results),
            "ratio_to_baseline": ratio(t, base),
            "driver_rss_mb": mid["driver"]["rss_mb"],
            "driver_uss_mb": mid["driver"]["uss_mb"],
            "worker_rss_mb": [w["rss_mb"] for w in mid["workers"]],
            "worker_uss_mb": [w["uss_mb"] for w in mid["workers"]],
            "num_child_processes": len(mid["workers"]),
            "driver_torch_threads": mid["driver_torch_threads"],
            "torch_dynamo_imported": mid["torch_dynamo_imported"],
            "runs_s": [r["import_to_first_sample_s"] for r in results],
            "repeats": len(results),
        }
        emit(row)
        summary[f"workers_{n}_s"] = t
        summary[f"workers_{n}_corral_own_s"] = row["corral_own_s"]
        summary[f"workers_{n}_driver_rss_mb"] = row["driver_rss_mb"]
    emit(summary)


if __name__ == "__main__":
    main()
