"""`LearnerGroup`: the learners of a trainer.

With `num_learners=0` (the default) there is one `Learner`, in the driver, updating the
local worker's policies in place. With `num_learners=n > 0` there are n data-parallel
learners in their own processes (`corral.core.learner.distributed`): on this machine
with backend="local", as Ray actors in one placement group (one bundle of
`num_cpus_per_learner` CPUs and `num_gpus_per_learner` GPUs each) with backend="ray".
Given `rollout_workers` (DD-PPO), the learners are those rollout workers themselves
(`attach`): each trains its own policies in place on what it sampled, in one
torch.distributed group with the others.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from corral.core.learner.learner import Learner, training_data_of
from corral.core.learner.training_data import rows_of_iterator, with_reading_policy
from corral.evaluation.backend import (
    DEFAULT_CALL_TIMEOUT_S,
    WorkerFailure,
    wait_all,
    wait_all_fail_fast,
)
from corral.evaluation.worker_handle import WorkerFuture, WorkerHandle, WorkerSpec, start_worker
from corral.policy.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch
from corral.utils.error import NoGPUsError
from corral.utils.metrics import MetricsLogger

if TYPE_CHECKING:
    import torch

    from corral.agents.callbacks import DefaultCallbacks
    from corral.core.learner.distributed import LearnerWorker
    from corral.evaluation.ray_backend import RayPlacement
    from corral.policy.policy import Policy

logger = logging.getLogger(__name__)

# `Learner.update`'s arguments that say what to train on (see `training_data_of`).
_DATA_ARGS = (
    "batches",
    "batch_refs",
    "episodes",
    "episodes_refs",
    "data_iterators",
    "training_data",
)
# Seconds to wait for the learners to start and to form their process group.
LEARNER_START_TIMEOUT_S = 120.0


def _driver_device(config: dict) -> str | None:
    """The device of the driver's learner: None (train the policies in place, on the
    CPU), "cuda" for `num_gpus > 0`, "cpu" for `num_gpus > 0` with `_fake_gpus` (the
    GPU code path: policy copies, one batch transfer per update, weights back)."""
    num_gpus = config.get("num_gpus", 0) or 0
    if num_gpus <= 0:
        return None
    if config.get("_fake_gpus"):
        return "cpu"
    check_gpus(config)
    if num_gpus > 1:
        logger.warning(
            "num_gpus=%s: the driver's learner uses one GPU; RLlib 1.x's multi-GPU towers "
            "are num_learners=%d learners with num_gpus_per_learner=1 in corral.",
            num_gpus,
            int(num_gpus),
        )
    return "cuda"


def check_gpus(config: dict) -> None:
    """Raise `NoGPUsError` (a `RuntimeError` and a `ValueError`) naming the key when the
    config asks for GPUs torch cannot see.

    `num_gpus` (the driver's learner) needs CUDA here; `num_gpus_per_learner` and
    `num_gpus_per_worker` (remote rollout workers' inference) only with backend="local"
    (on a Ray cluster the GPUs are on other nodes, Ray checks them). `_fake_gpus` needs
    none.
    """
    if config.get("_fake_gpus"):
        return
    wanted = [("num_gpus", config.get("num_gpus", 0) or 0)]
    if config.get("backend", "local") == "local":
        if config.get("num_learners"):
            wanted.append(("num_gpus_per_learner", config.get("num_gpus_per_learner", 0) or 0))
        if config.get("num_workers"):
            wanted.append(("num_gpus_per_worker", config.get("num_gpus_per_worker", 0) or 0))
    asked = [(key, value) for key, value in wanted if value > 0]
    if not asked:
        return
    import torch

    if not torch.cuda.is_available():
        key, value = asked[0]
        raise NoGPUsError(
            f"{key}={value}, but torch sees no CUDA GPU (torch {torch.__version__}, CUDA "
            f"build: {torch.version.cuda is not None}). Set {key}=0, or `_fake_gpus: True` "
            "to run the GPU code path on the CPU."
        )


def _rows_per_learner(minibatch_size: int | None, n: int) -> int:
    """Rows per batch each of n learners takes from its data iterator."""
    if minibatch_size is None or minibatch_size < n:
        raise ValueError(
            f"LearnerGroup.update with data_iterators needs minibatch_size >= "
            f"num_learners={n} (each learner takes minibatch_size // {n} rows per "
            f"batch), got {minibatch_size!r}."
        )
    return minibatch_size // n


class LearnerFailure(WorkerFailure):
    """A data-parallel learner died or raised; the trainer recovers the learner group
    as it recovers workers (`recreate_failed_workers`, `ignore_worker_failures`)."""


class LearnerGroup:
    """Runs `Learner.update` on the trainer's learners and merges their metrics.

    Args:
        config: the trainer config (`num_learners`, `backend`, `num_cpus_per_learner`,
            `num_gpus_per_learner`, `sample_timeout_s`, ...).
        policies: policy id -> policy: the driver's policies (the local worker's
            policy map). With remote learners they stay the source of truth: each
            update sends their training state to the learners and loads learner 0's
            new state back into them.
        callbacks: `DefaultCallbacks` for the local learner (remote learners build
            their own from `config["callbacks"]`).
        policy_ids: the policies to train (default: all).
        rollout_workers: remote rollout workers to make the learners (see `attach`);
            `num_learners` is then not read.
    """

    def __init__(
        self,
        config: dict,
        policies: Mapping[str, Policy],
        callbacks: DefaultCallbacks | None = None,
        *,
        policy_ids: Iterable[str] | None = None,
        rollout_workers: Sequence[WorkerHandle] | None = None,
    ) -> None:
        num_learners = 0 if rollout_workers is not None else config.get("num_learners", 0) or 0
        if isinstance(num_learners, bool) or not isinstance(num_learners, int) or num_learners < 0:
            raise ValueError(f"num_learners must be an int >= 0, got {num_learners!r}.")
        self.config = config
        self.policies = policies
        self.num_learners = num_learners
        self.local_learner: Learner | None = None
        self._handles: list[WorkerHandle] = []
        self._placement: RayPlacement | None = None
        # Data iterators the Ray learners hold: iterator -> {rank: key on that learner}.
        self._iterator_keys: weakref.WeakKeyDictionary[Any, dict[int, int]] = (
            weakref.WeakKeyDictionary()
        )
        self._next_iterator_key = 0
        self.metrics = MetricsLogger()
        # Updates run with `_no_metrics_reduce` whose metrics `reduce_metrics` has not
        # reduced yet.
        self.unreduced_updates = 0
        # True when the learners are rollout workers (`attach`), and those workers.
        self._attached = rollout_workers is not None
        self._rollout_workers: list[WorkerHandle] = []
        device = _driver_device(config) if num_learners == 0 and not self._attached else None
        if rollout_workers is not None:
            self._policy_ids = set(policies if policy_ids is None else policy_ids)
            self.attach(rollout_workers)
        elif num_learners == 0 and device is None:
            self.local_learner = Learner(policies, config, callbacks, policy_ids=policy_ids)
            self._policy_ids = self.local_learner.policy_ids
        elif num_learners == 0:
            # `num_gpus`: the driver's learner trains copies of the policies on the
            # device; weights come back to the (CPU) policies after each update.
            from corral.core.learner.distributed import (
                InProcessLearner,
                LearnerWorker,
                policy_build_spec,
            )

            ids = sorted(policies if policy_ids is None else policy_ids)
            specs = {pid: policy_build_spec(policies[pid]) for pid in ids}
            worker = LearnerWorker(specs, config, ids, 0, 1, str(device), callbacks=callbacks)
            self._handles = [InProcessLearner(worker)]
            self.local_learner = worker.learner
            self._policy_ids = set(ids)
        else:
            self._policy_ids = set(policies if policy_ids is None else policy_ids)
            self._start(num_learners)
        # The policies the device / remote learners hold copies of (trained or not).
        self._built = set(self._policy_ids)

    @property
    def _learner(self) -> Learner:
        """The driver's learner (only used when there are no learner handles)."""
        assert self.local_learner is not None
        return self.local_learner

    @property
    def is_local(self) -> bool:
        """True when the driver's own learner trains (`num_learners=0`)."""
        return self.local_learner is not None

    @property
    def is_attached(self) -> bool:
        """True when the learners are rollout workers (`attach`)."""
        return self._attached

    @property
    def device(self) -> torch.device | None:
        """Where the driver's learner trains (None with remote learners)."""
        return None if self.local_learner is None else self.local_learner.device

    @property
    def policy_ids(self) -> set[str]:
        """The policies being trained."""
        return self._learner.policy_ids if not self._handles else self._policy_ids

    @property
    def remote_learners(self) -> list[WorkerHandle]:
        """Handles of the remote learners (learner k has rank k); empty when local."""
        return list(self._handles)

    # -- remote learners ---------------------------------------------------------

    @property
    def _timeout_s(self) -> float:
        return float(self.config.get("sample_timeout_s") or DEFAULT_CALL_TIMEOUT_S)

    def _start(self, n: int) -> None:
        """Starts n learners, forms their process group (gloo, or nccl on GPUs)."""
        self._iterator_keys = weakref.WeakKeyDictionary()  # new learners hold none
        from corral.core.learner.distributed import LearnerWorker, policy_build_spec

        cfg = self.config
        ray_backend = cfg.get("backend", "local") == "ray"
        num_cpus = cfg.get("num_cpus_per_learner", 1)
        num_gpus = cfg.get("num_gpus_per_learner", 0) or 0
        # A GPU learner trains on cuda; `_fake_gpus` runs the same code on the CPU
        # (and reserves no GPUs).
        device = "cuda" if num_gpus and not cfg.get("_fake_gpus") else "cpu"
        if cfg.get("_fake_gpus"):
            num_gpus = 0
        built = getattr(self, "_built", self._policy_ids)  # a restart keeps every copy
        specs = {pid: policy_build_spec(self.policies[pid]) for pid in sorted(built)}
        policy_ids = sorted(self._policy_ids)
        env_vars = cfg.get("extra_python_environs_for_worker") or {}
        threads = max(1, int(num_cpus or 1))

        def factory_for(rank: int) -> Callable[[], LearnerWorker]:
            return lambda: LearnerWorker(specs, cfg, policy_ids, rank, n, device)

        resources = {"num_cpus": num_cpus, "num_gpus": num_gpus}
        if ray_backend:
            self._reserve_ray_placement(n, num_cpus, num_gpus)
        self._handles = [
            start_worker(
                WorkerSpec(rank + 1, factory_for(rank), env_vars, threads, self._timeout_s),
                cfg.get("backend", "local"),
                resources=resources,
                placement=self._placement.of(rank) if self._placement else None,
            )
            for rank in range(n)
        ]
        try:
            for handle in self._handles:
                handle.wait_ready(LEARNER_START_TIMEOUT_S)
            address, port = (
                self._handles[0].call("rendezvous_address", ray_backend).result(self._timeout_s)
            )
            wait_all(
                [h.call("init_group", address, port, self._timeout_s) for h in self._handles],
                LEARNER_START_TIMEOUT_S,
            )
        except BaseException:
            self._stop_remote()
            raise

    def attach(self, rollout_workers: Sequence[WorkerHandle]) -> None:
        """Makes the learners of `rollout_workers` this group's learners (DD-PPO).

        The workers join one torch.distributed group
        (`RolloutWorker.setup_torch_data_parallel`, with `torch_distributed_backend`);
        from then on each one's `LearnerWorker` trains the worker's own policies in
        place, averaging every gradient across the group. Called again with the
        workers left after a failure (some recreated, some dropped), it forms the group
        anew; the first worker that was in the old group then hands its policies'
        training state and its optimiser state to all the others, so that every
        learner takes the same steps again.

        Raises:
            ValueError: `rollout_workers` is empty.
        """
        from corral.core.learner.distributed import AttachedLearner

        if not rollout_workers:
            raise ValueError(
                "LearnerGroup.attach needs at least one remote rollout worker (num_workers "
                ">= 1): the learners are the rollout workers."
            )
        before = {id(w) for w in self._rollout_workers}
        cfg = self.config
        first = rollout_workers[0]
        address = first.call("get_node_ip").result(self._timeout_s)
        port = first.call("find_free_port").result(self._timeout_s)
        url = f"tcp://{address}:{port}"
        backend = cfg.get("torch_distributed_backend") or "gloo"
        n = len(rollout_workers)
        self._rollout_workers = list(rollout_workers)
        self._handles = [AttachedLearner(w) for w in rollout_workers]
        self.num_learners = n
        wait_all_fail_fast(
            [
                w.call("setup_torch_data_parallel", url, rank, n, backend)
                for rank, w in enumerate(rollout_workers)
            ],
            LEARNER_START_TIMEOUT_S,
        )
        kept = [h for h, w in zip(self._handles, rollout_workers) if id(w) in before]
        if kept and len(kept) < n:
            source = kept[0]
            pids = sorted(self._policy_ids)
            states = dict(zip(pids, self._wait([source.call("policy_weights", p) for p in pids])))
            learner_state = self._wait([source.call("get_learner_state")])[0]
            others = [h for h in self._handles if h is not source]
            self._wait([h.call("load_states", states) for h in others])
            self._wait([h.call("set_learner_state", learner_state) for h in others])

    def _reserve_ray_placement(self, n: int, num_cpus: float, num_gpus: float) -> None:
        """With backend="ray": a placement group bundle for each of the n learners."""
        from corral.evaluation.ray_backend import RayPlacement

        bundle = {k: v for k, v in {"CPU": num_cpus, "GPU": num_gpus}.items() if v}
        if not bundle:  # zero-resource learners: nothing to reserve
            return
        cfg = self.config
        # Inside a Tune trial: the bundles after the driver's, the rollout and the
        # evaluation workers' (see `Trainer.default_resource_request`).
        offset = 1 + int(cfg.get("num_workers", 0) or 0)
        if cfg.get("evaluation_interval"):
            offset += int(cfg.get("evaluation_num_workers", 0) or 0)
        self._placement = RayPlacement(
            cfg.get("placement_strategy", "PACK"), bundle, trial_offset=offset, first_index=0
        )
        self._placement.reserve(list(range(n)), LEARNER_START_TIMEOUT_S)

    def _call_all(self, method: str, *args: Any, **kwargs: Any) -> list[Any]:
        return self._wait([h.call(method, *args, **kwargs) for h in self._handles])

    def _wait(self, futures: list[WorkerFuture]) -> list[Any]:
        """All results; the first failure of any learner is raised at once.

        (`wait_all` waits in order: a learner blocked in a collective with a dead
        peer would hold it up until the timeout.)
        """
        try:
            return wait_all_fail_fast(futures, self._timeout_s)
        except WorkerFailure as e:
            if self._attached:
                # The learners are rollout workers: the trainer recovers them as such.
                raise
            raise LearnerFailure(
                f"Learner {e.worker_index - 1} (of {len(self._handles)} data-parallel "
                f"learners) failed: {e}",
                e.worker_index,
                e.handle,
            ) from e

    def _stop_remote(self) -> None:
        # (An attached learner's process is its rollout worker's: `kill` leaves it be.)
        for handle in self._handles:
            try:
                handle.kill()
            except Exception:  # noqa: BLE001 - it is being dropped anyway
                logger.debug("Could not kill learner %s", handle, exc_info=True)
        self._handles = []
        if self._placement is not None:
            self._placement.release()
            self._placement = None

    def recover(self, error: BaseException | None = None, *, keep_failed: bool = True) -> None:
        """Rebuilds the remote learners after a failure.

        A process group cannot lose a member, so all learners are stopped and started
        anew from the driver's policies (which hold the weights of the last finished
        update). Their optimisers start fresh (their moments died with the failed
        learner's group), which is logged.

        Args:
            error: the failure (for the log).
            keep_failed: True (`recreate_failed_workers`): as many learners as before;
                False (`ignore_worker_failures`): one fewer (at least one).
        """
        if self.is_local:
            return
        if self._attached:
            # The rollout workers themselves are recovered by the trainer; here the
            # group is only formed anew among them.
            self.attach(self._rollout_workers)
            return
        n = len(self._handles) if keep_failed else max(1, len(self._handles) - 1)
        logger.warning(
            "Restarting the data-parallel learners (%d) after a failure (%s); their "
            "optimiser states start fresh.",
            n,
            error,
        )
        self._stop_remote()
        self._start(n)

    def stop(self) -> None:
        """Ends the remote learners' processes (nothing to do for a local learner)."""
        self._stop_remote()

    # -- the Learner API ------------------------------------------------------------

    def update(
        self, batch: SampleBatch | MultiAgentBatch | None = None, **kwargs: Any
    ) -> dict | None:
        """`Learner.update` (same arguments) on every learner; the result has `Stats` leaves.

        With n remote learners the train batch is split into n shards
        (`distributed.shard_batch`), each learner runs `minibatch_size // n` row
        minibatches with gradients averaged across the learners, and the results are
        merged with `MetricsLogger.aggregate` (means averaged, sums added).

        `data_iterators` (Ray Data): one iterator per learner (e.g.
        `dataset.streaming_split(n, equal=True)`) gives learner k `num_iters` batches of
        `minibatch_size // n` rows of iterator k; a single iterator gives `num_iters`
        batches of `minibatch_size` rows, split among the learners as a batch is. Ray
        learners (backend="ray", with `num_iters`) read their own iterators; otherwise the
        driver reads them (one thread each) and sends each learner its rows.

        `prepare_rows(policy, columns) -> SampleBatch` (an option of this group, not of
        `Learner.update`) turns each batch taken from a data iterator into the rows to
        train on, with the default policy of the process that reads it (the learner's
        own for Ray learners reading their iterators, after the driver's weights were
        loaded into it; the driver's otherwise): the offline algorithms' preparation of
        dataset rows (`corral.offline.dataset_reader.prepare_streamed_rows`).
        """
        prepare_rows = kwargs.pop("prepare_rows", None)
        if kwargs.get("_no_metrics_reduce"):
            self.unreduced_updates += 1
        if not self._handles:
            iterators = kwargs.pop("data_iterators", None)
            num_iters = kwargs.pop("num_iters", None)
            if iterators:  # the iterators' rows, read here, as batches
                prepare = with_reading_policy(prepare_rows, self._learner.policies)
                kwargs["batches"] = [
                    *(kwargs.get("batches") or []),
                    *(
                        rows_of_iterator(it, num_iters, kwargs.get("minibatch_size"), prepare)
                        for it in iterators
                    ),
                ]
            return self._learner.update(batch, **kwargs)
        from corral.core.learner.distributed import policy_train_state, shard_batch

        minibatch_size = kwargs.pop("minibatch_size", None)
        no_metrics_reduce = kwargs.pop("_no_metrics_reduce", False)
        num_iters = kwargs.pop("num_iters", None)
        iterators = kwargs.pop("data_iterators", None)
        data_args = {k: kwargs.pop(k, None) for k in _DATA_ARGS if k != "data_iterators"}
        prepare = with_reading_policy(prepare_rows, self.policies)
        if iterators and len(iterators) == len(self._handles) > 1:
            if batch is not None or any(data_args.values()):
                raise ValueError(
                    "LearnerGroup.update: with one data iterator per learner, pass no other "
                    "training data (batch, batches, refs, episodes) in the same update."
                )
            per_learner: int | None = _rows_per_learner(minibatch_size, len(self._handles))
            if self.config.get("backend", "local") == "ray" and num_iters is not None:
                # Ray actors read their own iterators (the rows never pass the driver).
                return self._update_from_own_iterators(
                    iterators, num_iters, per_learner, no_metrics_reduce, kwargs, prepare_rows
                )
            shards = self._iterator_shards(iterators, num_iters, minibatch_size, prepare)
        else:
            if iterators and len(iterators) != 1:
                raise ValueError(
                    f"LearnerGroup.update: got {len(iterators)} data iterators for "
                    f"{len(self._handles)} learners; pass one per learner (e.g. "
                    f"dataset.streaming_split({len(self._handles)}, equal=True)) or one "
                    "whose batches are split among them."
                )
            if iterators:  # one iterator: its rows, read here, are split as a batch is
                data_args["batches"] = [
                    *(data_args.get("batches") or []),
                    rows_of_iterator(iterators[0], num_iters, minibatch_size, prepare),
                ]
            data = training_data_of(batch, minibatch_size=minibatch_size, **data_args)
            if len(self._handles) == 1:
                shards, per_learner = [data], minibatch_size
            else:
                shards, per_learner = shard_batch(data, len(self._handles), minibatch_size)
        trained = sorted(
            pid
            for pid in shards[0].policy_batches
            if pid in self._policy_ids and pid in self.policies
        )
        states = {pid: policy_train_state(self.policies[pid]) for pid in trained}
        options = {**kwargs, "minibatch_size": per_learner}
        futures = [
            h.call("update", states, shard, **options) for h, shard in zip(self._handles, shards)
        ]
        return self._finish_update(futures, no_metrics_reduce)

    def reduce_metrics(self) -> dict:
        """The metrics of the updates run with `_no_metrics_reduce` since the last reduce,
        reduced (what `update` would have returned after the last of them: means over
        all their minibatches, sums over all their rows)."""
        self.unreduced_updates = 0
        if not self._handles:
            return self._learner.metrics.reduce()
        return self.metrics.reduce()

    def _finish_update(self, futures: list[WorkerFuture], no_metrics_reduce: bool) -> dict | None:
        """Waits for the learners' updates, loads learner 0's new states into the driver's
        policies and merges the learners' metrics."""
        from corral.core.learner.distributed import load_policy_train_state

        results = self._wait(futures)
        for pid, state in (results[0][1] or {}).items():
            policy = self.policies[pid]
            load_policy_train_state(policy, state, schedules=False)
            # The rollout workers' weight sync sends only weights that changed.
            policy.bump_weights_seq()
        return self.merge_metrics([metrics for metrics, _ in results], reduce=not no_metrics_reduce)

    def merge_metrics(self, results: Iterable[dict | None], *, reduce: bool = True) -> dict | None:
        """Merges the learners' `Learner.update` results into this group's metrics (means
        averaged, sums added: `MetricsLogger.aggregate`) and, with `reduce`, returns them
        reduced, as `update` does (None without)."""
        self.metrics.aggregate([metrics for metrics in results if metrics is not None])
        return self.metrics.reduce() if reduce else None

    def _update_from_own_iterators(
        self,
        iterators: Sequence[Any],
        num_iters: int,
        per_learner: int | None,
        no_metrics_reduce: bool,
        options: dict[str, Any],
        prepare_rows: Callable[..., SampleBatch] | None = None,
    ) -> dict | None:
        """Ray learner k reads `num_iters` batches of `per_learner` rows of iterator k
        itself. Each iterator is sent to its learner once (the first update that names
        it) and kept there, so later updates continue its pass."""
        from corral.core.learner.distributed import policy_train_state

        sends, keys = [], []
        for rank, (handle, iterator) in enumerate(zip(self._handles, iterators)):
            held = self._iterator_keys.setdefault(iterator, {})
            if rank not in held:
                held[rank] = self._next_iterator_key
                self._next_iterator_key += 1
                sends.append(handle.call("set_data_iterator", held[rank], iterator))
            keys.append(held[rank])
        self._wait(sends)
        trained = [pid for pid in (DEFAULT_POLICY_ID,) if pid in self._policy_ids]
        states = {pid: policy_train_state(self.policies[pid]) for pid in trained}
        futures = [
            h.call(
                "update_from_iterator",
                states,
                key,
                num_iters,
                prepare_rows,
                minibatch_size=per_learner,
                **options,
            )
            for h, key in zip(self._handles, keys)
        ]
        return self._finish_update(futures, no_metrics_reduce)

    def _iterator_shards(
        self,
        iterators: Sequence[Any],
        num_iters: int | None,
        minibatch_size: int | None,
        prepare: Callable[[Mapping[str, Any]], SampleBatch] | None = None,
    ) -> list[MultiAgentBatch]:
        """Learner k's shard from data iterator k: `num_iters` batches of
        `minibatch_size // n` rows (the group's minibatch is `minibatch_size` rows).

        The iterators are read at once, one thread each (the parts of a
        `streaming_split` are consumed together), and cut to equal length: every learner
        must run the same number of minibatches.
        """
        from concurrent.futures import ThreadPoolExecutor

        per_learner = _rows_per_learner(minibatch_size, len(self._handles))
        with ThreadPoolExecutor(len(iterators)) as pool:
            parts = list(
                pool.map(
                    lambda it: rows_of_iterator(it, num_iters, per_learner, prepare), iterators
                )
            )
        length = min(p.count for p in parts)
        length -= length % per_learner
        return [MultiAgentBatch({DEFAULT_POLICY_ID: p.slice(0, length)}, length) for p in parts]

    def add_policy(self, policy_id: str, policy: Policy) -> None:
        """Every learner starts training `policy` (with a fresh optimiser)."""
        if not self._handles:
            self._learner.add_policy(policy_id, policy)
            return
        from corral.core.learner.distributed import policy_build_spec, policy_train_state

        if self.policies.get(policy_id) is not policy and isinstance(self.policies, dict):
            self.policies[policy_id] = policy
        spec, state = policy_build_spec(policy), policy_train_state(policy)
        self._call_all("add_policy", policy_id, spec, state)
        self._policy_ids.add(policy_id)
        self._built.add(policy_id)

    def remove_policy(self, policy_id: str) -> None:
        """Every learner stops training the policy."""
        if not self._handles:
            self._learner.remove_policy(policy_id)
            return
        self._call_all("remove_policy", policy_id)
        self._policy_ids.discard(policy_id)
        self._built.discard(policy_id)

    def set_policies_to_train(self, policy_ids: Iterable[str]) -> None:
        """Every learner trains exactly `policy_ids` from now on."""
        if not self._handles:
            self._learner.set_policies_to_train(policy_ids)
            return
        wanted = set(policy_ids)
        unknown = sorted(pid for pid in wanted - self._built if pid not in self.policies)
        if unknown:
            raise ValueError(
                f"Cannot train policies {unknown}: the driver has no such policies "
                f"(it has {sorted(self.policies)})."
            )
        for pid in sorted(wanted - self._built):
            # A policy the learners have no copy of yet (e.g. `Trainer.add_policy`).
            self.add_policy(pid, self.policies[pid])
        self._call_all("set_policies_to_train", sorted(wanted))
        self._policy_ids = wanted

    def get_state(self) -> dict[str, Any]:
        """The learner state (optimisers, shuffling generator); learner 0's when remote
        (all learners hold the same)."""
        if not self._handles:
            return self._learner.get_state()
        from corral.core.learner.distributed import from_bytes

        return from_bytes(self._wait([self._handles[0].call("get_learner_state")])[0])

    def set_state(self, state: dict[str, Any]) -> None:
        """Loads what `get_state` returned into every learner."""
        if not self._handles:
            self._learner.set_state(state)
            return
        from corral.core.learner.distributed import to_bytes

        self._call_all("set_learner_state", to_bytes(state))
