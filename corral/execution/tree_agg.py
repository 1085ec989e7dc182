"""RLlib 1.13's `execution.tree_agg`: IMPALA's tree aggregation.

`num_aggregation_workers` aggregation actors stand between the rollout workers and the
learner. Each one takes a share of the remote rollout workers (round-robin), keeps
`max_sample_requests_in_flight_per_worker` sample requests in flight on each, mixes in
replayed fragments (`replay_proportion` of `replay_buffer_num_slots`), concatenates
the fragments into train batches of `train_batch_size` steps (`count_steps_by`) and
hands those to the driver, which only moves whole train batches into the learner. The
driver sends new weights to the aggregators; each passes them on to a worker of its
own when that worker returns a fragment.

The aggregators are Ray actors that call the rollout workers' actors themselves, so
tree aggregation needs `backend="ray"` (worker processes of the local backend are
reachable only from the driver that forked them). They reserve no CPUs (RLlib's
`num_cpus=0`).
"""

from __future__ import annotations

import logging
import platform
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from corral.evaluation.worker_handle import (
    WorkerHandle,
    WorkerSpec,
    start_worker,
    wait_all_ready,
)
from corral.execution.common import _get_shared_metrics, count_sampled_in_plan
from corral.execution.local_iterator import LocalIterator, from_actors
from corral.execution.parallel_requests import AsyncRequestsManager
from corral.execution.replay_ops import MixInReplay
from corral.policy.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch, concat_samples

logger = logging.getLogger(__name__)

# How long one wait of an aggregator for ready fragments lasts (seconds).
_WAIT_S = 1.0
# Seconds to wait for the aggregation actors to start.
AGGREGATOR_START_TIMEOUT_S = 120.0
# The config keys an aggregator reads (only these travel to its actor).
_CONFIG_KEYS = (
    "train_batch_size",
    "max_sample_requests_in_flight_per_worker",
    "replay_buffer_num_slots",
    "replay_proportion",
    "sample_timeout_s",
    "seed",
)


