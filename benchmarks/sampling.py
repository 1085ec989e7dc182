"""Env steps/s of corral's `RolloutWorker.sample()` against a raw hand-written loop.

For each configuration (env x sampling processes x envs per process), the same
run measures, alternating, repeated and taking the median:

- corral: a PPO policy (64x64 tanh MLP, separate value net) sampling with
  `RolloutWorker.sample()`; 1 process = the driver's local worker
  (`num_workers=0`), n > 1 processes = `num_workers=n` remote workers sampling
  in parallel (steps summed over workers, per wall-clock second).
- raw: `gymnasium.vector.SyncVectorEnv` with the same number of envs and the
  same MLPs (policy net and value net, both computed every step as corral's
  sampler does), `torch.inference_mode()`, `torch.set_num_threads(1)`,
  categorical sampling by `torch.multinomial` on the softmax (Gaussian for
  Pendulum), numpy <-> torch every step. With n > 1 processes the raw loop runs
  in n processes at once (a barrier starts their clocks together) and the
  steps are summed over the slowest one's wall time.

Batched vector envs (`--vectorize native envpool`): corral samples with
`vectorize_mode="native"` (`gymnasium.make_vec(..., vectorization_mode=
"vector_entry_point")`) or `"envpool"` (an EnvPool pool), and the raw loop steps
the same kind of vector env (in a process of its own, alternating with corral as
above). Both count transitions: the step in which such an env resets a sub-env
after its episode ended (NEXT_STEP autoreset) is not counted by the raw loop,
and corral drops it from its batches.

Threads: corral's local worker samples with the torch thread count its
trainer gives the driver (`num_cpus_for_driver`), remote workers with their
own (`num_cpus_per_worker`); both are reported per configuration
(`corral_torch_threads`). The raw loop always uses 1 thread.

corral does more per step than the raw loop (log-probs, preallocated batch
buffers, episode bookkeeping) and `sample()` also postprocesses the fragment
(GAE with bootstrapped values), so the ratio measures everything that a
training step pays for sampling.

Usage:
    python benchmarks/sampling.py            # 1 process x 8 envs, both envs
    python benchmarks/sampling.py --full     # 1 and 2 processes x 1, 8, 32 envs
    python benchmarks/sampling.py --quick    # smoke test, a few seconds
    python benchmarks/sampling.py --envs CartPole-v1 --vectorize native envpool --repeats 5
    python benchmarks/sampling.py --envs CartPole-v1 --steps 2000 --pong-envpool \
        --envpool-config '{"num_threads": 2, "thread_affinity_offset": 0}'  # pinned pools
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import time
from typing import Any

import _common
from _common import emit, log, machine_info, median, ratio

from corral.utils.sys_usage import usable_cores

ENVS = ("CartPole-v1", "Pendulum-v1")
VECTORIZE = ("sequential", "native", "envpool")
HIDDENS = (64, 64)


# -- the raw reference loop ---------------------------------------------------


def _mlp(in_size: int, out_size: int):
    from torch import nn

    layers: list[Any] = []
    for size in HIDDENS:
        layers += [nn.Linear(in_size, size), nn.Tanh()]
        in_size = size
    layers.append(nn.Linear(in_size, out_size))
    return nn.Sequential(*layers)


def make_vector_env(env_id: str, num_envs: int, vectorize: str, seed: int) -> Any:
    """The raw loop's vector env: `SyncVectorEnv` of `gym.make` envs ("sequential"),
    Gymnasium's numpy-batched vector env ("native") or an EnvPool pool ("envpool"):
    the same kind of vector env that corral's `vectorize_mode` builds."""
    import gymnasium as gym

    if vectorize == "native":
        return gym.make_vec(env_id, num_envs=num_envs, vectorization_mode="vector_entry_point")
    if vectorize == "envpool":
        import envpool

        return envpool.make(env_id, env_type="gymnasium", num_envs=num_envs, seed=seed)
    kwargs = {}
    if hasattr(gym.vector, "AutoresetMode"):
        # Reset inside the step that ended the episode, as corral's sampler does.
        kwargs["autoreset_mode"] = gym.vector.AutoresetMode.SAME_STEP
    return gym.vector.SyncVectorEnv([lambda: gym.make(env_id) for _ in range(num_envs)], **kwargs)


