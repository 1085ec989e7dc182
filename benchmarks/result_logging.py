"""Milliseconds per result of corral's TensorBoard logger against one event per value.

A trainer logs every result to `result.json`, `progress.csv` and TensorBoard (RLlib's
default loggers). Both sides here write the same real PPO result (CartPole-v1, after
a few iterations: about 50 scalars and 3 histograms) to TensorBoard event files with
tensorboardX:

- corral: `corral.tune.logger.TBXLogger.on_result`, one event per result (a single
  `Summary` holding every value); the writer's own thread flushes the file within
  `TBXLogger.FLUSH_SECS`.
- reference: one `add_scalar` / `add_histogram` per value (one event each), then
  `flush` (which fsyncs the file), as Ray Tune 1.x's `TBXLogger` writes a result, on
  the values corral would write.

The two alternate in slices; median of `--repeats`. The whole `UnifiedLogger`
(JSON + CSV + TensorBoard) is timed as well, for the share of a training iteration.

Usage:
    python benchmarks/result_logging.py
    python benchmarks/result_logging.py --quick
"""

from __future__ import annotations

import argparse
import tempfile
import time
from typing import Any

from _common import emit, log, machine_info, median, ratio


def ppo_result(iterations: int) -> dict[str, Any]:
    """A real result of corral's PPO on CartPole-v1 after `iterations` iterations."""
    from corral.agents.ppo import PPOTrainer

    trainer = PPOTrainer(
        config={
            "num_workers": 0,
            "num_envs_per_worker": 8,
            "rollout_fragment_length": 64,
            "train_batch_size": 512,
            "sgd_minibatch_size": 256,
            "num_sgd_iter": 2,
            "seed": 0,
            "log_level": "ERROR",
        },
        env="CartPole-v1",
    )
    result: dict[str, Any] = {}
    for _ in range(iterations):
        result = trainer.train()
    trainer.stop()
    return result


def per_value_writer(logdir: str) -> tuple[Any, Any]:
    """(a function writing a result as one tensorboardX event per value, its writer)."""
    import numpy as np
    from tensorboardX import SummaryWriter

    from corral.tune.logger import TBXLogger, _as_scalar, flatten_dict

    writer = SummaryWriter(logdir)

    def write(result: dict[str, Any]) -> None:
        step = result.get("timesteps_total") or result.get("training_iteration", 0)
        flat = flatten_dict({k: v for k, v in result.items() if k not in TBXLogger._SKIPPED})
        for key, value in flat.items():
            tag = f"ray/tune/{key}"
            scalar = _as_scalar(value)
            if isinstance(scalar, int | float) and not isinstance(scalar, bool):
                if np.isfinite(scalar):
                    writer.add_scalar(tag, scalar, global_step=step)
            elif scalar is None and isinstance(value, list | tuple) and value:
                array = np.asarray(value, dtype=np.float64)
                array = array[np.isfinite(array)]
                if array.size:
                    writer.add_histogram(tag, array, global_step=step)
        writer.flush()

    return write, writer


def time_calls(fn: Any, result: dict[str, Any], calls: int) -> float:
    t0 = time.perf_counter()
    for _ in range(calls):
        fn(result)
    return (time.perf_counter() - t0) / calls * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=100, help="results written per slice")
    parser.add_argument("--slices", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="smoke test: 10 calls, 1 repeat")
    args = parser.parse_args()
    if args.quick:
        args.calls, args.slices, args.repeats = 10, 1, 1
    emit({"bench": "result_logging", "machine": machine_info()})

    from corral.tune.logger import TBXLogger, UnifiedLogger, tensorboard_api

    if tensorboard_api() is None:
        raise SystemExit("needs tensorboardX (the `tensorboard` extra)")
    log("result_logging: training 3 PPO iterations for a real result")
    result = ppo_result(3)
    corral_tbx = TBXLogger({}, tempfile.mkdtemp(prefix="corral-tbx-"))
    unified = UnifiedLogger({}, tempfile.mkdtemp(prefix="corral-unified-"))
    reference, reference_writer = per_value_writer(tempfile.mkdtemp(prefix="per-value-"))
    sides = {
        "corral_tbx": corral_tbx.on_result,
        "per_value": reference,
        "unified": unified.on_result,
    }
    for fn in sides.values():  # warm-up: file creation, first imports
        time_calls(fn, result, 3)
    runs: dict[str, list[float]] = {name: [] for name in sides}
    for rep in range(args.repeats):
        totals = dict.fromkeys(sides, 0.0)
        for _ in range(args.slices):
            for name, fn in sides.items():
                totals[name] += time_calls(fn, result, args.calls) / args.slices
        for name in sides:
            runs[name].append(totals[name])
        log(f"  rep {rep}: " + ", ".join(f"{n} {v:.3f} ms" for n, v in totals.items()))
    corral_tbx.close()
    unified.close()
    reference_writer.close()
    medians = {name: median(values) for name, values in runs.items()}
    emit(
        {
            "bench": "result_logging",
            "summary": True,
            "calls_per_slice": args.calls,
            "slices": args.slices,
            "repeats": args.repeats,
            "ms_per_result": medians,
            "runs_ms": runs,
            "corral_tbx_over_per_value": ratio(medians["corral_tbx"], medians["per_value"]),
        }
    )


if __name__ == "__main__":
    main()