class Aggregator:
    """One aggregation actor's work: train batches out of its rollout workers' fragments.

    Runs inside a Ray actor (`create_aggregators`, `gather_experiences_tree_aggregation`);
    its methods are called through the actor's handle (`handle.call("next_train_batch")`,
    or RLlib-style `handle.sample.remote()`).

    Args:
        config: the trainer config (`train_batch_size`, `multiagent/count_steps_by`,
            `max_sample_requests_in_flight_per_worker`, `replay_proportion`,
            `replay_buffer_num_slots`, `sample_timeout_s`, `seed`).
        rollout_group: handles of the rollout workers this aggregator samples from.
        weights_seqs: the weights versions (`RolloutWorker.get_weights_seqs`) the
            workers have now, recorded with each fragment for the learner's policy lag.
    """

    def __init__(
        self,
        config: dict,
        rollout_group: Sequence[WorkerHandle],
        weights_seqs: dict[str, int] | None = None,
    ) -> None:
        if not rollout_group:
            raise ValueError("An Aggregator needs at least one rollout worker.")
        self.workers = list(rollout_group)
        self.train_batch_size = int(config["train_batch_size"])
        self.count_steps_by = config.get("multiagent", {}).get("count_steps_by", "env_steps")
        self.weights: dict | None = None
        self.global_vars: dict | None = None
        # The newest weights' versions, and those each worker has.
        self._seqs = dict(weights_seqs or {})
        self._worker_seqs = {w: dict(self._seqs) for w in self.workers}
        self._requests = AsyncRequestsManager(
            self.workers,
            int(config.get("max_sample_requests_in_flight_per_worker", 2)),
            request_timeout_s=config.get("sample_timeout_s"),
        )
        self._replay = MixInReplay(
            config.get("replay_buffer_num_slots", 0),
            config.get("replay_proportion", 0.0),
            config.get("seed"),
        )
        self._pending: list[Any] = []
        self._pending_steps = 0
        self._pending_seqs: dict[str, list] = defaultdict(list)
        self._unroll_counter = 0
        # New (not replayed) steps sampled since the last train batch.
        self._env_steps = 0
        self._agent_steps = 0

    # -- RLlib's Aggregator API ------------------------------------------------

    def get_host(self) -> str:
        """The node this aggregator runs on."""
        return platform.node()

    def set_weights(
        self,
        weights: dict,
        global_vars: dict | None = None,
        weights_seqs: dict[str, int] | None = None,
    ) -> None:
        """New weights (all or some policies) for the workers: each worker gets them
        with its next returned fragment. `weights_seqs`: their versions."""
        self.weights = {**(self.weights or {}), **weights}
        self.global_vars = global_vars
        if weights_seqs is not None:
            self._seqs = {**self._seqs, **weights_seqs}
        else:  # unknown versions: count the change so that every worker gets them
            self._seqs = {pid: self._seqs.get(pid, 0) + 1 for pid in weights}

    def sample(self) -> MultiAgentBatch:
        """The next train batch (what RLlib's aggregator shard yields)."""
        return self.next_train_batch()["batch"]

    # -- corral's -----------------------------------------------------------------

    def next_train_batch(self) -> dict[str, Any]:
        """Waits for fragments until `train_batch_size` steps are together.

        Returns:
            ``{"batch": MultiAgentBatch, "sampled_seqs": {policy id: [weights version
            per fragment]}, "env_steps": new env steps, "agent_steps": new agent
            steps}`` (new: sampled since the previous train batch, replay not counted).

        Raises:
            WorkerFailure: a rollout worker died or raised (its requests are dropped).
        """
        while True:
            self._requests.call_on_all_available(
                "sample", tag_fn=lambda w: dict(self._worker_seqs[w])
            )
            ready = self._requests.get_ready(_WAIT_S, with_tags=True)
            done = None
            for worker, items in ready.items():
                for batch, seqs in items:
                    self._env_steps += batch.env_steps()
                    self._agent_steps += batch.agent_steps()
                    fragment = batch.decompress_if_needed()
                    for piece in self._replay(fragment):
                        done = self._add(piece, seqs) or done
                self._send_weights(worker)
            if done is not None:
                return done

    def stop(self) -> None:
        """Nothing to release (the rollout workers belong to the driver's worker set)."""

    def _send_weights(self, worker: WorkerHandle) -> None:
        if self.weights is None or self._worker_seqs[worker] == self._seqs:
            return
        # Not waited for: the worker runs it before its next sample request.
        worker.call("set_weights", self.weights, self.global_vars)
        self._worker_seqs[worker] = dict(self._seqs)

    def _add(self, piece: Any, seqs: dict) -> dict[str, Any] | None:
        """Adds a fragment; returns the train batch (and its counts) once it is full."""
        from corral.agents.impala.impala import with_unroll_id

        self._unroll_counter += 1
        piece = with_unroll_id(piece, self._unroll_counter)
        self._pending.append(piece)
        by_agent = self.count_steps_by == "agent_steps"
        self._pending_steps += piece.agent_steps() if by_agent else piece.env_steps()
        pids = piece.policy_batches if isinstance(piece, MultiAgentBatch) else [DEFAULT_POLICY_ID]
        for pid in pids:
            self._pending_seqs[pid].append(seqs.get(pid))
        if self._pending_steps < self.train_batch_size:
            return None
        out = {
            "batch": concat_samples(self._pending).as_multi_agent(),
            "sampled_seqs": dict(self._pending_seqs),
            "env_steps": self._env_steps,
            "agent_steps": self._agent_steps,
        }
        self._pending, self._pending_steps = [], 0
        self._pending_seqs = defaultdict(list)
        self._env_steps = self._agent_steps = 0
        return out


def assign_workers(workers: Sequence[Any], num_aggregators: int) -> list[list[Any]]:
    """The rollout workers of each aggregator: round-robin, as RLlib's."""
    if num_aggregators < 1:
        raise ValueError(f"num_aggregation_workers must be >= 1, got {num_aggregators}.")
    groups: list[list[Any]] = [[] for _ in range(num_aggregators)]
    for i, w in enumerate(workers):
        groups[i % num_aggregators].append(w)
    return [g for g in groups if g]