def supports(env_id: str, vectorize: str) -> bool:
    """Whether `vectorize` can build `env_id` (a vector entry point, an EnvPool task)."""
    if vectorize == "native":
        import gymnasium as gym

        return gym.registry[env_id].vector_entry_point is not None
    if vectorize == "envpool":
        try:
            import envpool
        except ImportError:
            return False
        return env_id in envpool.list_all_envs()
    return True


class RawSampler:
    """A vector env + policy MLP + value MLP, the shortest honest sampling loop.

    Native and EnvPool vector envs reset a sub-env in the step after its episode
    ended (NEXT_STEP autoreset); that step is no transition, so it is not counted
    (corral drops it from its batches, which count transitions).
    """

    def __init__(
        self, env_id: str, num_envs: int, seed: int = 0, vectorize: str = "sequential"
    ) -> None:
        import gymnasium as gym
        import numpy as np
        import torch

        torch.manual_seed(seed)
        self.env = make_vector_env(env_id, num_envs, vectorize, seed)
        self.next_step = vectorize != "sequential"
        self.prev_done = np.zeros(num_envs, np.bool_)
        self.num_envs = num_envs
        obs_space = self.env.single_observation_space
        act_space = self.env.single_action_space
        obs_dim = int(np.prod(obs_space.shape))
        self.discrete = isinstance(act_space, gym.spaces.Discrete)
        if self.discrete:
            out = int(act_space.n)
        else:
            out = 2 * int(np.prod(act_space.shape))  # mean and log-std
            self.low, self.high = act_space.low, act_space.high
        self.pi = _mlp(obs_dim, out)
        self.vf = _mlp(obs_dim, 1)
        self.obs, _ = self.env.reset() if vectorize == "envpool" else self.env.reset(seed=seed)

    def run(self, num_steps: int) -> int:
        """Steps every env until `num_steps` env steps are done; returns the count."""
        import numpy as np
        import torch

        env, pi, vf = self.env, self.pi, self.vf
        obs = self.obs
        steps = 0
        with torch.inference_mode():
            while steps < num_steps:
                obs_t = torch.from_numpy(np.asarray(obs, dtype=np.float32))
                out = pi(obs_t)
                vf(obs_t)
                if self.discrete:
                    actions = torch.multinomial(torch.softmax(out, dim=-1), 1).squeeze(-1)
                    env_actions = actions.numpy()
                else:
                    mean, log_std = out.chunk(2, dim=-1)
                    actions = torch.normal(mean, log_std.exp())
                    a = actions.numpy()
                    env_actions = np.clip(
                        self.low + (a + 1.0) * 0.5 * (self.high - self.low), self.low, self.high
                    )
                obs, _, term, trunc, _ = env.step(env_actions)
                if self.next_step:  # sub-envs that only reset in this step did no step
                    steps += self.num_envs - int(self.prev_done.sum())
                    self.prev_done = term | trunc
                else:
                    steps += self.num_envs
        self.obs = obs
        return steps

    def close(self) -> None:
        self.env.close()


def _raw_process(conn, barrier, env_id: str, num_envs: int, seed: int, vectorize: str) -> None:
    import torch

    torch.set_num_threads(1)
    sampler = RawSampler(env_id, num_envs, seed, vectorize)
    conn.send("ready")
    while True:
        cmd, arg = conn.recv()
        if cmd == "stop":
            sampler.close()
            return
        if cmd == "run":
            sampler.run(arg)  # warm-up, untimed
        else:  # "timed"
            barrier.wait()
            t0 = time.perf_counter()
            steps = sampler.run(arg)
            conn.send((steps, time.perf_counter() - t0))
            continue
        conn.send("ok")


