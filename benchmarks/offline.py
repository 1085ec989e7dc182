"""Offline data: samples/s read by corral's readers (JSON, Parquet) and trained by BC,
next to the raw read speed of the very same files.

Each side reads every file once, untimed, before the timed repeats (imports and the
page cache are warm for both).

First, a PPO rollout worker samples CartPole-v1 (an untrained policy) and writes the
same batches three ways (files of at most 64 MiB): JSON with RLlib's default compressed
columns (``obs``, ``new_obs``), JSON with no compressed column, and Parquet. Then,
alternating the two sides in each repeat (medians over ``--repeats``):

- ``corral``: `JsonReader` / `ParquetReader` ``read_all_files()`` (every batch once:
  parsing, decompression, dtype fixes, `SampleBatch` construction);
- ``raw``: the floor for the same bytes: ``json.loads`` of every line (JSON; the
  columns stay Python lists, compressed ones stay text), ``pyarrow.parquet.read_table``
  of every file (Parquet; Arrow columns, no numpy);
- ``bc``: `BCTrainer` (when built) training from the JSON files without an env:
  trained samples/s of ``train()`` (reading included). Reported as not available when
  ``corral.agents.marwil.BCTrainer`` does not exist.

One JSON line per format: ``{"bench": "offline_read", "format", "rows", "bytes",
"corral_samples_per_s", "raw_samples_per_s", "ratio", ...}``, then one
``{"bench": "offline_bc", ...}`` line.

Usage:
    python benchmarks/offline.py            # 50,000 steps, 3 repeats
    python benchmarks/offline.py --quick    # 5,000 steps, 1 repeat
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import tempfile
import time
from typing import Any

from _common import emit, log, machine_info, median, ratio


def _write_data(folder: str, steps: int) -> dict[str, list[str]]:
    from corral.agents.ppo import PPOTrainer
    from corral.offline import IOContext, JsonWriter, ParquetWriter

    trainer = PPOTrainer(
        config={"num_workers": 0, "rollout_fragment_length": 1000, "seed": 0},
        env="CartPole-v1",
    )
    worker = trainer.workers.local_worker()
    ioctx = IOContext(config=worker.config)
    writers = {
        "json_compressed": JsonWriter(os.path.join(folder, "json_compressed"), ioctx),
        "json_plain": JsonWriter(os.path.join(folder, "json_plain"), ioctx, compress_columns=[]),
        "parquet": ParquetWriter(os.path.join(folder, "parquet"), ioctx),
    }
    done = 0
    while done < steps:
        batch = worker.sample()
        done += batch.count
        for writer in writers.values():
            writer.write(batch)
    for writer in writers.values():
        writer.close()
    trainer.stop()
    return {name: sorted(glob.glob(os.path.join(folder, name, "output-*"))) for name in writers}


def _corral_read(kind: str, files: list[str]) -> int:
    from corral.offline import JsonReader, ParquetReader

    reader = ParquetReader(files) if kind == "parquet" else JsonReader(files)
    return sum(batch.count for batch in reader.read_all_files())


def _raw_read(kind: str, files: list[str]) -> int:
    rows = 0
    if kind == "parquet":
        import pyarrow.parquet as pq

        for path in files:
            rows += pq.read_table(path).num_rows
        return rows
    for path in files:
        with open(path, encoding="utf-8") as f:
            for line in f:
                rows += len(json.loads(line)["actions"])
    return rows


def _timed(fn: Any, *args: Any) -> tuple[float, int]:
    start = time.perf_counter()
    rows = fn(*args)
    return time.perf_counter() - start, rows


def _bench_read(kind: str, files: list[str], repeats: int) -> dict[str, Any]:
    corral_rates, raw_rates, rows = [], [], 0
    _corral_read(kind, files)  # warm-up (imports, page cache), not recorded
    _raw_read(kind, files)
    for _ in range(repeats):
        for side, fn in (("corral", _corral_read), ("raw", _raw_read)):
            seconds, rows = _timed(fn, kind, files)
            (corral_rates if side == "corral" else raw_rates).append(rows / seconds)
    corral_rate, raw_rate = median(corral_rates), median(raw_rates)
    return {
        "bench": "offline_read",
        "format": kind,
        "files": len(files),
        "rows": rows,
        "bytes": sum(os.path.getsize(f) for f in files),
        "corral_samples_per_s": corral_rate,
        "raw_samples_per_s": raw_rate,
        "ratio": ratio(corral_rate, raw_rate),
        "corral_runs": corral_rates,
        "raw_runs": raw_rates,
        "raw_is": "pyarrow.parquet.read_table" if kind == "parquet" else "json.loads per line",
    }


def _bench_bc(files: list[str], iterations: int) -> dict[str, Any]:
    try:
        from corral.agents.marwil import BCTrainer
    except ImportError as err:
        return {"bench": "offline_bc", "available": False, "why": str(err)}
    import gymnasium as gym

    env = gym.make("CartPole-v1")
    try:
        trainer = BCTrainer(
            config={
                "num_workers": 0,
                "input": files,
                "input_evaluation": [],
                "observation_space": env.observation_space,
                "action_space": env.action_space,
                "seed": 0,
            }
        )
    except NotImplementedError as err:
        return {"bench": "offline_bc", "available": False, "why": str(err)}
    trainer.train()  # warm-up: first batches, optimizer state
    start = time.perf_counter()
    sampled = 0
    for _ in range(iterations):
        sampled += trainer.train()["timesteps_this_iter"]
    seconds = time.perf_counter() - start
    trainer.stop()
    return {
        "bench": "offline_bc",
        "available": True,
        "input": "json_compressed",
        "iterations": iterations,
        "samples": sampled,
        "trained_samples_per_s": sampled / seconds,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=50_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--bc-iterations", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="5,000 steps, 1 repeat")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.repeats, args.bc_iterations = 5_000, 1, 2
    emit(machine_info())
    with tempfile.TemporaryDirectory(prefix="corral-offline-bench-") as folder:
        log(f"writing {args.steps} CartPole steps as JSON (compressed, plain) and Parquet")
        files = _write_data(folder, args.steps)
        for kind, paths in files.items():
            log(f"reading {kind}")
            emit(_bench_read(kind, paths, args.repeats))
        log("training BC from the compressed JSON files")
        emit(_bench_bc(files["json_compressed"], args.bc_iterations))


if __name__ == "__main__":
    main()
