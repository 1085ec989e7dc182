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
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

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
                if pid not in worker.policy_map:
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
    call = functools.partial(_call_method, method, args, kwargs)
    trainer.workers.foreach_worker(call)
    if evaluation_workers and trainer.evaluation_workers is not None:
        trainer.evaluation_workers.foreach_worker(call)


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
        if pid in local.policy_map:
            continue
        spec = added_policy_from_json(pid, entry, checkpoint_path)
        spec.add_to(trainer, pid, evaluation_workers=spec.evaluation_workers)
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
    )
