"""Soak: does memory stay flat over a long run? PPO on CartPole, 2 workers, 300 iterations.

The resident memory (RSS) of the driver and of each remote worker process is
read after iteration 10 (once start-up, imports and first allocations are
done) and after the last iteration; the run passes when no process grew by
`--max-growth-pct` (5 %) or more in between. RSS comes from `/proc/<pid>/status`
(VmRSS) on Linux, else from psutil when it is installed. The driver runs
`gc.collect()` before each reading, so garbage waiting for the collector does
not count as growth.

Prints one JSON object: the config, per-process RSS at both points (MiB) and
growth (%), the iteration rate, `passed`, and machine info.

Usage:
    python benchmarks/soak.py                  # 300 iterations, 2 workers
    python benchmarks/soak.py --iterations 60  # a shorter run
    python benchmarks/soak.py --quick          # a smoke test: 30 iterations
"""

from __future__ import annotations

import argparse
import gc
import os
import time
from typing import Any

from _common import emit, log, machine_info

FIRST_READING = 10

CONFIG: dict[str, Any] = {
    "num_workers": 2,
    "num_envs_per_worker": 2,
    "rollout_fragment_length": 100,
    "train_batch_size": 400,
    "sgd_minibatch_size": 200,
    "num_sgd_iter": 4,
    "model": {"fcnet_hiddens": [64, 64]},
    "seed": 0,
    "log_level": "ERROR",
}


def rss_mib(pid: int) -> float | None:
    """Resident memory of process `pid` in MiB (None when it cannot be read)."""
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1]) / 1024  # reported in kB
    except OSError:
        pass
    try:
        import psutil

        return psutil.Process(pid).memory_info().rss / 2**20
    except Exception:  # noqa: BLE001 - psutil missing or the process gone
        return None


def reading(trainer: Any) -> dict[str, float | None]:
    """RSS of the driver and of each remote worker (keyed "driver", "worker_<index>")."""
    gc.collect()
    out = {"driver": rss_mib(os.getpid())}
    for w in trainer.workers.remote_workers():
        out[f"worker_{w.worker_index}"] = rss_mib(w.pid)
    return out


def growth_pct(before: float | None, after: float | None) -> float | None:
    if before is None or after is None or before <= 0:
        return None
    return 100.0 * (after - before) / before


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--iterations", type=int, default=300)
    parser.add_argument("--max-growth-pct", type=float, default=5.0)
    parser.add_argument("--quick", action="store_true", help="30 iterations (a smoke test)")
    args = parser.parse_args()
    if args.quick:
        args.iterations = 30
    if args.iterations <= FIRST_READING:
        parser.error(f"--iterations must be > {FIRST_READING} (the first reading).")

    from corral.agents.ppo import PPOTrainer

    trainer = PPOTrainer(config=CONFIG, env="CartPole-v1")
    try:
        pids = sorted(w.pid for w in trainer.workers.remote_workers())
        early: dict[str, float | None] = {}
        start = time.perf_counter()
        result: dict[str, Any] = {}
        for i in range(1, args.iterations + 1):
            result = trainer.train()
            if i == FIRST_READING:
                early = reading(trainer)
                log(f"iteration {i}: RSS {early}")
            elif i % 50 == 0:
                log(f"iteration {i}: return {result['episode_reward_mean']:.1f}")
        elapsed = time.perf_counter() - start
        late = reading(trainer)
        log(f"iteration {args.iterations}: RSS {late}")
        # A worker replaced during the run would make the comparison meaningless.
        same_workers = sorted(w.pid for w in trainer.workers.remote_workers()) == pids
    finally:
        trainer.stop()

    growth = {k: growth_pct(early.get(k), late.get(k)) for k in early}
    passed = same_workers and all(
        g is not None and g < args.max_growth_pct for g in growth.values()
    )
    emit(
        {
            "benchmark": "soak",
            "algorithm": "PPO",
            "env": "CartPole-v1",
            "config": CONFIG,
            "iterations": args.iterations,
            "rss_mib": {f"iteration_{FIRST_READING}": early, f"iteration_{args.iterations}": late},
            "rss_growth_pct": growth,
            "max_growth_pct": args.max_growth_pct,
            "same_worker_processes": same_workers,
            "passed": passed,
            "timesteps_total": result.get("timesteps_total"),
            "final_episode_reward_mean": result.get("episode_reward_mean"),
            "iterations_per_s": args.iterations / elapsed,
            "machine": machine_info(),
        }
    )


if __name__ == "__main__":
    main()