class RawPool:
    """n processes each running a `RawSampler`, timed together."""

    def __init__(self, n: int, env_id: str, num_envs: int, vectorize: str) -> None:
        ctx = mp.get_context("spawn")
        self.barrier = ctx.Barrier(n)
        self.conns, self.procs = [], []
        for i in range(n):
            parent, child = ctx.Pipe()
            p = ctx.Process(
                target=_raw_process,
                args=(child, self.barrier, env_id, num_envs, 1000 * (i + 1), vectorize),
                daemon=True,
            )
            p.start()
            self.conns.append(parent)
            self.procs.append(p)
        for c in self.conns:
            c.recv()

    def warmup(self, steps: int) -> None:
        for c in self.conns:
            c.send(("run", steps))
        for c in self.conns:
            c.recv()

    def timed(self, steps: int) -> tuple[int, float]:
        for c in self.conns:
            c.send(("timed", steps))
        results = [c.recv() for c in self.conns]
        return sum(s for s, _ in results), max(t for _, t in results)

    def close(self) -> None:
        for c in self.conns:
            c.send(("stop", None))
        for p in self.procs:
            p.join(timeout=10)
            if p.is_alive():
                p.kill()


# -- corral -------------------------------------------------------------------


def corral_config(
    workers: int, envs: int, fragment: int, vectorize: str = "sequential"
) -> dict[str, Any]:
    return {
        "vectorize_mode": vectorize,
        "num_workers": 0 if workers == 1 else workers,
        "num_envs_per_worker": envs,
        "rollout_fragment_length": fragment,
        "train_batch_size": fragment * envs * workers,
        "sgd_minibatch_size": min(128, fragment * envs * workers),
        "model": {
            "fcnet_hiddens": list(HIDDENS),
            "fcnet_activation": "tanh",
            "vf_share_layers": False,
        },
        "seed": 0,
        "log_level": "ERROR",
    }


class CorralSampler:
    def __init__(
        self, env_id: str, workers: int, envs: int, fragment: int, vectorize: str = "sequential"
    ) -> None:
        from corral.agents.ppo import PPOTrainer

        self.workers = workers
        config = corral_config(workers, envs, fragment, vectorize)
        self.trainer = PPOTrainer(config=config, env=env_id)
        self.local = self.trainer.workers.local_worker()
        self.remotes = self.trainer.workers.remote_workers()

    def torch_threads(self) -> list[int]:
        import torch

        if self.workers == 1:
            return [torch.get_num_threads()]
        from corral.evaluation.backend import wait_all

        def threads(worker):
            import torch

            return torch.get_num_threads()

        return wait_all([w.apply(threads) for w in self.remotes], timeout=60)

    def run(self, num_steps: int) -> int:
        steps = 0
        if self.workers == 1:
            while steps < num_steps:
                steps += self.local.sample().count
            return steps
        from corral.evaluation.backend import wait_all

        while steps < num_steps:
            batches = wait_all([w.call("sample") for w in self.remotes], timeout=600)
            steps += sum(b.count for b in batches)
        return steps

    def breakdown(self) -> dict[str, float] | None:
        """The sampler's own mean ms per vector step (env / inference / processing)."""
        if self.workers == 1:
            return self.local.sampler.timers.as_dict()
        from corral.evaluation.backend import wait_all

        future = self.remotes[0].apply(lambda w: w.sampler.timers.as_dict())
        return wait_all([future], timeout=60)[0]

    def stop(self) -> None:
        self.trainer.stop()


# -- Atari (Pong) -------------------------------------------------------------

PONG = "ALE/Pong-v5"
# RLlib's Atari PPO examples share the conv trunk between policy and value
# (`vf_share_layers: True`); PPO's default keeps two stacks. Pong rows report both.
SHARED_TRUNK = {"vf_share_layers": True}


