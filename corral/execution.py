"""Building blocks of `training_step`s (RLlib's execution operators, as functions)."""

from __future__ import annotations

from typing import Any

from corral.evaluation.backend import wait_all
from corral.policy.sample_batch import concat_samples


def synchronous_parallel_sample(worker_set: Any, max_env_steps: int | None = None) -> Any:
    """Samples from all remote workers at once (or the local worker when there
    are none) until at least `max_env_steps` env steps are collected."""
    batches: list[Any] = []
    steps = 0
    target = max_env_steps or 0
    while True:
        remote = worker_set.remote_workers()
        if remote:
            new = wait_all([w.call("sample") for w in remote])
        else:
            new = [worker_set.local_worker().sample()]
        batches.extend(new)
        steps += sum(b.env_steps() for b in new)
        if steps >= target:
            return concat_samples(batches)
