"""EnvPool's C++ thread pool as a worker's vector env (`vectorize_mode="envpool"`).

EnvPool (an optional extra: `pip install corral[envpool]`) steps a batch of
CartPole, Atari or MuJoCo envs in C++ threads behind one Python call. Its
Gymnasium API returns Gymnasium 1.x's NEXT_STEP autoreset (the step after an
episode's end returns the new episode's first observation, reward 0), which
`corral.env.native_vector_env.BatchedVectorEnv` maps to corral's episodes.

Seeds: EnvPool seeds sub-env `i` with `seed + i` when the pool is made (its
`reset()` does not reseed), so the worker passes its seed here; a worker
without a seed gets a random one.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

import numpy as np

from corral.env.native_vector_env import is_envpool_env  # noqa: F401 - re-exported

INSTALL_HINT = "pip install corral[envpool]"


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
        seed = int(np.random.SeedSequence().entropy % 2**31)  # type: ignore[operator]
    return envpool.make(task_id, env_type="gymnasium", num_envs=num_envs, seed=int(seed), **kwargs)


def envpool_env_creator(task_id: Any) -> Any:
    """The trainer's env creator for `vectorize_mode="envpool"`: `task_id` is checked
    now (and envpool's presence); the creator makes a pool of one sub-env (workers
    make their own pools of `num_envs_per_worker`, `corral.env.native_vector_env`)."""
    check_task_id(task_id)
    return lambda ctx: make_envpool_env(task_id, 1, None, dict(ctx))
