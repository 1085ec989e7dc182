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

from collections.abc import MutableMapping
from typing import Protocol

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


__all__ = [
    "AGENT_STEPS_SAMPLED_COUNTER",
    "AGENT_STEPS_TRAINED_COUNTER",
    "STEPS_SAMPLED_COUNTER",
    "STEPS_TRAINED_COUNTER",
    "STEPS_TRAINED_THIS_ITER_COUNTER",
    "CountableBatch",
    "Counters",
    "count_sampled",
    "count_trained",
    "steps_sampled",
    "steps_trained",
]
