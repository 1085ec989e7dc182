"""`WorkerSet`: the driver's local worker plus n remote rollout workers."""

from __future__ import annotations

import functools
import logging
import math
import time
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from corral.env.env_context import EnvContext
from corral.evaluation.backend import DEFAULT_CALL_TIMEOUT_S, WorkerFailure, wait_all
from corral.evaluation.rollout_worker import RolloutWorker
from corral.evaluation.worker_handle import (
    WorkerHandle,
    WorkerSpec,
    start_worker,
    wait_all_ready,
)
from corral.policy.policy import Policy, PolicySpec
from corral.utils.deprecation import deprecation_warning_once
from corral.utils.metrics import WORKER_UPDATE_TIMER
from corral.utils.timer import TimerStat

if TYPE_CHECKING:
    from corral.evaluation.ray_backend import RayPlacement

logger = logging.getLogger(__name__)

T = TypeVar("T")

# Seconds to wait for a worker to start (builds its envs and policies).
WORKER_START_TIMEOUT_S = 120.0
# COMMON_CONFIG's `worker_health_probe_timeout_s` default.
DEFAULT_HEALTH_PROBE_TIMEOUT_S = 30.0


class WorkerSet:
    """One local `RolloutWorker` (index 0) and `num_workers` remote ones.

    Remote workers are handles (see `corral.evaluation.backend`); the local
    worker is a plain object. The learner updates the local worker's policies
    in place; `sync_weights()` pushes them to the remote workers.
    """

    def __init__(
        self,
        *,
        env_creator: Callable[[EnvContext], Any] | None = None,
        validate_env: Callable | None = None,
        policy_class: type | None = None,
        trainer_config: dict | None = None,
        num_workers: int = 0,
        logdir: str | None = None,
        _setup: bool = True,
    ) -> None:
        self._env_creator = env_creator or (lambda ctx: None)
        # The trainer's timers (`Trainer._timers`), which it lends to its workers' set:
        # sampling (`synchronous_parallel_sample`) and weight syncs time into their
        # "sample" and "update" timers, as RLlib 1.13's execution plans did. None: untimed.
        self.timers: Mapping[str, TimerStat] | None = None
        self._validate_env = validate_env
        self._config = trainer_config or {}
        self._logdir = logdir
        self._policy_specs = policy_specs_from_config(self._config, policy_class)
        # Read once here, so that a bad value fails at construction, not at the first wait.
        _ = (self.sample_timeout_s, self.health_probe_timeout_s)
        self._remote_workers: list[WorkerHandle] = []
        self._placement: RayPlacement | None = None  # with backend="ray"
        self._synced_seq: dict[int, dict[str, int]] = {}
        self._local_worker: RolloutWorker | None = None
        if _setup:
            self.add_workers(num_workers)
            spaces = None
            if self._remote_workers and not self._config.get("create_env_on_driver"):
                spaces = self._remote_workers[0].call("get_spaces").result()
            self._local_worker = self._make_worker(0, num_workers, spaces)

    # -- construction -------------------------------------------------------

    def _worker_factory(
        self, index: int, num_workers: int, recreated: bool = False
    ) -> functools.partial:
        """Builds worker `index` when called (with the env's spaces, or None);
        `recreated`: it replaces a failed one (`RolloutWorker.recreated_worker`).

        A module-level function, not a bound method: the Ray backend pickles the
        factory, and this WorkerSet (with its live handles) must not go with it.
        """
        return functools.partial(
            _build_worker,
            self._env_creator,
            self._validate_env,
            self._policy_specs,
            self._config,
            self._logdir,
            index,
            num_workers,
            recreated_worker=recreated,
        )

    def _make_worker(
        self, index: int, num_workers: int, spaces: dict | None = None
    ) -> RolloutWorker:
        return self._worker_factory(index, num_workers)(spaces)

    def _make_remote(self, index: int, recreated: bool = False) -> WorkerHandle:
        """Starts remote worker `index` on the configured backend (does not wait)."""
        spec = WorkerSpec(
            index,
            self._worker_factory(index, self._config.get("num_workers", 0), recreated),
            self._config.get("extra_python_environs_for_worker") or {},
            max(1, int(self._config.get("num_cpus_per_worker", 1) or 1)),
            self.sample_timeout_s,
        )
        return start_worker(
            spec,
            self._config.get("backend", "local"),
            resources=self._ray_resources(),
            placement=self._placement.of(index) if self._placement else None,
        )

    @property
    def sample_timeout_s(self) -> float:
        """How long the driver waits for one call on a worker (`sample_timeout_s`)."""
        return _positive_seconds(self._config, "sample_timeout_s", DEFAULT_CALL_TIMEOUT_S)

    @property
    def health_probe_timeout_s(self) -> float:
        """How long a health probe waits for the workers' answers."""
        return _positive_seconds(
            self._config, "worker_health_probe_timeout_s", DEFAULT_HEALTH_PROBE_TIMEOUT_S
        )

    def _ray_resources(self) -> dict[str, Any]:
        """Ray actor options of one worker, from the `*_per_worker` keys.

        `num_gpus_per_worker` GPUs (fractional allowed: Ray packs several workers on one
        GPU and sets each actor's CUDA_VISIBLE_DEVICES); none with `_fake_gpus`, whose
        workers run the GPU code path on their CPU.
        """
        cfg = self._config
        options: dict[str, Any] = {"num_cpus": cfg.get("num_cpus_per_worker", 1)}
        if cfg.get("num_gpus_per_worker") and not cfg.get("_fake_gpus"):
            options["num_gpus"] = cfg["num_gpus_per_worker"]
        if cfg.get("custom_resources_per_worker"):
            options["resources"] = dict(cfg["custom_resources_per_worker"])
        return options

    def _reserve_placement(self, indices: list[int]) -> None:
        """With backend="ray": a placement group bundle for each new worker."""
        if self._config.get("backend", "local") != "ray" or not indices:
            return
        options = self._ray_resources()
        bundle = {"CPU": options["num_cpus"], "GPU": options.get("num_gpus", 0)}
        bundle.update(options.get("resources", {}))
        bundle = {k: v for k, v in bundle.items() if v}
        if not bundle:  # zero-resource workers: nothing to reserve
            return
        if self._placement is None:
            from corral.evaluation.ray_backend import RayPlacement

            # Inside a Tune trial: the bundles after the driver's (rollout workers),
            # then the evaluation workers' (see `Trainer.default_resource_request`).
            offset = 1
            if self._config.get("in_evaluation"):
                offset += int(self._config.get("num_workers", 0) or 0)
            self._placement = RayPlacement(
                self._config.get("placement_strategy", "PACK"), bundle, trial_offset=offset
            )
        self._placement.reserve(indices, WORKER_START_TIMEOUT_S)

    def add_workers(self, num_workers: int) -> None:
        """Starts `num_workers` more remote workers (all at once, then waits)."""
        start = len(self._remote_workers) + 1
        indices = list(range(start, start + num_workers))
        self._reserve_placement(indices)
        new = [self._make_remote(i) for i in indices]
        wait_all_ready(new, WORKER_START_TIMEOUT_S)
        self._remote_workers.extend(new)

    def recreate_worker(
        self, index: int, prepare: Callable[[WorkerHandle], None] | None = None
    ) -> WorkerHandle:
        """Replaces remote worker `index` (its `worker_index`, not its position)
        by a fresh one with the local worker's weights and filters.

        `prepare(handle)` runs on the new worker before the state is set, e.g.
        to re-add the policies added at runtime (the new worker is built from
        the config, which lacks them).
        """
        position = next(
            (i for i, w in enumerate(self._remote_workers) if w.worker_index == index), None
        )
        if position is None:
            raise ValueError(
                f"No remote worker with index {index}; indices: "
                f"{[w.worker_index for w in self._remote_workers]}."
            )
        self._remote_workers[position].kill()
        new = self._make_remote(index, recreated=True)
        try:
            new.wait_ready(WORKER_START_TIMEOUT_S)
            if prepare is not None:
                prepare(new)
            new.call("set_state", self.local_worker().get_state()).result()
        except BaseException:
            new.kill()
            raise
        self._remote_workers[position] = new
        self._synced_seq.pop(index, None)
        return new

    def replace_failed_workers(
        self,
        *,
        recreate: bool,
        failed: WorkerHandle | None = None,
        prepare: Callable[[WorkerHandle], None] | None = None,
        error: BaseException | None = None,
        kind: str = "rollout",
    ) -> list[int]:
        """Probes the remote workers (`probe_remote_workers`); keeps the healthy ones
        and removes the others, `failed` among them, or with `recreate` replaces them
        by new ones (`recreate_worker(index, prepare)`). The trainer's recovery.

        Args:
            recreate: recreate the failed workers instead of removing them.
            failed: a worker known to have failed (answering pings or not).
            prepare: see `recreate_worker`.
            error: the failure that led here (the cause of the RuntimeError below).
            kind: "rollout" or "evaluation", for the log lines.

        Returns:
            The `worker_index` of each failed worker.

        Raises:
            RuntimeError: no healthy worker remains (`error` as its cause).
        """
        if not self._remote_workers:
            return []
        healthy, faulty = [], []
        for w, ok in self.probe_remote_workers():
            if ok and w is not failed:
                healthy.append(w)
                continue
            faulty.append(w.worker_index)
            if recreate:
                logger.warning("Recreating failed %s worker %d.", kind, w.worker_index)
                # recreate_worker kills the old worker before starting the new one.
                healthy.append(self.recreate_worker(w.worker_index, prepare=prepare))
            else:
                logger.warning("Removing unhealthy %s worker %d.", kind, w.worker_index)
                w.kill()
        if not healthy:
            cause = f" The last failure was: {error}" if error is not None else ""
            raise RuntimeError(
                f"Not enough healthy workers remain to continue (every {kind} worker failed; "
                f"worker indices {faulty}).{cause}"
            ) from error
        self.reset(healthy)
        return faulty

    def remove_failed_workers(self) -> None:
        """Stops and drops the remote workers that do not answer a health probe
        (RLlib 1.13's call; `ignore_worker_failures` does this during training).

        Raises:
            RuntimeError: every remote worker failed.
        """
        self.replace_failed_workers(recreate=False)

    def recreate_failed_workers(
        self, prepare: Callable[[WorkerHandle], None] | None = None
    ) -> None:
        """Replaces the remote workers that do not answer a health probe by new ones
        with the local worker's weights and filters (RLlib 1.13's call;
        `recreate_failed_workers: True` does this during training). Their
        `recreated_worker` (and their envs' `EnvContext.recreated_worker`) is True.

        Args:
            prepare: see `recreate_worker` (a trainer passes its policy changes).
        """
        self.replace_failed_workers(recreate=True, prepare=prepare)

    # -- access -------------------------------------------------------------

    def local_worker(self) -> RolloutWorker:
        """The driver's own worker (index 0): its policies are the ones trained."""
        if self._local_worker is None:
            raise RuntimeError(
                "This WorkerSet was built with _setup=False: it has no local worker."
            )
        return self._local_worker

    def remote_workers(self) -> list[WorkerHandle]:
        """The remote workers' handles (a copy of the list)."""
        return list(self._remote_workers)

    def healthy_remote_workers(self) -> list[WorkerHandle]:
        """The remote workers not known to be dead (see `probe_remote_workers`)."""
        return [w for w in self._remote_workers if w.is_alive()]

    def reset(self, new_remote_workers: list[WorkerHandle]) -> None:
        """Replaces the remote workers (e.g. by the healthy ones)."""
        self._remote_workers = list(new_remote_workers)

    def num_remote_workers(self) -> int:
        """How many remote workers there are (healthy or not)."""
        return len(self._remote_workers)

    # -- fan-out ------------------------------------------------------------

    def forget_synced_weights(self, policy_id: str, worker_indices: Iterable[int]) -> None:
        """The next `sync_weights` sends policy `policy_id` to the remote workers of these
        indices even if its version has not changed: it was just added to them, after
        weights of that id that they had no policy for were sent."""
        for index in worker_indices:
            self._synced_seq.get(index, {}).pop(policy_id, None)

    def sync_weights(
        self,
        policies: list[str] | None = None,
        from_worker: RolloutWorker | None = None,
        global_vars: dict | None = None,
    ) -> None:
        """Pushes the local policies' weights to every remote worker.

        Each worker gets only the policies whose version it has not seen yet
        (each policy's `weights_seq` counts its updates), so frozen policies of
        a league are sent once, not every iteration.
        """
        timer = None if self.timers is None else self.timers[WORKER_UPDATE_TIMER]
        if timer is None or timer.running:  # (running: a `with` block times this call)
            self._sync_weights(policies, from_worker, global_vars)
            return
        # (Timed by `push`, not `with`: no state between calls, whatever thread syncs.)
        start = time.perf_counter()
        self._sync_weights(policies, from_worker, global_vars)
        timer.push(time.perf_counter() - start)

    def _sync_weights(
        self,
        policies: list[str] | None,
        from_worker: RolloutWorker | None,
        global_vars: dict | None,
    ) -> None:
        source = from_worker or self.local_worker()
        if global_vars:
            source.set_global_vars(global_vars)
        if not self._remote_workers:
            return
        seqs = source.get_weights_seqs()
        for synced in self._synced_seq.values():
            for pid in set(synced) - set(seqs):
                del synced[pid]  # removed: a new policy under that id starts unsynced
        if policies is not None:
            seqs = {pid: seqs[pid] for pid in policies}
        stale_ids = {
            w.worker_index: [
                pid
                for pid, seq in seqs.items()
                if self._synced_seq.get(w.worker_index, {}).get(pid) != seq
            ]
            for w in self._remote_workers
        }
        needed = sorted({pid for ids in stale_ids.values() for pid in ids})
        weights = source.get_weights(needed) if needed else {}
        futures = []
        for w in self._remote_workers:
            ids = stale_ids[w.worker_index]
            if ids:
                futures.append(w.call("set_weights", {p: weights[p] for p in ids}, global_vars))
            elif global_vars:
                futures.append(w.call("set_global_vars", global_vars))
        wait_all(futures)
        for w in self._remote_workers:
            synced = self._synced_seq.setdefault(w.worker_index, {})
            synced.update({pid: seqs[pid] for pid in stale_ids[w.worker_index]})

    def foreach_worker(self, func: Callable[[RolloutWorker], T]) -> list[T]:
        """`func(worker)` on the local worker, then on every remote worker."""
        local = [func(self.local_worker())] if self._local_worker is not None else []
        return local + wait_all([w.apply(func) for w in self._remote_workers])

    def foreach_worker_with_index(self, func: Callable[[RolloutWorker, int], T]) -> list[T]:
        """`func(worker, worker_index)` on the local worker (0), then on every remote one."""
        local = [func(self.local_worker(), 0)]
        remote = [w.apply(func, w.worker_index) for w in self._remote_workers]
        return local + wait_all(remote)

    def foreach_policy(self, func: Callable[[Policy, str], T]) -> list[T]:
        """`func(policy, policy_id)` for every policy of every worker."""
        results: list[T] = []
        for r in self.foreach_worker(lambda w: w.foreach_policy(func)):
            results.extend(r)
        return results

    def foreach_trainable_policy(self, func: Callable[[Policy, str], T]) -> list[T]:
        """`func(policy, policy_id)` for every trained policy of every worker."""
        results: list[T] = []
        for r in self.foreach_worker(lambda w: w.foreach_trainable_policy(func)):
            results.extend(r)
        return results

    # RLlib 1.13's name.
    foreach_policy_to_train = foreach_trainable_policy

    def is_policy_to_train(self, policy_id: str, batch: Any = None) -> bool:
        """Whether the local worker trains policy `policy_id` (given `batch`)."""
        return self.local_worker().is_policy_to_train(policy_id, batch)

    def trainable_policies(self) -> list[str]:
        """The ids of the local worker's policies to train.

        Deprecated in RLlib 1.13 for `is_policy_to_train`; 1.13's returned one bool per
        policy (a slip), this returns the ids as RLlib 1.12 and earlier did.
        """
        deprecation_warning_once("WorkerSet.trainable_policies()", "WorkerSet.is_policy_to_train()")
        local = self.local_worker()
        return [pid for pid in local.policy_map if local.is_policy_to_train(pid)]

    def foreach_env(self, func: Callable[[Any], T]) -> list[list[T]]:
        """`func(sub_env)` for every sub-env; one list per worker."""
        return self.foreach_worker(lambda w: w.foreach_env(func))

    def foreach_env_with_context(self, func: Callable[[Any, EnvContext], T]) -> list[list[T]]:
        """`func(sub_env, env_context)` for every sub-env; one list per worker."""
        return self.foreach_worker(lambda w: w.foreach_env_with_context(func))

    def probe_remote_workers(self, timeout: float | None = None) -> list[tuple[WorkerHandle, bool]]:
        """Pings every remote worker at once; (worker, healthy) pairs.

        A worker is unhealthy when it is dead or does not answer within
        `timeout` seconds (default: `worker_health_probe_timeout_s`), counted
        for all workers together, so a probe never takes longer than that.
        """
        if timeout is None:
            timeout = self.health_probe_timeout_s
        futures = [(w, w.call("ping")) for w in self._remote_workers]
        deadline = time.monotonic() + timeout
        out = []
        for w, f in futures:
            try:
                f.result(max(0.0, deadline - time.monotonic()))
                out.append((w, True))
            except (WorkerFailure, TimeoutError):
                out.append((w, False))
        return out

    def stop(self) -> None:
        """Stops every remote worker (process or actor) and closes the local envs."""
        if self._local_worker is not None:
            self._local_worker.stop()
        for w in self._remote_workers:
            try:
                w.stop()
            except Exception:  # noqa: BLE001 - stopping is best effort
                logger.debug("Error stopping %r", w, exc_info=True)
        if self._placement is not None:
            self._placement.release()
            self._placement = None


