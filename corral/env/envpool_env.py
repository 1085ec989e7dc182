"""EnvPool's C++ thread pool as a worker's vector env (`vectorize_mode="envpool"`).

EnvPool (an optional extra: `pip install corral[envpool]`) steps a batch of
CartPole, Atari or MuJoCo envs in C++ threads behind one Python call. Its
Gymnasium API returns Gymnasium 1.x's NEXT_STEP autoreset (the step after an
episode's end returns the new episode's first observation, reward 0), which
`corral.env.native_vector_env.BatchedVectorEnv` maps to corral's episodes.

Seeds: EnvPool seeds sub-env `i` with `seed + i` when the pool is made (its
`reset()` does not reseed), so the worker passes its seed here; a worker
without a seed gets a random one.

`env_splits` > 1 makes `EnvPoolSplits`: several pools whose groups of sub-envs the
sampler steps in turn (`corral.evaluation.sampler_split`), so that EnvPool's threads
step one group while the policy acts for the next.
"""

from __future__ import annotations

import contextlib
import difflib
import os
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, TypeVar

import numpy as np

from corral.env.native_vector_env import (
    BatchedVectorEnv,
    InfoRows,
    SubEnvView,
    has_image_frames,
    is_envpool_env,  # noqa: F401 - re-exported
)
from corral.utils.sys_usage import usable_cores

INSTALL_HINT = "pip install corral[envpool]"

_T = TypeVar("_T")


def import_envpool() -> Any:
    """The `envpool` module, or an ImportError saying how to install it."""
    try:
        import envpool
    except ImportError as e:
        raise ImportError(
            f"vectorize_mode='envpool' needs the envpool package ({INSTALL_HINT})."
        ) from e
    return envpool


def check_task_id(task_id: Any) -> Any:
    """Raises unless envpool is installed and knows `task_id`; returns the module."""
    envpool = import_envpool()
    known = list(envpool.list_all_envs())
    if not isinstance(task_id, str) or task_id not in known:
        close = difflib.get_close_matches(str(task_id), known, n=3)
        hint = f" Did you mean: {', '.join(repr(c) for c in close)}?" if close else ""
        raise ValueError(
            f"vectorize_mode='envpool': {task_id!r} is not an EnvPool task id "
            f"(envpool.list_all_envs() lists {len(known)}).{hint}"
        )
    return envpool


def make_envpool_env(
    task_id: Any, num_envs: int, seed: int | None, env_config: Mapping[str, Any] | None = None
) -> Any:
    """`envpool.make(task_id, env_type="gymnasium", num_envs=..., seed=..., **env_config)`.

    Args:
        task_id: an EnvPool task id (`envpool.list_all_envs()`, e.g. "CartPole-v1",
            "Pong-v5").
        num_envs: sub-envs in the pool.
        seed: the seed of sub-env 0 (sub-env `i` gets `seed + i`); None: random.
        env_config: further keyword arguments of `envpool.make` (e.g.
            `num_threads`, `batch_size`, Atari's `episodic_life`).

    Raises:
        ImportError: envpool is not installed.
        ValueError: `task_id` is not an EnvPool task.
    """
    envpool = check_task_id(task_id)
    kwargs = dict(env_config or {})
    if "batch_size" in kwargs and kwargs["batch_size"] not in (None, num_envs):
        # An asynchronous pool returns only some sub-envs per step; corral steps all.
        raise ValueError(
            f"vectorize_mode='envpool': batch_size={kwargs['batch_size']!r} would make the pool "
            f"asynchronous; corral steps all {num_envs} sub-envs together (leave it unset)."
        )
    if seed is None:
        seed = _random_seed()
    return envpool.make(task_id, env_type="gymnasium", num_envs=num_envs, seed=int(seed), **kwargs)


def _random_seed() -> int:
    """A seed for a pool whose worker has none."""
    return int(np.random.SeedSequence().entropy % 2**31)  # type: ignore[operator]


def envpool_env_creator(task_id: Any) -> Any:
    """The trainer's env creator for `vectorize_mode="envpool"`: `task_id` is checked
    now (and envpool's presence); the creator makes a pool of one sub-env (workers
    make their own pools of `num_envs_per_worker`, `corral.env.native_vector_env`)."""
    check_task_id(task_id)
    return lambda ctx: make_envpool_env(task_id, 1, None, dict(ctx))


