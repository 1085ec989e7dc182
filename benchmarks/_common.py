"""Helpers shared by the benchmark scripts: JSON output, machine info, timers.

Every benchmark prints JSON objects, one per line, on stdout and nothing else;
progress messages go to stderr. Import this module before `corral` so that
`CORRAL_RESULTS_DIR` points at a temporary directory (results of benchmark
runs must not pile up in the home directory).
"""

from __future__ import annotations

import json
import math
import os
import platform
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parent.parent
TUNED_EXAMPLES = REPO_ROOT / "tuned_examples"


def use_temp_results_dir() -> str:
    """Points `CORRAL_RESULTS_DIR` at a fresh temporary directory (unless already set)."""
    if not os.environ.get("CORRAL_RESULTS_DIR"):
        os.environ["CORRAL_RESULTS_DIR"] = tempfile.mkdtemp(prefix="corral-bench-")
    return os.environ["CORRAL_RESULTS_DIR"]


use_temp_results_dir()


def emit(record: dict[str, Any]) -> None:
    """Prints one JSON object as one line on stdout."""
    print(json.dumps(_jsonable(record), sort_keys=False), flush=True)


def log(*parts: Any) -> None:
    """A progress message on stderr (stdout is reserved for JSON)."""
    print(*parts, file=sys.stderr, flush=True)


def _jsonable(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, float):
        if math.isnan(value) or math.isinf(value):
            return None
        return round(value, 6)
    if hasattr(value, "item") and callable(value.item):  # numpy / torch scalars
        return _jsonable(value.item())
    return value


def median(values: Iterable[float]) -> float | None:
    values = [v for v in values if v is not None]
    return statistics.median(values) if values else None


def ratio(numerator: float | None, denominator: float | None) -> float | None:
    if numerator is None or not denominator:
        return None
    return numerator / denominator


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def machine_info() -> dict[str, Any]:
    """Hardware and library versions, plus torch's current thread settings."""
    import gymnasium
    import numpy
    import torch

    from corral.utils.sys_usage import usable_cores

    usable = usable_cores()
    try:
        load = [round(x, 2) for x in os.getloadavg()]
    except OSError:
        load = None
    try:
        import corral

        corral_version = getattr(corral, "__version__", "unknown")
    except ImportError:
        corral_version = "not importable"
    return {
        "cpu_count": os.cpu_count(),
        "cpus_usable": usable,
        "cpu_model": _cpu_model(),
        "load_avg": load,
        "platform": platform.platform(),
        "python": platform.python_version(),
        "torch": torch.__version__,
        "torch_num_threads": torch.get_num_threads(),
        "torch_num_interop_threads": torch.get_num_interop_threads(),
        "numpy": numpy.__version__,
        "gymnasium": gymnasium.__version__,
        "corral": corral_version,
    }


class Stopwatch:
    """A clock that can be paused (e.g. while a policy is evaluated)."""

    def __init__(self) -> None:
        self._elapsed = 0.0
        self._started: float | None = None

    def start(self) -> Stopwatch:
        if self._started is None:
            self._started = time.perf_counter()
        return self

    def pause(self) -> None:
        if self._started is not None:
            self._elapsed += time.perf_counter() - self._started
            self._started = None

    @property
    def elapsed(self) -> float:
        running = 0.0 if self._started is None else time.perf_counter() - self._started
        return self._elapsed + running

    def __enter__(self) -> Stopwatch:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.pause()


def evaluate_policy(env_id: str, act: Callable[[Any], Any], episodes: int, seed: int) -> float:
    """Mean return of `episodes` episodes of a fresh `env_id` (seeds `seed`, `seed + 1`, ...)."""
    import gymnasium as gym

    env = gym.make(env_id)
    total = 0.0
    try:
        for ep in range(episodes):
            obs, _ = env.reset(seed=seed + ep)
            done = False
            while not done:
                obs, reward, terminated, truncated, _ = env.step(act(obs))
                total += float(reward)
                done = terminated or truncated
    finally:
        env.close()
    return total / episodes