def _pong_sampling(env: str, envs: int, steps: int, **config: Any) -> tuple[float, dict]:
    """PPO's local worker sampling `env` on `envs` envs: (steps/s, the sampler's timers)."""
    from corral.agents.ppo import PPOTrainer

    config = {
        "num_workers": 0,
        "num_envs_per_worker": envs,
        "rollout_fragment_length": 50,
        "train_batch_size": 50 * envs,
        "sgd_minibatch_size": 50 * envs,
        "seed": 0,
        "log_level": "ERROR",
        **config,
    }
    trainer = PPOTrainer(config=config, env=env)
    try:
        worker = trainer.workers.local_worker()
        worker.sample()
        done, t0 = 0, time.perf_counter()
        while done < steps:
            done += worker.sample().count
        return done / (time.perf_counter() - t0), worker.sampler.timers.as_dict()
    finally:
        trainer.stop()


def bench_pong(envs: int, steps: int) -> dict[str, Any]:
    """corral's sampling on Pong with DeepMind preprocessing (conv net policy),
    next to the env alone: the same wrapped envs stepped with random actions.

    There is no "same network" raw loop here: the reference is what the
    emulator and the frame processing cost by themselves.
    """
    import numpy as np

    from corral.env import EnvContext
    from corral.env.utils import make_env_creator

    corral_rate, _ = _pong_sampling(PONG, envs, steps, preprocessor_pref="deepmind")
    shared_rate, _ = _pong_sampling(
        PONG, envs, steps, preprocessor_pref="deepmind", model=SHARED_TRUNK
    )
    # The same env construction as corral's (frame skip inside the wrapper).
    make = make_env_creator(PONG, preprocessor_pref="deepmind")
    env_list = [make(EnvContext()) for _ in range(envs)]
    rng = np.random.default_rng(0)
    for e in env_list:
        e.reset(seed=0)
    done, t0 = 0, time.perf_counter()
    while done < steps:
        for e in env_list:
            _, _, term, trunc, _ = e.step(int(rng.integers(e.action_space.n)))
            if term or trunc:
                e.reset()
        done += envs
    env_rate = done / (time.perf_counter() - t0)
    for e in env_list:
        e.close()
    return {
        "bench": "sampling",
        "env": PONG,
        "preprocessing": "deepmind (84x84 grey, 4 frames)",
        "workers": 1,
        "envs_per_worker": envs,
        "corral_steps_per_s": corral_rate,
        "corral_shared_trunk_steps_per_s": shared_rate,
        "env_only_steps_per_s": env_rate,
        "ratio_to_env_only": ratio(corral_rate, env_rate),
        "shared_trunk_ratio_to_env_only": ratio(shared_rate, env_rate),
    }


ENVPOOL_PONG = "Pong-v5"


