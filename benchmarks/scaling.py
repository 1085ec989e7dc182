"""Scaling: env steps/s per number of workers, learner samples/s per number of learners,
on both backends, and each backend's start-up time next to `ray.init()` alone.

- Sampling: PPO's CartPole workers (`num_envs_per_worker` 8), `sample()` on every remote
  worker at once (`synchronous_parallel_sample`), for 1, 2 (and more with `--max-workers`).
- Learning: one PPO train batch (`--batch` rows, minibatches of 256, 5 epochs, a
  256x256 net) through `learner_group.update` with `num_learners` 0 (the driver),
  1 and 2 (and more with `--max-learners`), the same batch every time.
- Start-up: building a `PPOTrainer` with 2 workers (and, apart, with 2 learners) on each
  backend; for "ray", `ray.init()` alone is timed first and the trainer's time is
  what it adds on top, next to 2 bare actors that only import torch and gymnasium
  (`bare_2_actors_import_torch_s`: the floor, since every worker actor is a fresh
  process that imports them).

What limits each figure is printed with it: free cores (the machine's load average is in
the machine record; with fewer free cores than processes the figures only show the
overhead), the per-minibatch all-reduce for learners (one message per backward pass),
and for Ray its actor start-up and object transfer.

Usage:
    python benchmarks/scaling.py               # local backend, then Ray if installed
    python benchmarks/scaling.py --no-ray
    python benchmarks/scaling.py --max-workers 4 --max-learners 4
"""

from __future__ import annotations

import argparse
import importlib.util
import time

from _common import emit, log, machine_info, median

CARTPOLE = "CartPole-v1"


def _sampling(backend: str, num_workers: int, rounds: int) -> dict:
    from corral.agents.ppo import PPOTrainer
    from corral.execution.rollout_ops import synchronous_parallel_sample

    trainer = PPOTrainer(
        config={
            "backend": backend,
            "num_workers": num_workers,
            "num_envs_per_worker": 8,
            "rollout_fragment_length": 64,
            "train_batch_size": 64 * 8 * num_workers,
        },
        env=CARTPOLE,
    )
    try:
        synchronous_parallel_sample(trainer.workers)  # warm-up
        rates = []
        for _ in range(rounds):
            start = time.perf_counter()
            batch = synchronous_parallel_sample(trainer.workers)
            rates.append(batch.env_steps() / (time.perf_counter() - start))
        return {"env_steps_per_s": median(rates)}
    finally:
        trainer.stop()


def _learning(backend: str, num_learners: int, batch, rounds: int, minibatch: int) -> dict:
    from corral.agents.ppo import PPOTrainer

    trainer = PPOTrainer(
        config={
            "backend": backend,
            "num_workers": 0,
            "num_learners": num_learners,
            "model": {"fcnet_hiddens": [256, 256]},
            "seed": 0,
        },
        env=CARTPOLE,
    )
    try:
        group = trainer.learner_group
        group.update(batch=batch.copy(), minibatch_size=minibatch, num_epochs=1)  # warm-up
        rates = []
        for _ in range(rounds):
            start = time.perf_counter()
            group.update(batch=batch.copy(), minibatch_size=minibatch, num_epochs=5)
            rates.append(5 * batch.env_steps() / (time.perf_counter() - start))
        return {"learner_samples_per_s": median(rates)}
    finally:
        trainer.stop()


def _startup(backend: str, **config) -> float:
    from corral.agents.ppo import PPOTrainer

    start = time.perf_counter()
    trainer = PPOTrainer(config={"backend": backend, **config}, env=CARTPOLE)
    if config.get("num_learners"):
        trainer.learner_group  # noqa: B018 - learners start on first use
    elapsed = time.perf_counter() - start
    trainer.stop()
    return elapsed


def _bare_actors_start(n: int) -> float:
    """Seconds until `n` Ray actors that only import torch and gymnasium are ready: the
    floor under a trainer's Ray start-up (each worker actor is a fresh process that
    imports them before it builds an env and a policy)."""
    import ray

    @ray.remote(num_cpus=0)
    class Bare:
        def __init__(self) -> None:
            import gymnasium  # noqa: F401
            import torch  # noqa: F401

        def ready(self) -> bool:
            return True

    start = time.perf_counter()
    actors = [Bare.remote() for _ in range(n)]
    ray.get([a.ready.remote() for a in actors])
    elapsed = time.perf_counter() - start
    for a in actors:
        ray.kill(a)
    return elapsed


def _allreduce_rank(rank: int, port: int, numel: int, calls: int, out) -> None:
    import os

    import torch
    import torch.distributed as dist

    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=2)
    grads = torch.randn(numel)
    for _ in range(20):
        dist.all_reduce(grads)
    dist.barrier()
    start, cpu = time.perf_counter(), time.process_time()
    for _ in range(calls):
        dist.all_reduce(grads)
    if rank == 0:
        out.put(((time.perf_counter() - start) / calls, (time.process_time() - cpu) / calls))
    dist.destroy_process_group()


