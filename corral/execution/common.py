"""Trainer step counters: RLlib 1.13's counter names (`execution.common`) and the one way
corral's trainers count steps.

A trainer's `_counters` (a `defaultdict(int)`, reported in every result) counts
the env and agent steps sampled and trained over its lifetime. Algorithms count
through these helpers instead of typing the counter names out::

    sampled = count_sampled(trainer._counters, batch)  # after sampling
    results = trainer.learner_group.update(
        batch=batch, timesteps={NUM_ENV_STEPS_SAMPLED_LIFETIME: sampled}
    )
    count_trained(trainer._counters, batch)  # after the update
    trainer.workers.sync_weights(global_vars={"timestep": sampled})

`batch` is a `SampleBatch` or `MultiAgentBatch`: env steps are its
`env_steps()`, agent steps its `agent_steps()` (equal for a single agent).
"""

from __future__ import annotations

import weakref
from collections.abc import MutableMapping
from dataclasses import dataclass
from typing import Any, Protocol

# The key of `LearnerGroup.update(timesteps=...)` that schedules (lr, entropy) read.
from corral.core.learner.learner import NUM_ENV_STEPS_SAMPLED_LIFETIME  # noqa: F401
from corral.utils.metrics import (  # noqa: F401  (RLlib 1.13 has these names here too)
    APPLY_GRADS_TIMER,
    COMPUTE_GRADS_TIMER,
    GRAD_WAIT_TIMER,
    LAST_TARGET_UPDATE_TS,
    LEARN_ON_BATCH_TIMER,
    LOAD_BATCH_TIMER,
    NUM_AGENT_STEPS_SAMPLED,
    NUM_AGENT_STEPS_TRAINED,
    NUM_ENV_STEPS_SAMPLED,
    NUM_ENV_STEPS_TRAINED,
    NUM_TARGET_UPDATES,
    SAMPLE_TIMER,
    WORKER_UPDATE_TIMER,
)

# RLlib 1.13's older counter names, kept for code that imports them.
STEPS_SAMPLED_COUNTER = "num_steps_sampled"
AGENT_STEPS_SAMPLED_COUNTER = "num_agent_steps_sampled"
STEPS_TRAINED_COUNTER = "num_steps_trained"
STEPS_TRAINED_THIS_ITER_COUNTER = "num_steps_trained_this_iter"
AGENT_STEPS_TRAINED_COUNTER = "num_agent_steps_trained"

Counters = MutableMapping[str, int]


class CountableBatch(Protocol):
    """What the counters read of a batch (`SampleBatch` and `MultiAgentBatch` have both)."""

    def env_steps(self) -> int:
        """Environment steps in the batch."""
        ...

    def agent_steps(self) -> int:
        """Agent steps in the batch (summed over agents)."""
        ...


def count_sampled(counters: Counters, batch: CountableBatch) -> int:
    """Counts a sampled batch: its env steps in `NUM_ENV_STEPS_SAMPLED`, its agent steps
    in `NUM_AGENT_STEPS_SAMPLED`.

    Args:
        counters: the trainer's `_counters`.
        batch: the batch just sampled.

    Returns:
        Env steps sampled over the trainer's lifetime, now: the `timestep` workers
        are synced with and `NUM_ENV_STEPS_SAMPLED_LIFETIME` learners schedule by.
    """
    counters[NUM_ENV_STEPS_SAMPLED] += batch.env_steps()
    counters[NUM_AGENT_STEPS_SAMPLED] += batch.agent_steps()
    return counters[NUM_ENV_STEPS_SAMPLED]


def count_trained(counters: Counters, batch: CountableBatch) -> int:
    """Counts a batch the learners trained on: its env steps in `NUM_ENV_STEPS_TRAINED`,
    its agent steps in `NUM_AGENT_STEPS_TRAINED`.

    Args:
        counters: the trainer's `_counters`.
        batch: the batch just trained on (as given to the learners).

    Returns:
        Env steps trained over the trainer's lifetime, now.
    """
    counters[NUM_ENV_STEPS_TRAINED] += batch.env_steps()
    counters[NUM_AGENT_STEPS_TRAINED] += batch.agent_steps()
    return counters[NUM_ENV_STEPS_TRAINED]


@dataclass(frozen=True)
class StepCount:
    """Steps of a batch that is not at hand (e.g. one a worker computed gradients on)."""

    env: int
    agent: int

    def env_steps(self) -> int:
        return self.env

    def agent_steps(self) -> int:
        return self.agent