def bench_pong_envpool(
    envs: int, steps: int, repeats: int = 1, pool_config: dict[str, Any] | None = None
) -> dict[str, Any]:
    """corral's sampling on EnvPool's Pong (`vectorize_mode="envpool"`: the emulator and
    DeepMind's frame processing in C++, 84x84 grey, 4 frames), next to the same pool
    alone stepped with random actions (transitions counted on both sides).

    `pool_config`: further `envpool.make` arguments for both sides (corral's
    `env_config`), e.g. `{"num_threads": 2, "thread_affinity_offset": 0}`.

    Rows: PPO's default model (two conv stacks), the shared trunk, and the shared
    trunk with `env_splits=2` (two pools stepping while the policy acts for the other);
    each round runs every row once, in that order, then the env alone; medians.
    """
    import envpool
    import numpy as np

    def env_alone() -> float:
        pool = envpool.make(
            ENVPOOL_PONG, env_type="gymnasium", num_envs=envs, seed=0, **pool_config
        )
        pool.reset()
        rng = np.random.default_rng(0)
        n_actions = pool.single_action_space.n
        prev_done = np.zeros(envs, np.bool_)
        done, t0 = 0, time.perf_counter()
        while done < steps:
            _, _, term, trunc, _ = pool.step(rng.integers(n_actions, size=envs))
            done += envs - int(prev_done.sum())
            prev_done = term | trunc
        rate = done / (time.perf_counter() - t0)
        pool.close()
        return rate

    pool_config = dict(pool_config or {})
    rows = {
        "corral": {},
        "corral_shared_trunk": {"model": SHARED_TRUNK},
        "corral_shared_trunk_env_splits_2": {"model": SHARED_TRUNK, "env_splits": 2},
    }
    runs: dict[str, list[float]] = {name: [] for name in (*rows, "env_only")}
    breakdowns: dict[str, dict[str, float]] = {}
    for _ in range(repeats):
        for name, extra in rows.items():
            rate, breakdown = _pong_sampling(
                ENVPOOL_PONG, envs, steps, vectorize_mode="envpool", env_config=pool_config, **extra
            )
            runs[name].append(rate)
            breakdowns[name] = {k: v for k, v in breakdown.items() if k.startswith("mean_") and v}
        runs["env_only"].append(env_alone())
    rates = {name: median(r) for name, r in runs.items()}
    env_rate = rates["env_only"]
    # What the machine allows. The pool alone keeps its threads busy: `threads / rate`
    # core-seconds per env step. A row's own work per step is its forward pass and
    # processing (the sampler's timers, without its waits for the envs). Even overlapped
    # perfectly on the same cores, corral can reach at most env / (env + own work) of the
    # pool alone's rate (`overlap_bound`), measured with the own work of the rows that
    # step one pool (env_splits 1), where no pool thread competes for the sampler's core.
    env_core_s = min(usable_cores(), envs) / env_rate
    bounds = {}
    for name in ("corral", "corral_shared_trunk"):
        own_ms = breakdowns[name].get("mean_inference_ms", 0.0) + breakdowns[name].get(
            "mean_action_processing_ms", 0.0
        )
        bounds[name] = ratio(env_core_s, env_core_s + own_ms / 1e3 / envs)
    return {
        "bench": "sampling",
        "env": f"envpool:{ENVPOOL_PONG}",
        "vectorize_mode": "envpool",
        "preprocessing": "EnvPool's (84x84 grey, 4 frames, frame skip 4)",
        "pool_config": pool_config,
        "workers": 1,
        "envs_per_worker": envs,
        "repeats": repeats,
        **{f"{name}_steps_per_s": rate for name, rate in rates.items()},
        **{f"{name}_ratio_to_env_only": ratio(rates[name], env_rate) for name in rows},
        "runs": runs,
        "corral_sampler_ms_per_vector_step": breakdowns,
        "overlap_bound": {"cores": usable_cores(), **bounds},
    }


# -- driver -------------------------------------------------------------------


