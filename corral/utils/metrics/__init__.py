"""Metric logging for learners: `Stats` (one metric) and `MetricsLogger` (a tree of them).

`Learner.update` logs per minibatch and returns `MetricsLogger.reduce()`, a
nested dict with `Stats` leaves; several learners' results merge with
`MetricsLogger.aggregate`, and `stats_to_values` turns them into plain
numbers for the trainer's result dict.
"""

from corral.utils.metrics.metrics_logger import MetricsLogger, stats_to_values
from corral.utils.metrics.stats import Stats

__all__ = ["MetricsLogger", "Stats", "stats_to_values"]