def steps_sampled(counters: Counters, count_steps_by: str = "env_steps") -> int:
    """Steps sampled over the trainer's lifetime, as `multiagent/count_steps_by` counts
    them (`"env_steps"` or `"agent_steps"`): the result's `timesteps_total`."""
    if count_steps_by == "agent_steps":
        return counters.get(NUM_AGENT_STEPS_SAMPLED, 0)
    return counters.get(NUM_ENV_STEPS_SAMPLED, 0)


def steps_trained(counters: Counters, count_steps_by: str = "env_steps") -> int:
    """Steps trained on over the trainer's lifetime, counted as `steps_sampled` counts:
    what `min_train_timesteps_per_reporting` compares with."""
    if count_steps_by == "agent_steps":
        return counters.get(NUM_AGENT_STEPS_TRAINED, 0)
    return counters.get(NUM_ENV_STEPS_TRAINED, 0)


# --------------------------------------------------------------------------------------
# Execution plans (RLlib 1.13's private helpers of its operators, same names)
# --------------------------------------------------------------------------------------


def _get_shared_metrics() -> Any:
    """The `MetricsContext` of the execution-plan operator running now (its `counters`,
    `timers`, `info`, `current_actor`)."""
    from corral.execution.local_iterator import LocalIterator

    return LocalIterator.get_metrics()


def _get_global_vars() -> dict:
    """What the workers' `set_global_vars` get inside a plan: the env steps sampled."""
    return {"timestep": _get_shared_metrics().counters[NUM_ENV_STEPS_SAMPLED]}


def _check_sample_batch_type(batch: Any) -> None:
    from corral.policy.sample_batch import MultiAgentBatch, SampleBatch

    if not isinstance(batch, SampleBatch | MultiAgentBatch):
        raise ValueError(
            f"Expected either SampleBatch or MultiAgentBatch, got {type(batch).__name__}: "
            f"{batch!r:.200}"
        )


def learner_info_by_policy(info: dict) -> dict:
    """A learner info keyed by policy id: one policy's info (`{"learner_stats": ...}`,
    what `compute_gradients` gives for a `SampleBatch`) goes under the default policy."""
    from corral.policy.sample_batch import DEFAULT_POLICY_ID
    from corral.utils.metrics.learner_info import LEARNER_STATS_KEY

    return {DEFAULT_POLICY_ID: info} if LEARNER_STATS_KEY in info else info


def count_sampled_in_plan(counters: Counters, batch: CountableBatch) -> None:
    """`count_sampled`, plus RLlib 1.x's older env-step counter (`num_steps_sampled`)
    that execution-plan operators read. (The agent-step counters have one name.)"""
    count_sampled(counters, batch)
    counters[STEPS_SAMPLED_COUNTER] += batch.env_steps()


def count_trained_in_plan(counters: Counters, batch: CountableBatch, *, new_names: bool) -> None:
    """RLlib 1.x's trained-step counters of execution plans (`num_steps_trained`,
    `num_steps_trained_this_iter`), and with `new_names` `count_trained`'s too (False
    where the trainer's learners counted them already)."""
    if new_names:
        count_trained(counters, batch)
    counters[STEPS_TRAINED_COUNTER] += batch.env_steps()
    counters[STEPS_TRAINED_THIS_ITER_COUNTER] = batch.env_steps()


# WorkerSet -> the trainer running an execution plan over it: the plan's training
# operators update that trainer's learners (whose optimisers its checkpoints save).
_PLAN_TRAINERS: weakref.WeakKeyDictionary[Any, weakref.ref] = weakref.WeakKeyDictionary()


def attach_plan_trainer(workers: Any, trainer: Any) -> None:
    """Makes `trainer` the one whose learners train `workers`' policies in plans."""
    _PLAN_TRAINERS[workers] = weakref.ref(trainer)


def plan_trainer(workers: Any) -> Any:
    """The trainer attached to `workers` (None: the operators train through the local
    worker's own `learn_on_batch` / `apply_gradients`, as RLlib's do)."""
    ref = _PLAN_TRAINERS.get(workers)
    return None if ref is None else ref()


__all__ = [
    "AGENT_STEPS_SAMPLED_COUNTER",
    "AGENT_STEPS_TRAINED_COUNTER",
    "STEPS_SAMPLED_COUNTER",
    "STEPS_TRAINED_COUNTER",
    "STEPS_TRAINED_THIS_ITER_COUNTER",
    "CountableBatch",
    "Counters",
    "StepCount",
    "attach_plan_trainer",
    "count_sampled",
    "count_sampled_in_plan",
    "count_trained",
    "count_trained_in_plan",
    "learner_info_by_policy",
    "plan_trainer",
    "steps_sampled",
    "steps_trained",
]