def policy_specs_from_config(config: dict, default_class: type | None) -> dict[str, PolicySpec]:
    """`multiagent.policies` as PolicySpecs, with the default class filled in."""
    policies = (config.get("multiagent") or {}).get("policies") or {}
    if not policies:
        policies = {"default_policy": PolicySpec()}
    if isinstance(policies, (set, list, tuple)):
        policies = {pid: PolicySpec() for pid in policies}
    specs = {}
    for pid, spec in policies.items():
        if not isinstance(spec, PolicySpec):
            spec = PolicySpec(*spec)
        specs[pid] = spec._replace(policy_class=spec.policy_class or default_class)
    return specs


def _positive_seconds(config: dict, key: str, default: float) -> float:
    """`config[key]` as a positive, finite number of seconds (`default` when unset)."""
    value = config.get(key, default)
    if value is None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"`{key}` must be a positive number of seconds, got {value!r}.")
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(
            f"`{key}` must be a positive, finite number of seconds, got {value!r} "
            "(the driver never waits for a worker without a limit)."
        )
    return float(value)


def _build_worker(
    env_creator: Callable[[EnvContext], Any],
    validate_env: Callable | None,
    policy_specs: dict[str, PolicySpec],
    config: dict,
    logdir: str | None,
    index: int,
    num_workers: int,
    spaces: dict | None = None,
    *,
    recreated_worker: bool = False,
) -> RolloutWorker:
    """Builds rollout worker `index` (in the driver, a forked process or a Ray actor)."""
    return RolloutWorker(
        env_creator=env_creator,
        validate_env=validate_env,
        policy_specs=policy_specs,
        config=config,
        worker_index=index,
        num_workers=num_workers,
        spaces=spaces,
        log_dir=logdir,
        recreated_worker=recreated_worker,
    )