def _allreduce_floor(numel: int, calls: int = 300) -> dict:
    """Wall and CPU seconds of one gloo all-reduce of `numel` floats between 2 local
    processes that do nothing else: the floor under each minibatch of 2 learners."""
    import multiprocessing as mp
    import socket

    with socket.socket() as sock:  # a free port for the rendezvous
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_allreduce_rank, args=(r, port, numel, calls, out)) for r in (0, 1)]
    for proc in procs:
        proc.start()
    wall, cpu = out.get(timeout=120)
    for proc in procs:
        proc.join()
    return {"floats": numel, "wall_ms": 1000 * wall, "cpu_ms": 1000 * cpu}


def _ppo_params() -> int:
    """Trainable floats in the learning rows' PPO policy (the all-reduced gradient)."""
    from corral.agents.ppo import PPOTrainer

    trainer = PPOTrainer(
        config={"num_workers": 0, "model": {"fcnet_hiddens": [256, 256]}}, env=CARTPOLE
    )
    policy = trainer.get_policy()
    numel = sum(p.numel() for p in policy.model.parameters() if p.requires_grad)
    trainer.stop()
    return numel


def _train_batch(rows: int):
    from corral.agents.ppo import PPOTrainer
    from corral.agents.ppo.ppo import standardize

    trainer = PPOTrainer(
        config={"num_workers": 0, "train_batch_size": rows, "rollout_fragment_length": rows},
        env=CARTPOLE,
    )
    batch = trainer.workers.local_worker().sample().as_multi_agent()
    trainer.stop()
    for policy_batch in batch.policy_batches.values():
        standardize(policy_batch, "advantages")
    return batch


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--no-ray", action="store_true", help="only the local backend")
    parser.add_argument("--max-workers", type=int, default=2)
    parser.add_argument("--max-learners", type=int, default=2)
    parser.add_argument("--batch", type=int, default=4000, help="train batch rows")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--minibatch",
        type=int,
        nargs="+",
        default=[256],
        help="learner minibatch sizes (rows over all learners) to measure",
    )
    args = parser.parse_args()
    emit({"bench": "scaling", "machine": machine_info()})
    backends = ["local"]
    if not args.no_ray and importlib.util.find_spec("ray") is not None:
        backends.append("ray")
    batch = _train_batch(args.batch)
    if args.max_learners >= 2:
        params = _ppo_params()
        for numel in (1_000, params):
            emit({"bench": "scaling", "allreduce_floor": _allreduce_floor(numel)})
    for backend in backends:
        if backend == "ray":
            import ray

            start = time.perf_counter()
            ray.init(include_dashboard=False, log_to_driver=False)
            emit({"bench": "scaling", "backend": "ray", "ray_init_s": time.perf_counter() - start})
        startup = _startup(backend, num_workers=2)
        learners_startup = _startup(backend, num_workers=0, num_learners=2)
        floor = {"bare_2_actors_import_torch_s": _bare_actors_start(2)} if backend == "ray" else {}
        emit(
            {
                "bench": "scaling",
                "backend": backend,
                "trainer_2_workers_start_s": startup,
                "trainer_2_learners_start_s": learners_startup,
                **floor,
                "note": "on top of ray.init()" if backend == "ray" else "forked processes",
            }
        )
        base_steps = None
        for n in range(1, args.max_workers + 1):
            log(f"sampling: {backend}, {n} workers")
            rec = _sampling(backend, n, args.rounds)
            base_steps = base_steps or rec["env_steps_per_s"]
            emit(
                {
                    "bench": "scaling",
                    "backend": backend,
                    "num_workers": n,
                    **rec,
                    "speedup": rec["env_steps_per_s"] / base_steps,
                    "limit": "free cores (one per worker), then the driver's batch assembly",
                }
            )
        for minibatch in args.minibatch:
            base_samples = None
            for n in range(0, args.max_learners + 1):
                log(f"learning: {backend}, {n} learners, minibatch {minibatch}")
                rec = _learning(backend, n, batch, args.rounds, minibatch)
                base_samples = base_samples or rec["learner_samples_per_s"]
                emit(
                    {
                        "bench": "scaling",
                        "backend": backend,
                        "num_learners": n,
                        "minibatch": minibatch,
                        **rec,
                        "speedup_over_driver": rec["learner_samples_per_s"] / base_samples,
                        "limit": (
                            "one core"
                            if n == 0
                            else "free cores (one per learner), one gradient all-reduce "
                            "per minibatch (allreduce_floor), the shards and weights "
                            "sent per update"
                        ),
                    }
                )
        if backend == "ray":
            import ray

            ray.shutdown()


if __name__ == "__main__":
    main()