class Tracker:
    """A time-to-solve run: evaluation schedule, paused training clock, the run's record.

    Every `eval_every` env steps the deterministic policy plays `episodes`
    episodes of `env_id` (seeds from `eval_seed`) with the training clock
    paused; the run is solved at the first mean return >= `solved_at`.
    """

    def __init__(
        self,
        env_id: str,
        eval_every: int,
        solved_at: float,
        episodes: int,
        eval_seed: int = 10_000,
    ) -> None:
        self.env_id, self.eval_every, self.solved_at_return = env_id, eval_every, solved_at
        self.episodes, self.eval_seed = episodes, eval_seed
        self.next_eval = eval_every
        self.clock = Stopwatch()
        self.eval_s = 0.0
        self.curve: list[tuple[int, float]] = []
        self.solved_at: tuple[int, float] | None = None

    def due(self, steps: int) -> bool:
        return steps >= self.next_eval

    def evaluate(self, steps: int, act: Callable[[Any], Any]) -> bool:
        """Pauses the clock, evaluates, returns True when solved (clock stays paused)."""
        self.clock.pause()
        train_s = self.clock.elapsed
        t0 = time.perf_counter()
        mean_return = evaluate_policy(self.env_id, act, self.episodes, self.eval_seed)
        self.eval_s += time.perf_counter() - t0
        self.curve.append((steps, round(mean_return, 2)))
        while self.next_eval <= steps:
            self.next_eval += self.eval_every
        log(f"    {steps:>7} steps  {train_s:7.1f}s  eval {mean_return:8.1f}")
        if mean_return >= self.solved_at_return:
            self.solved_at = (steps, train_s)
            return True
        self.clock.start()
        return False

    def train(
        self, train_once: Callable[[], int], act: Callable[[Any], Any], budget: int
    ) -> tuple[int, int]:
        """Calls `train_once()` (returns the env steps so far) until solved or `budget`
        steps, evaluating when due; returns (env steps, iterations)."""
        steps = iterations = 0
        self.clock.start()
        while steps < budget:
            steps = train_once()
            iterations += 1
            if self.due(steps) and self.evaluate(steps, act):
                break
        return steps, iterations

    def train_sb3(self, model: Any, act: Callable[[Any], Any], budget: int) -> int:
        """Stable-Baselines3's `model.learn(budget)`, evaluated when due; returns env steps.

        The evaluation runs at the start of the rollout after each update (the
        policy trained on every batch up to there, as corral's is evaluated
        after `train()`), and once more after `learn()` for the last update.
        """
        from stable_baselines3.common.callbacks import BaseCallback

        tracker = self

        class EvalCallback(BaseCallback):
            solved = False

            def _on_rollout_start(self) -> None:
                if not self.solved and tracker.due(self.num_timesteps):
                    self.solved = tracker.evaluate(self.num_timesteps, act)

            def _on_step(self) -> bool:
                return not self.solved

        callback = EvalCallback()
        self.clock.start()
        model.learn(total_timesteps=budget, callback=callback)
        if not callback.solved and self.due(model.num_timesteps):
            self.evaluate(model.num_timesteps, act)
        return model.num_timesteps

    def record(self, final_steps: int) -> dict[str, Any]:
        self.clock.pause()
        solved = self.solved_at is not None
        return {
            "solved": solved,
            "steps": self.solved_at[0] if solved else None,
            "train_s": self.solved_at[1] if solved else None,
            "steps_run": final_steps,
            "train_s_run": self.clock.elapsed,
            "eval_s": self.eval_s,
            "evaluations": len(self.curve),
            "curve": self.curve,
        }


def load_tuned_config(relative_path: str) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """Reads a tuned example (RLlib's YAML layout: `name: {env, run, stop, config}`).

    Returns (env id, config dict, stop criteria).
    """
    import yaml

    path = TUNED_EXAMPLES / relative_path
    if not path.exists():
        raise FileNotFoundError(f"Tuned example {path} does not exist.")
    with open(path) as f:
        data = yaml.safe_load(f)
    if not isinstance(data, dict) or len(data) != 1:
        raise ValueError(f"{path}: expected one top-level experiment, got {list(data or {})}.")
    (spec,) = data.values()
    config = dict(spec.get("config") or {})
    env = spec.get("env") or config.pop("env", None)
    return env, config, dict(spec.get("stop") or {})


def run_child(
    script: str, lib: str, seed: int, args: Any, python: str | None = None
) -> dict[str, Any]:
    """Runs one library's training in a fresh interpreter (`script --child lib`).

    Each run gets its own process so that one library's one-off costs (torch's
    first optimiser import, thread pools) never land on the other's clock. The
    child prints its result as a final `JSON:` line. `python` is the interpreter
    (default: this one), e.g. a separate environment holding a library whose
    pinned dependencies clash with corral's.
    """
    import json
    import subprocess
    import sys

    cmd = [python or sys.executable, os.path.abspath(script), "--child", lib, "--seed", str(seed)]
    cmd += ["--budget", str(args.budget), "--eval-every", str(args.eval_every)]
    if args.threads:
        cmd += ["--threads", str(args.threads)]
    cmd += getattr(args, "child_args", [])
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, timeout=args.timeout)
    wall = time.perf_counter() - t0
    lines = [line for line in proc.stdout.splitlines() if line.startswith("JSON:")]
    if proc.returncode != 0 or not lines:
        return {"error": f"exit code {proc.returncode}", "process_wall_s": wall}
    return {**json.loads(lines[-1][5:]), "process_wall_s": wall}
