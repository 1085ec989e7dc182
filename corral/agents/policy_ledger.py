"""The policy-change ledger: policies a trainer added or removed after setup.

`Trainer.add_policy` / `remove_policy` change the policy map of every worker.
Two things must be able to redo those changes later:

* a worker recreated after a failure (`recreate_failed_workers`) is built from
  the config, so it lacks the added policies and still has the removed ones:
  `PolicyLedger.replay_on` gives it the local worker's policy map;
* a checkpoint records the changes as JSON (`PolicyLedger.to_json`): each added
  policy's class as a dotted import path, its spaces via `corral.utils.spaces_json`
  and its config, so that `restore()` on a fresh trainer adds it again before
  loading its weights (`apply_policy_changes`). Classes are looked up among the
  modules already imported, never imported on the checkpoint's word.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, NamedTuple

from corral.evaluation.backend import wait_all
from corral.policy.policy import Policy
from corral.utils.checkpoint_config import qualified_name, resolve_class
from corral.utils.error import CheckpointError
from corral.utils.spaces_json import space_from_json, space_to_json

if TYPE_CHECKING:
    from corral.agents.trainer import Trainer

logger = logging.getLogger(__name__)


class AddedPolicy(NamedTuple):
    """A policy added with `Trainer.add_policy`, as needed to add it again (to a
    recreated worker, or to a fresh trainer restoring a checkpoint)."""

    policy_cls: type[Policy]
    observation_space: Any
    action_space: Any
    config: dict
    evaluation_workers: bool
    # The indices of the trainer's rollout workers that got it (`add_policy(workers=...)`;
    # 0: the local worker); None: all of them.
    worker_indices: tuple[int, ...] | None = None

    def add_to(self, target: Any, policy_id: str, **extra: Any) -> Any:
        """`target.add_policy(policy_id, ...)` with this class, spaces and config;
        `target` is a rollout worker or a trainer (`extra`: its further arguments)."""
        return target.add_policy(
            policy_id,
            self.policy_cls,
            observation_space=self.observation_space,
            action_space=self.action_space,
            config=self.config,
            **extra,
        )

    def belongs_on(self, worker: Any) -> bool:
        """Whether the policy belongs on `worker` (a rollout worker of the trainer, or
        one of its evaluation workers)."""
        if worker.config.get("in_evaluation"):
            return self.evaluation_workers
        return self.worker_indices is None or worker.worker_index in self.worker_indices


class PolicyLedger:
    """The `add_policy` / `remove_policy` calls since setup, net of each other.

    A policy added and then removed leaves no trace; one of the config removed
    and added again is an added one.
    """

    def __init__(self) -> None:
        self.added: dict[str, AddedPolicy] = {}
        self.removed: list[str] = []

    def record_added(self, policy_id: str, spec: AddedPolicy) -> None:
        """Notes that `policy_id` was added with `spec`."""
        self.added[policy_id] = spec
        if policy_id in self.removed:
            self.removed.remove(policy_id)

    def record_removed(self, policy_id: str) -> None:
        """Notes that `policy_id` was removed."""
        if self.added.pop(policy_id, None) is None:
            self.removed.append(policy_id)

    def replay_on(self, local_worker: Any) -> Callable[[Any], None]:
        """A function that gives a freshly built worker `local_worker`'s policy map:
        the added policies without the removed ones, the current mapping fn and
        policies to train (for `handle.apply(...)`: it travels to the worker)."""
        added = dict(self.added)
        removed = list(self.removed)
        mapping_fn = local_worker.policy_mapping_fn
        to_train = local_worker.policies_to_train

        def replay(worker: Any) -> None:
            for pid in removed:
                if pid in worker.policy_map:
                    worker.remove_policy(pid)
            for pid, spec in added.items():
                if pid not in worker.policy_map and spec.belongs_on(worker):
                    spec.add_to(worker, pid)
            worker.set_policy_mapping_fn(mapping_fn)
            worker.set_policies_to_train(to_train)
            # Its first episodes started with the config's mapping: start them again.
            worker.reset_sampler()

        return replay

    def to_json(self, policies_to_train: Any) -> dict:
        """The ledger as a checkpoint stores it (`policies_to_train`: the local
        worker's; a function cannot be stored and is recorded as None)."""
        return {
            "added": {pid: added_policy_to_json(pid, spec) for pid, spec in self.added.items()},
            "removed": list(self.removed),
            "policies_to_train": None if callable(policies_to_train) else list(policies_to_train),
        }


def call_on_workers(
    trainer: Trainer, method: str, evaluation_workers: bool, *args: Any, **kwargs: Any
) -> None:
    """Calls `worker.<method>(*args, **kwargs)` on every rollout worker of `trainer`, and
    on its evaluation workers too when `evaluation_workers` is True and it has them."""
    call_on_workers_of(trainer.workers, method, *args, **kwargs)
    if evaluation_workers and trainer.evaluation_workers is not None:
        call_on_workers_of(trainer.evaluation_workers, method, *args, **kwargs)


def call_on_workers_of(worker_set: Any, method: str, *args: Any, **kwargs: Any) -> None:
    """Calls `worker.<method>(*args, **kwargs)` on every worker of a `WorkerSet`."""
    worker_set.foreach_worker(functools.partial(_call_method, method, args, kwargs))


def call_on_given_workers(
    trainer: Trainer, workers: Iterable[Any], method: str, **kwargs: Any
) -> tuple[int, ...]:
    """Calls `worker.<method>(**kwargs)` on each of `workers`: `RolloutWorker`s in this
    process directly, remote workers' handles in their processes (all waited for).

    Returns:
        The indices of `trainer`'s own rollout workers among `workers` (0: its local
        worker), in order.

    Raises:
        TypeError: an entry is neither a `RolloutWorker` nor a remote worker's handle.
    """
    from corral.evaluation.rollout_worker import RolloutWorker

    workers = list(workers)
    for worker in workers:
        if not isinstance(worker, RolloutWorker) and not callable(getattr(worker, "apply", None)):
            raise TypeError(
                f"`workers` takes RolloutWorkers and remote workers' handles (e.g. "
                f"`trainer.workers.local_worker()`, `trainer.workers.remote_workers()`), got "
                f"{worker!r}."
            )
    call = functools.partial(_call_method, method, (), kwargs)
    local, remote = trainer.workers.local_worker(), trainer.workers.remote_workers()
    futures = []
    for worker in workers:
        if isinstance(worker, RolloutWorker):
            call(worker)
        else:
            futures.append(worker.apply(call))
    wait_all(futures)
    indices = [0 if worker is local else worker.worker_index for worker in workers]
    own = [worker is local or any(worker is r for r in remote) for worker in workers]
    return tuple(i for i, mine in zip(indices, own, strict=True) if mine)


def added_policy_spaces(
    trainer: Trainer,
    policy_id: str,
    worker_indices: tuple[int, ...] | None,
    observation_space: Any,
    action_space: Any,
) -> tuple[Any, Any]:
    """The spaces of a policy just added to `trainer`'s rollout workers of
    `worker_indices` (None: all): the local worker's copy's, else the first remote
    one's, else (none of the trainer's workers got it) the spaces given."""
    if worker_indices is None or 0 in worker_indices:
        return trainer.workers.local_worker().policy_map.spaces(policy_id)
    remote = trainer_workers_of(trainer, worker_indices)
    if not remote:
        return observation_space, action_space
    spaces = remote[0].apply(functools.partial(_policy_spaces, policy_id)).result()
    return spaces[0], spaces[1]


def _policy_spaces(policy_id: str, worker: Any) -> tuple[Any, Any]:
    """In a worker: the (observation, action) spaces of its policy `policy_id`."""
    return worker.policy_map.spaces(policy_id)  # type: ignore[no-any-return]


def trainer_workers_of(trainer: Trainer, worker_indices: Iterable[int]) -> list[Any]:
    """`trainer`'s rollout workers (the local one, remote handles) with these indices."""
    wanted = set(worker_indices)
    local = trainer.workers.local_worker()
    remote = [w for w in trainer.workers.remote_workers() if w.worker_index in wanted]
    return ([local] if 0 in wanted else []) + remote


def remove_where_present(
    policy_id: str, policy_mapping_fn: Callable | None, policies_to_train: Any, worker: Any
) -> None:
    """In a worker: removes `policy_id` if it has it (a policy added to some workers
    only), and sets the new mapping fn and policies to train either way."""
    if policy_id in worker.policy_map:
        worker.remove_policy(
            policy_id, policy_mapping_fn=policy_mapping_fn, policies_to_train=policies_to_train
        )
        return
    if policy_mapping_fn is not None:
        worker.set_policy_mapping_fn(policy_mapping_fn)
    if policies_to_train is not None:
        worker.set_policies_to_train(policies_to_train)


def _call_method(method: str, args: tuple, kwargs: dict, worker: Any) -> None:
    # Returns nothing: a remote worker would send back what the method returns (a
    # new policy, which may hold objects that cannot travel).
    getattr(worker, method)(*args, **kwargs)


def apply_policy_changes(trainer: Trainer, changes: dict, checkpoint_path: str) -> None:
    """Makes `trainer`'s policy map the one a checkpoint was saved with.

    `changes` is `PolicyLedger.to_json`'s record: removed policies are removed,
    added ones the trainer lacks are added (those it has are kept as they are),
    and a stored list of policies to train is set.
    """
    local = trainer.workers.local_worker()
    for pid in changes.get("removed", []):
        if pid in local.policy_map:
            trainer.remove_policy(pid)
    for pid, entry in (changes.get("added") or {}).items():
        # (One added to some workers only, without the local one, is in the ledger.)
        if pid in local.policy_map or pid in trainer._policy_ledger.added:
            continue
        spec = added_policy_from_json(pid, entry, checkpoint_path)
        workers = None
        if spec.worker_indices is not None:
            workers = trainer_workers_of(trainer, spec.worker_indices)
        spec.add_to(trainer, pid, evaluation_workers=spec.evaluation_workers, workers=workers)
    to_train = changes.get("policies_to_train")
    if to_train is not None:
        to_train = [pid for pid in to_train if pid in local.policy_map]

        def set_to_train(worker: Any) -> None:
            worker.set_policies_to_train(to_train)

        trainer.workers.foreach_worker(set_to_train)
        trainer._sync_learner_policies()


def added_policy_to_json(policy_id: str, spec: AddedPolicy) -> dict:
    """An added policy as JSON: its class as a dotted import path, its spaces via
    `space_to_json`, its config as is. What cannot be stored so is named under
    "unrestorable" (restore then needs the policy added by hand first)."""
    cls = spec.policy_cls
    entry: dict[str, Any] = {
        "policy_class": qualified_name(cls),
        "evaluation_workers": spec.evaluation_workers,
        "worker_indices": None if spec.worker_indices is None else list(spec.worker_indices),
    }
    problems = []
    if "<locals>" in cls.__qualname__:
        problems.append(f"class {entry['policy_class']} is defined inside a function")
    try:
        entry["observation_space"] = space_to_json(spec.observation_space)
        entry["action_space"] = space_to_json(spec.action_space)
    except TypeError as e:
        problems.append(str(e))
    try:
        entry["config"] = json.loads(json.dumps(spec.config, allow_nan=False))
    except (TypeError, ValueError) as e:
        problems.append(f"its config is not JSON-serialisable ({e})")
    if problems:
        logger.warning(
            "Checkpoint cannot fully record added policy %r (%s); add it with "
            "`add_policy` before restoring.",
            policy_id,
            "; ".join(problems),
        )
        entry["unrestorable"] = "; ".join(problems)
    return entry


def added_policy_from_json(policy_id: str, entry: dict, checkpoint_path: str) -> AddedPolicy:
    """Inverse of `added_policy_to_json`. The policy class is looked up among the
    modules already imported (never imported on the checkpoint's word) and must be a
    `Policy` subclass.

    Raises:
        CheckpointError: the entry is unrestorable, names an unknown class, or
            holds malformed spaces; the message says how to add the policy by hand.
    """
    hint = (
        f"add policy {policy_id!r} with `trainer.add_policy(...)` before `restore()` "
        "(policies the trainer already has are not re-added)"
    )
    if entry.get("unrestorable"):
        raise CheckpointError(
            f"Checkpoint {checkpoint_path} cannot rebuild added policy {policy_id!r}: "
            f"{entry['unrestorable']}; {hint}."
        )
    cls = resolve_class(
        entry.get("policy_class"),
        Policy,
        f"{checkpoint_path} (added policy {policy_id!r}; or {hint})",
    )
    try:
        obs_space = space_from_json(entry["observation_space"])
        act_space = space_from_json(entry["action_space"])
    except (KeyError, ValueError, TypeError) as e:
        raise CheckpointError(
            f"Checkpoint {checkpoint_path}: the spaces of added policy {policy_id!r} are "
            f"malformed ({e}); expected space descriptions of corral.utils.spaces_json."
        ) from e
    return AddedPolicy(
        cls,
        obs_space,
        act_space,
        dict(entry.get("config") or {}),
        bool(entry.get("evaluation_workers", True)),
        _worker_indices_from_json(entry.get("worker_indices"), policy_id, checkpoint_path),
    )


def _worker_indices_from_json(
    value: Any, policy_id: str, checkpoint_path: str
) -> tuple[int, ...] | None:
    """An added policy's `worker_indices` entry (None: all workers).

    Raises:
        CheckpointError: the entry is not a list of worker indices.
    """
    if value is None:
        return None
    if not isinstance(value, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in value
    ):
        raise CheckpointError(
            f"Checkpoint {checkpoint_path}: added policy {policy_id!r} has malformed "
            f"worker_indices {value!r}; expected a list of rollout-worker indices or null."
        )
    return tuple(value)
