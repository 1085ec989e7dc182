"""Metric logging for learners: `Stats` (one metric) and `MetricsLogger` (a tree of them).

`Learner.update` logs per minibatch and returns `MetricsLogger.reduce()`, a
nested dict with `Stats` leaves; several learners' results merge with
`MetricsLogger.aggregate`, and `stats_to_values` turns them into plain
numbers for the trainer's result dict.

RLlib 1.13's counter and timer names (``NUM_ENV_STEPS_SAMPLED``, ``SAMPLE_TIMER``, ...) are
defined here too, with RLlib's values (the keys of ``Trainer._counters`` / ``_timers``).
"""

from corral.utils.metrics.metrics_logger import MetricsLogger, stats_to_values
from corral.utils.metrics.stats import Stats

# Sampling and training step counters (env steps and agent steps).
NUM_ENV_STEPS_SAMPLED = "num_env_steps_sampled"
NUM_AGENT_STEPS_SAMPLED = "num_agent_steps_sampled"
NUM_ENV_STEPS_TRAINED = "num_env_steps_trained"
NUM_AGENT_STEPS_TRAINED = "num_agent_steps_trained"
# Target network update counters.
LAST_TARGET_UPDATE_TS = "last_target_update_ts"
NUM_TARGET_UPDATES = "num_target_updates"
# Timer names.
TRAINING_ITERATION_TIMER = "training_iteration"
APPLY_GRADS_TIMER = "apply_grad"
COMPUTE_GRADS_TIMER = "compute_grads"
SYNCH_WORKER_WEIGHTS_TIMER = "synch_weights"
GRAD_WAIT_TIMER = "grad_wait"
SAMPLE_TIMER = "sample"
LEARN_ON_BATCH_TIMER = "learn"
LOAD_BATCH_TIMER = "load"
TARGET_NET_UPDATE_TIMER = "target_net_update"
# Deprecated in RLlib 1.13 (use SYNCH_WORKER_WEIGHTS_TIMER).
WORKER_UPDATE_TIMER = "update"

__all__ = [
    "APPLY_GRADS_TIMER",
    "COMPUTE_GRADS_TIMER",
    "GRAD_WAIT_TIMER",
    "LAST_TARGET_UPDATE_TS",
    "LEARN_ON_BATCH_TIMER",
    "LOAD_BATCH_TIMER",
    "NUM_AGENT_STEPS_SAMPLED",
    "NUM_AGENT_STEPS_TRAINED",
    "NUM_ENV_STEPS_SAMPLED",
    "NUM_ENV_STEPS_TRAINED",
    "NUM_TARGET_UPDATES",
    "SAMPLE_TIMER",
    "SYNCH_WORKER_WEIGHTS_TIMER",
    "TARGET_NET_UPDATE_TIMER",
    "TRAINING_ITERATION_TIMER",
    "WORKER_UPDATE_TIMER",
    "MetricsLogger",
    "Stats",
    "stats_to_values",
]
