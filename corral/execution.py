"""Building blocks of `training_step`s (RLlib's execution operators, as functions)."""

from __future__ import annotations

from typing import Any

from corral.evaluation.backend import wait_all
from corral.policy.sample_batch import concat_samples


def synchronous_parallel_sample(
    worker_set: Any, max_env_steps: int | None = None, max_agent_steps: int | None = None
) -> Any:
    """Samples from all remote workers at once (or the local worker when there
    are none) until at least `max_env_steps` env steps, or `max_agent_steps`
    agent steps (one per agent action), are collected."""
    if max_env_steps is not None and max_agent_steps is not None:
        raise ValueError("Give at most one of `max_env_steps` and `max_agent_steps`.")
    count = (
        (lambda b: b.agent_steps()) if max_agent_steps is not None else (lambda b: b.env_steps())
    )
    batches: list[Any] = []
    steps = 0
    target = max_env_steps or max_agent_steps or 0
    while True:
        remote = worker_set.remote_workers()
        if remote:
            new = wait_all([w.call("sample") for w in remote])
        else:
            new = [worker_set.local_worker().sample()]
        batches.extend(new)
        steps += sum(count(b) for b in new)
        if steps >= target:
            return concat_samples(batches)
