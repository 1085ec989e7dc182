"""Estimators on rollout workers, and their estimates in `train()` results.

A rollout worker reading offline input builds its estimators once (`make_estimators`),
feeds them every batch it reads (`OffPolicyEstimator.process`), and the trainer gathers
what they estimated since the last iteration from all workers
(`collect_off_policy_estimates`) into `result["off_policy_estimator"]`.
"""

from __future__ import annotations

import collections
from collections.abc import Iterable
from typing import Any

import numpy as np

from corral.offline.estimators.direct_method import DirectMethod, DoublyRobust
from corral.offline.estimators.importance_sampling import (
    ImportanceSampling,
    WeightedImportanceSampling,
)
from corral.offline.estimators.off_policy_estimator import OffPolicyEstimate, OffPolicyEstimator
from corral.policy.sample_batch import MultiAgentBatch

# `input_evaluation` name -> estimator class.
ESTIMATORS: dict[str, type[OffPolicyEstimator]] = {
    "is": ImportanceSampling,
    "wis": WeightedImportanceSampling,
    "dm": DirectMethod,
    "dr": DoublyRobust,
}
# The `input_evaluation` entry that is not an estimator: run the env next to the input.
SIMULATION = "simulation"


def check_input_evaluation(methods: Iterable[Any]) -> None:
    """Raises `ValueError` naming an `input_evaluation` entry that is not known."""
    for method in methods:
        known = method == SIMULATION or method in ESTIMATORS
        if not known and not (isinstance(method, type) and issubclass(method, OffPolicyEstimator)):
            raise ValueError(
                f"Unknown `input_evaluation` method {method!r}; expected one of "
                f"{[*ESTIMATORS, SIMULATION]} or an OffPolicyEstimator subclass."
            )


def make_estimators(worker: Any) -> list[OffPolicyEstimator]:
    """The estimators a worker runs on its offline input (none when it samples its env).

    `input_evaluation` entries: "is", "wis", "dm", "dr" or an `OffPolicyEstimator`
    subclass; "simulation" is handled by the worker itself. Estimates are of the worker's
    default policy with the policy's `gamma`; "dm"/"dr" fit their Q model with
    `input_config["q_model"]` (keyword arguments of `FQETorchModel`) when given.
    """
    config = worker.config
    methods = list(config.get("input_evaluation") or [])
    check_input_evaluation(methods)
    if config.get("input", "sampler") == "sampler" or config.get("in_evaluation"):
        return []
    policy = worker.get_policy()
    if policy is None:
        return []
    gamma = policy.config.get("gamma", config.get("gamma", 0.99))
    q_model_config = (config.get("input_config") or {}).get("q_model")
    estimators: list[OffPolicyEstimator] = []
    for method in methods:
        if method == SIMULATION:
            continue
        cls = ESTIMATORS[method] if isinstance(method, str) else method
        if issubclass(cls, DirectMethod):
            # issubclass does not narrow `cls` for mypy: DirectMethod takes the Q model config.
            estimators.append(cls(policy, gamma, q_model_config=q_model_config))  # type: ignore[call-arg]
        else:
            estimators.append(cls(policy, gamma))
    return estimators


def estimate_off_policy(worker: Any, batch: Any) -> None:
    """Runs the worker's estimators on a batch it read from its offline input.

    The estimators are built on the first call (`make_estimators`). With "simulation" in
    `input_evaluation`, the worker also samples one fragment of its env with the current
    policy; that batch is discarded, its episodes are reported as the worker's episode
    metrics (RLlib 1.x's "simulation": evaluate in the env, learn from the input).
    """
    if getattr(worker, "_simulate_off_policy", None) is None:  # the first batch
        if getattr(worker, "reward_estimators", None) is None:  # (a RolloutWorker builds its own)
            worker.reward_estimators = make_estimators(worker)
        simulate = SIMULATION in (worker.config.get("input_evaluation") or [])
        if simulate and getattr(worker, "sampler", None) is None:
            raise ValueError(
                "`input_evaluation: ['simulation']` runs the policy in the env next to the "
                "offline input, but this worker has no env; set `env` (or drop 'simulation')."
            )
        worker._simulate_off_policy = simulate and not worker.config.get("in_evaluation")
    # (A record of steps without rows, RLlib 1.13's empty `MultiAgentBatch` that a
    # sampler writes when no piece was to be trained on, has nothing to estimate from.)
    if not (isinstance(batch, MultiAgentBatch) and not batch.policy_batches):
        for estimator in worker.reward_estimators:
            estimator.process(batch)
    if worker._simulate_off_policy:
        worker.sample_from_env()


def summarize_estimates(estimates: Iterable[OffPolicyEstimate]) -> dict[str, dict[str, float]]:
    """{estimator name: {metric: mean over the estimates}} (RLlib 1.x's summary)."""
    gathered: dict[str, dict[str, list[float]]] = collections.defaultdict(
        lambda: collections.defaultdict(list)
    )
    for estimate in estimates:
        for key, value in estimate.metrics.items():
            gathered[estimate.estimator_name][key].append(float(value))
    return {
        name: {key: float(np.mean(values)) for key, values in metrics.items()}
        for name, metrics in gathered.items()
    }


def worker_estimates(worker: Any) -> list[OffPolicyEstimate]:
    """Drains the estimates a worker's estimators made since the last call."""
    out: list[OffPolicyEstimate] = []
    for estimator in getattr(worker, "reward_estimators", None) or []:
        out.extend(estimator.get_metrics())
    return out


def collect_off_policy_estimates(workers: Any) -> dict[str, dict[str, float]]:
    """The summary of the estimates of a `WorkerSet`'s local and healthy remote workers."""
    from corral.evaluation.backend import wait_all

    estimates = worker_estimates(workers.local_worker())
    for result in wait_all([w.apply(worker_estimates) for w in workers.healthy_remote_workers()]):
        estimates.extend(result)
    return summarize_estimates(estimates)