def bench_config(
    env_id: str, workers: int, envs: int, args: argparse.Namespace, vectorize: str = "sequential"
) -> dict[str, Any]:
    import torch

    default_threads = torch.get_num_threads()
    corral = CorralSampler(env_id, workers, envs, args.fragment, vectorize)
    # The trainer sets the driver's torch threads (`num_cpus_for_driver`); keep
    # that for corral unless --corral-threads overrides it.
    corral_threads = args.corral_threads or torch.get_num_threads()
    torch.set_num_threads(1)
    # Batched vector envs' raw loop runs in a process of its own even with 1 worker, so
    # that two EnvPool thread pools never share a process.
    own_process = workers > 1 or vectorize != "sequential"
    raw_pool = RawPool(workers, env_id, envs, vectorize) if own_process else None
    raw_local = RawSampler(env_id, envs, vectorize=vectorize) if not own_process else None
    # Steps per timed run: per sampling process, so that each process runs as long.
    steps = args.steps * workers
    corral_rates, raw_rates = [], []
    try:
        warm = max(args.steps // 10, 1)
        torch.set_num_threads(corral_threads)
        corral.run(warm * workers)
        worker_threads = corral.torch_threads()
        torch.set_num_threads(1)
        if raw_pool is not None:
            raw_pool.warmup(warm)
        else:
            raw_local.run(warm)
        # Each repeat alternates corral and raw in `slices` short slices, so that a
        # burst of load from other processes hits both sides alike.
        slice_steps = max(args.steps // args.slices, 1)
        for rep in range(args.repeats):
            c_steps = c_time = r_steps = r_time = 0.0
            for _ in range(args.slices):
                torch.set_num_threads(corral_threads)
                t0 = time.perf_counter()
                c_steps += corral.run(slice_steps * workers)
                c_time += time.perf_counter() - t0
                torch.set_num_threads(1)
                if raw_pool is not None:
                    n, dt = raw_pool.timed(slice_steps)
                else:
                    t0 = time.perf_counter()
                    n = raw_local.run(slice_steps)
                    dt = time.perf_counter() - t0
                r_steps += n
                r_time += dt
            corral_rates.append(c_steps / c_time)
            raw_rates.append(r_steps / r_time)
            log(
                f"  {env_id} [{vectorize}] {workers}x{envs} rep {rep}: "
                f"corral {corral_rates[-1]:,.0f}/s raw {raw_rates[-1]:,.0f}/s"
            )
        breakdown = corral.breakdown()
    finally:
        corral.stop()
        if raw_pool is not None:
            raw_pool.close()
        if raw_local is not None:
            raw_local.close()
        torch.set_num_threads(default_threads)
    c, r = median(corral_rates), median(raw_rates)
    return {
        "bench": "sampling",
        "env": env_id,
        "vectorize_mode": vectorize,
        "workers": workers,
        "envs_per_worker": envs,
        "rollout_fragment_length": args.fragment,
        "corral_steps_per_s": c,
        "raw_steps_per_s": r,
        "ratio": ratio(c, r),
        "corral_runs": corral_rates,
        "raw_runs": raw_rates,
        "timed_steps_per_run": steps,
        "slices_per_run": args.slices,
        "corral_torch_threads": worker_threads,
        "raw_torch_threads": 1,
        "corral_sampler_ms_per_vector_step": {
            k: v for k, v in (breakdown or {}).items() if k.startswith("mean_") and v
        },
    }


def scaling(rows: list[dict[str, Any]]) -> dict[str, dict[str, float | None]]:
    """Throughput of 2 worker processes over 1, for corral and for the raw loop.

    The raw loop's own scaling, measured in the same run, shows how much of a
    second core the machine actually gave.
    """
    by_key = {(r["env"], r["vectorize_mode"], r["workers"], r["envs_per_worker"]): r for r in rows}
    out = {}
    for (env, mode, workers, envs), two in by_key.items():
        one = by_key.get((env, mode, 1, envs))
        if workers != 2 or one is None:
            continue
        label = env if mode == "sequential" else f"{env}[{mode}]"
        out[f"{label}/x{envs}"] = {
            "corral": ratio(two["corral_steps_per_s"], one["corral_steps_per_s"]),
            "raw": ratio(two["raw_steps_per_s"], one["raw_steps_per_s"]),
        }
    return out


def row_key(row: dict[str, Any]) -> str:
    """A row's name in the summary: env[mode]/processes x envs ([mode] unless sequential)."""
    mode = row["vectorize_mode"]
    label = row["env"] if mode == "sequential" else f"{row['env']}[{mode}]"
    return f"{label}/{row['workers']}x{row['envs_per_worker']}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--envs", nargs="+", default=list(ENVS), help="gymnasium env ids")
    parser.add_argument(
        "--workers",
        nargs="+",
        type=int,
        default=[1],
        help="sampling processes: 1 = the local worker (num_workers=0), n>1 = n remote workers",
    )
    parser.add_argument("--envs-per-worker", nargs="+", type=int, default=[8])
    parser.add_argument(
        "--vectorize",
        nargs="+",
        choices=VECTORIZE,
        default=["sequential"],
        help="corral's vectorize_mode, the raw loop over the same kind of vector env "
        "(sequential: SyncVectorEnv; native: gymnasium.make_vec's vector entry point; "
        "envpool: an EnvPool pool); envs a mode cannot build are skipped",
    )
    parser.add_argument("--full", action="store_true", help="workers 1 2 x envs 1 8 32")
    parser.add_argument(
        "--pong",
        action="store_true",
        help=f"also sample {PONG} with DeepMind preprocessing (needs the `atari` extra)",
    )
    parser.add_argument(
        "--pong-envpool",
        action="store_true",
        help=f"also sample EnvPool's {ENVPOOL_PONG} (vectorize_mode='envpool'; needs envpool)",
    )
    parser.add_argument(
        "--envpool-config",
        type=json.loads,
        default={},
        help="--pong-envpool: further envpool.make arguments for both sides, as JSON "
        '(e.g. \'{"num_threads": 2, "thread_affinity_offset": 0}\')',
    )
    parser.add_argument("--quick", action="store_true", help="smoke test (a few seconds)")
    parser.add_argument(
        "--steps", type=int, default=20_000, help="env steps per timed run and process"
    )
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument(
        "--slices", type=int, default=4, help="alternating corral/raw slices per repeat"
    )
    parser.add_argument("--fragment", type=int, default=200, help="rollout_fragment_length")
    parser.add_argument(
        "--corral-threads",
        type=int,
        default=0,
        help="torch threads of the driver while corral's local worker samples "
        "(0: what the trainer sets, i.e. num_cpus_for_driver; remote workers set their own)",
    )
    args = parser.parse_args()
    if args.full:
        args.workers, args.envs_per_worker = [1, 2], [1, 8, 32]
    if args.quick:
        args.steps, args.repeats, args.slices, args.fragment = 2_000, 1, 2, 64
        args.workers, args.envs_per_worker = args.workers[:1], args.envs_per_worker[:1]

    import torch

    default_threads = torch.get_num_threads()
    info = machine_info()
    info["torch_default_threads"] = default_threads
    emit({"bench": "sampling", "machine": info, "results_dir": _common.use_temp_results_dir()})
    rows = []
    for vectorize in args.vectorize:
        for env_id in args.envs:
            if not supports(env_id, vectorize):
                log(f"sampling: {env_id} skipped: vectorize_mode={vectorize!r} cannot build it")
                continue
            for workers in args.workers:
                for envs in args.envs_per_worker:
                    log(f"sampling: {env_id} [{vectorize}], {workers} process(es) x {envs} envs")
                    row = bench_config(env_id, workers, envs, args, vectorize)
                    emit(row)
                    rows.append(row)
    if args.pong:
        log(f"sampling: {PONG}, 1 process x 4 envs")
        emit(bench_pong(4, 800 if args.quick else 4_000))
    if args.pong_envpool:
        log(f"sampling: envpool {ENVPOOL_PONG}, 1 process x 8 envs")
        emit(bench_pong_envpool(8, 800 if args.quick else 4_000, args.repeats, args.envpool_config))
    emit(
        {
            "bench": "sampling",
            "summary": True,
            "configs": len(rows),
            "scaling_2_over_1_worker": scaling(rows),
            "median_ratio": median(r["ratio"] for r in rows),
            "min_ratio": min((r["ratio"] for r in rows if r["ratio"] is not None), default=None),
            "ratios": {row_key(r): r["ratio"] for r in rows},
            "steps_per_run": args.steps,
            "repeats": args.repeats,
            "slices": args.slices,
            "torch_default_threads": default_threads,
            "raw_torch_threads": 1,
        }
    )


if __name__ == "__main__":
    main()