def check_tree_aggregation(config: dict) -> None:
    """Raise `ValueError` naming the values when `config` asks for tree aggregation
    (`num_aggregation_workers > 0`) on a backend other than "ray"."""
    n = config.get("num_aggregation_workers", 0)
    backend = config.get("backend", "local")
    if n and backend != "ray":
        raise ValueError(
            f"num_aggregation_workers={n} needs backend='ray', got backend={backend!r}: "
            "the aggregation actors call the rollout workers' Ray actors themselves "
            "(the local backend's worker processes answer only their driver). Set "
            "backend='ray', or num_aggregation_workers=0."
        )


def resolve_tree_aggregation(config: dict) -> None:
    """`num_aggregation_workers > 0` on the local backend: the driver gathers the workers'
    fragments itself instead (the same train batches and replay mixing, without the
    aggregation processes, which need Ray's actors), with a warning once; the setting is
    set to 0 in `config`. On backend="ray" the aggregators run."""
    n = config.get("num_aggregation_workers", 0)
    if n and config.get("backend", "local") != "ray":
        from corral.utils.deprecation import log_once

        if log_once("num_aggregation_workers_local"):
            logger.warning(
                "num_aggregation_workers=%s: tree aggregation runs on backend='ray' (its "
                "actors call the rollout workers' Ray actors); on the local backend the "
                "driver gathers the workers' fragments itself (the same train batches).",
                n,
            )
        config["num_aggregation_workers"] = 0


def create_aggregators(
    workers: Any, config: dict, weights_seqs: dict[str, int] | None = None
) -> list[WorkerHandle]:
    """Starts `num_aggregation_workers` aggregation actors over `workers`' remote
    rollout workers (round-robin) and waits until they are up.

    Args:
        workers: the `WorkerSet` (backend="ray").
        config: the trainer config.
        weights_seqs: the weights versions the workers have now (default: the local
            worker's).

    Raises:
        ValueError: see `check_tree_aggregation`; or there is no remote worker.
    """
    check_tree_aggregation(config)
    remote = workers.remote_workers()
    if not remote:
        raise ValueError(
            f"num_aggregation_workers={config.get('num_aggregation_workers')} needs remote "
            "rollout workers to aggregate from (num_workers >= 1); there are none."
        )
    if weights_seqs is None:
        weights_seqs = workers.local_worker().get_weights_seqs()
    agg_config = {k: config[k] for k in _CONFIG_KEYS if k in config}
    agg_config["multiagent"] = {
        "count_steps_by": config.get("multiagent", {}).get("count_steps_by", "env_steps")
    }
    groups = assign_workers(remote, config["num_aggregation_workers"])
    logger.info("Aggregator worker assignments: %s", [[w.worker_index for w in g] for g in groups])
    timeout = float(config.get("sample_timeout_s") or 600.0)
    handles = []
    for i, group in enumerate(groups):

        def factory(group: list[Any] = group) -> Aggregator:
            return Aggregator(agg_config, group, weights_seqs)

        handles.append(
            start_worker(
                WorkerSpec(i + 1, factory, call_timeout_s=timeout),
                "ray",
                resources={"num_cpus": 0},
            )
        )
    wait_all_ready(handles, AGGREGATOR_START_TIMEOUT_S)
    return handles


def gather_experiences_tree_aggregation(workers: Any, config: dict) -> LocalIterator[Any]:
    """Tree-aggregation version of `gather_experiences_directly`: the train batches of
    `num_aggregation_workers` aggregation actors, as they come.

    `zip_with_source_actor()` on the result gives `(aggregator, batch)` items, so
    `BroadcastUpdateLearnerWeights` sends new weights to the aggregators (which pass
    them on to their workers). The steps of each train batch count as sampled (as in
    RLlib, replayed ones too).
    """
    aggregators = create_aggregators(workers, config)

    def record_steps_sampled(batch: Any) -> Any:
        count_sampled_in_plan(_get_shared_metrics().counters, batch)
        return batch

    return from_actors(aggregators).gather_async().for_each(record_steps_sampled)


__all__ = [
    "Aggregator",
    "assign_workers",
    "check_tree_aggregation",
    "resolve_tree_aggregation",
    "create_aggregators",
    "gather_experiences_tree_aggregation",
]