class EnvPoolSplits(BatchedVectorEnv):
    """`env_splits` EnvPool pools as one batched vector env whose groups step in turn.

    Group `g` is pool `g`, sub-envs `groups[g]` of the worker. The sampler sends a
    group's actions (`send_group`) and, while EnvPool's threads step it, receives,
    records and acts for the next group (double-buffered sampling): the policy's
    forward pass overlaps the env's C++ step instead of waiting for it. Pool `g` is
    made with seed `seed + g * group_size`, so sub-env `i` of the worker gets
    `seed + i`, as in one pool of all of them.

    Args:
        pools: the EnvPool pools, each of the same task and number of sub-envs.
        name: what error messages call it.
        channels_last: hand image frames on as `[H, W, C]` (see `BatchedVectorEnv`).
    """

    def __init__(self, pools: Sequence[Any], name: str, channels_last: bool = False) -> None:
        super().__init__(pools[0], name=name, channels_last=channels_last)
        self.pools = list(pools)
        size = int(pools[0].num_envs)
        self.group_size = size
        self.num_envs = size * len(self.pools)
        # Read by the sampler: the sub-envs of each group, stepped with send/recv_group.
        self.groups = [slice(g * size, (g + 1) * size) for g in range(len(self.pools))]
        self.envs = [SubEnvView(self, i) for i in range(self.num_envs)]

    def vector_reset(self, seed: int | None = None) -> np.ndarray:
        """Resets every pool (EnvPool takes its seeds when made); the stacked first
        observations of all groups."""
        return self.frames(np.concatenate([pool.reset()[0] for pool in self.pools]))

    def send_group(self, g: int, actions: Any) -> None:
        """Starts a step of group `g` with its sub-envs' actions (returns at once)."""
        self.pools[g].send(np.asarray(actions))

    def recv_group(self, g: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, InfoRows]:
        """Waits for group `g`'s step; its results as `step_batched` gives them."""
        obs, rewards, terminated, truncated, info = self.pools[g].recv()
        return self.frames(obs), rewards, terminated, truncated, InfoRows(info, self.group_size)

    def step_batched(self, actions: Any) -> tuple[Any, Any, Any, Any, Any]:
        """One step of every group at once (all sent, then all received)."""
        actions = np.asarray(actions)
        for g, cols in enumerate(self.groups):
            self.send_group(g, actions[cols])
        parts = [self.recv_group(g) for g in range(len(self.groups))]
        stacked = [np.concatenate([p[k] for p in parts]) for k in range(4)]
        infos = [row for p in parts for row in p[4]]
        return stacked[0], stacked[1], stacked[2], stacked[3], infos

    def stop(self) -> None:
        """Closes every pool."""
        for pool in self.pools:
            pool.close()


def make_envpool_splits(
    task_id: Any,
    num_envs: int,
    splits: int,
    seed: int | None,
    env_config: Mapping[str, Any] | None = None,
) -> EnvPoolSplits:
    """`splits` pools of `num_envs // splits` sub-envs (`env_splits`), seeded so that
    sub-env `i` of the whole gets `seed + i`; None: one random seed for all.

    The pools share the machine with the sampler's thread, which is what split sampling
    waits on. Where the OS has a scheduling class for threads that run only on cores no
    other thread wants (Linux's `SCHED_IDLE`), the pools are made on a short-lived thread
    in that class, whose threads EnvPool's inherit: a group's wake-up never takes the core
    from the sampler computing the next group's actions, and unless `env_config` sets
    `num_threads` each pool gets a thread per core (at most one per sub-env) to fill
    every core the sampler leaves idle. No other thread of the process changes class.
    Elsewhere (or where the class is refused, e.g. by a container's seccomp policy) each
    pool gets `cpu_count // splits` threads instead of EnvPool's one per sub-env, whose
    wake-ups would preempt the sampler's thread.
    """
    if splits < 1 or num_envs % splits:
        raise ValueError(
            f"env_splits={splits!r} must be >= 1 and divide num_envs_per_worker={num_envs}."
        )
    if seed is None:
        seed = _random_seed()
    size = num_envs // splits

    def make_pools(idle_class: bool) -> list[Any]:
        config = dict(env_config or {})
        if not config.get("num_threads"):
            cores = usable_cores() if idle_class else usable_cores() // splits
            config["num_threads"] = max(1, min(size, cores))
        return [make_envpool_env(task_id, size, seed + g * size, config) for g in range(splits)]

    pools = _on_idle_thread(make_pools)
    return EnvPoolSplits(pools, name=f"envpool:{task_id}", channels_last=has_image_frames(pools[0]))


def _on_idle_thread(make: Callable[[bool], _T]) -> _T:
    """`make(idle_class)` called on a new thread that first puts itself in Linux's
    `SCHED_IDLE` class (`idle_class`: whether it got in; no privilege is needed), so that
    the threads `make` starts inherit the class. The thread ends with the call; its
    exception, if any, is raised here."""

    def run() -> _T:
        idle_class = False
        if hasattr(os, "SCHED_IDLE") and hasattr(os, "sched_setscheduler"):
            # OSError: the OS or a seccomp policy refuses the class.
            with contextlib.suppress(OSError):
                os.sched_setscheduler(0, os.SCHED_IDLE, os.sched_param(0))  # this thread only
                idle_class = True
        return make(idle_class)

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="corral-envpool-maker") as one:
        return one.submit(run).result()
