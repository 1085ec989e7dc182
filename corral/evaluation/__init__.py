"""Sampling: rollout workers, worker sets, episodes and their metrics."""

from corral.evaluation.episode import Episode
from corral.evaluation.metrics import collect_metrics
from corral.evaluation.rollout_worker import RolloutWorker
from corral.evaluation.worker_set import WorkerSet

__all__ = ["Episode", "RolloutWorker", "WorkerSet", "collect_metrics"]
