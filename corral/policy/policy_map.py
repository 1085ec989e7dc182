"""`PolicyMap`: policies by id, at most `capacity` of them in memory.

Self-play leagues grow to more policies than fit in memory. The map keeps the
most recently used `capacity` policies as objects and writes the others to
`cache_dir`: weights as safetensors, the rest of `Policy.get_state()` as JSON,
and the state of attached components (a learner's optimiser for that policy)
as torch tensors loaded with `weights_only=True`. Nothing is pickled, so a
spilled policy comes back by rebuilding it from its class, spaces and config
and loading that state. Callers must look policies up by id on each use
instead of holding on to the objects, which may be replaced by a reload.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections import OrderedDict
from collections.abc import Iterator, MutableMapping
from typing import Any, Protocol

from corral.policy.policy import Policy
from corral.utils.checkpoints import read_weights_and_state, write_weights_and_state

WEIGHTS_FILE = "weights.safetensors"
STATE_FILE = "state.json"
ATTACHED_FILE = "attached.pt"


class SpillListener(Protocol):
    """Something that keeps per-policy state outside the policy (e.g. a learner)."""

    def on_policy_spilled(self, policy_id: str) -> Any:
        """Returns this listener's state for `policy_id` (tensors, numbers, lists, dicts)
        and releases its own references to the policy; None when it has none."""

    def on_policy_restored(self, policy_id: str, state: Any) -> None:
        """Takes back the state returned by `on_policy_spilled`."""


class PolicyMap(dict):
    """An LRU map from policy id to `Policy` that spills to disk beyond `capacity`.

    A `dict` subclass, as RLlib 1.x's (`isinstance(policy_map, dict)` holds); all
    access goes through the mapping methods below, which know about spilled policies
    (the built-in dict storage is not used).

    Args:
        capacity: how many policies stay in memory (at least 1).
        cache_dir: folder under which this map creates its own spill folder on
            the first spill (None: the system's temporary folder); several
            workers can share one `cache_dir`.
    """

    def __init__(self, capacity: int = 100, cache_dir: str | None = None) -> None:
        if int(capacity) < 1:
            raise ValueError(f"`policy_map_capacity` must be >= 1, got {capacity}.")
        self.capacity = int(capacity)
        self._parent_dir = cache_dir
        self._cache_dir: str | None = None
        self._in_memory: OrderedDict[str, Policy] = OrderedDict()
        # How to rebuild each policy: (class, obs space, action space, config).
        self._specs: dict[str, tuple] = {}
        # weights_seq of each policy, readable without loading a spilled one.
        self._seqs: dict[str, int] = {}
        self._listeners: list[SpillListener] = []

    # -- mapping protocol ---------------------------------------------------

    def __getitem__(self, policy_id: str) -> Policy:
        policy = self._in_memory.get(policy_id)
        if policy is not None:
            self._in_memory.move_to_end(policy_id)
            return policy
        if policy_id not in self._specs:
            raise KeyError(policy_id)
        return self._restore(policy_id)

    def __setitem__(self, policy_id: str, policy: Policy) -> None:
        if policy_id in self._specs:
            del self[policy_id]
        self._specs[policy_id] = (
            type(policy),
            policy.observation_space,
            policy.action_space,
            policy.config,
        )
        self._in_memory[policy_id] = policy
        self._evict_if_full()

    def __delitem__(self, policy_id: str) -> None:
        if policy_id not in self._specs:
            raise KeyError(policy_id)
        del self._specs[policy_id]
        self._seqs.pop(policy_id, None)
        self._in_memory.pop(policy_id, None)
        if self._cache_dir is not None:
            shutil.rmtree(self._policy_dir(policy_id), ignore_errors=True)

    def __iter__(self) -> Iterator[str]:
        return iter(list(self._specs))

    def __len__(self) -> int:
        return len(self._specs)

    def __contains__(self, policy_id: object) -> bool:
        return policy_id in self._specs

    def __bool__(self) -> bool:
        return bool(self._specs)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, PolicyMap):
            return other is self
        return MutableMapping.__eq__(self, other)

    __hash__ = None  # type: ignore[assignment]

    # dict's own methods read its (unused) storage: use the mapping protocol instead.
    get = MutableMapping.get
    keys = MutableMapping.keys
    items = MutableMapping.items
    values = MutableMapping.values
    pop = MutableMapping.pop
    popitem = MutableMapping.popitem
    clear = MutableMapping.clear
    update = MutableMapping.update
    setdefault = MutableMapping.setdefault

    def copy(self) -> dict:
        """A plain dict of the policies (loads spilled ones)."""
        return dict(self.items())

    def __reduce__(self) -> tuple:
        # Pickle the attributes only (the dict storage is empty by design).
        return (_new_policy_map, (type(self),), self.__dict__)

    # -- extras -------------------------------------------------------------

    def in_memory(self) -> list[str]:
        """Ids of the policies held as objects, least recently used first."""
        return list(self._in_memory)

    def spaces(self, policy_id: str) -> tuple[Any, Any]:
        """(observation space, action space) of a policy, without loading it."""
        _, obs_space, act_space, _ = self._specs[policy_id]
        return obs_space, act_space

    def policy_class(self, policy_id: str) -> type[Policy]:
        """The class of a policy, without loading it."""
        return self._specs[policy_id][0]

    def create_policy(
        self,
        policy_id: str,
        policy_cls: type[Policy],
        observation_space: Any,
        action_space: Any,
        config_override: dict,
        merged_config: dict,
    ) -> None:
        """Builds `policy_cls(observation_space, action_space, merged_config)` and
        stores it under `policy_id` (RLlib 1.13's call; `config_override` is the
        policy's own part of `merged_config`, which already holds it).

        Raises:
            ValueError: `merged_config["framework"]` is not "torch".
        """
        from corral.agents.config_validation import validate_framework

        validate_framework(merged_config)
        self[policy_id] = policy_cls(observation_space, action_space, merged_config)

    def weights_seq(self, policy_id: str) -> int:
        """The policy's update counter, without loading it when spilled."""
        policy = self._in_memory.get(policy_id)
        if policy is not None:
            return getattr(policy, "weights_seq", 0)
        return self._seqs.get(policy_id, 0)

    def add_spill_listener(self, listener: SpillListener) -> None:
        """Registers a component whose per-policy state must travel with spills."""
        self._listeners.append(listener)

    @property
    def cache_dir(self) -> str:
        if self._cache_dir is None:
            if self._parent_dir is not None:
                os.makedirs(self._parent_dir, exist_ok=True)
            self._cache_dir = tempfile.mkdtemp(prefix="policy_map_", dir=self._parent_dir)
        return self._cache_dir

    # -- spilling -----------------------------------------------------------

    def _policy_dir(self, policy_id: str) -> str:
        return os.path.join(self.cache_dir, _safe_name(policy_id))

    def _evict_if_full(self) -> None:
        while len(self._in_memory) > self.capacity:
            policy_id, policy = self._in_memory.popitem(last=False)
            self._spill(policy_id, policy)

    def _spill(self, policy_id: str, policy: Policy) -> None:
        import torch

        folder = self._policy_dir(policy_id)
        seq = getattr(policy, "weights_seq", 0)
        self._seqs[policy_id] = seq
        write_weights_and_state(
            folder,
            {**policy.get_state(), "weights_seq": seq},
            weights_file=WEIGHTS_FILE,
            state_file=STATE_FILE,
        )
        attached = [listener.on_policy_spilled(policy_id) for listener in self._listeners]
        torch.save(attached, os.path.join(folder, ATTACHED_FILE))

    def _restore(self, policy_id: str) -> Policy:
        import torch

        folder = self._policy_dir(policy_id)
        cls, obs_space, act_space, config = self._specs[policy_id]
        policy = cls(obs_space, act_space, config)
        # The map wrote these files itself: a diverged policy's NaNs come back as they were.
        state = read_weights_and_state(
            folder, weights_file=WEIGHTS_FILE, state_file=STATE_FILE, check_finite=False
        )
        seq = state.pop("weights_seq", 0)
        policy.set_state(state)
        if hasattr(policy, "weights_seq"):
            policy.weights_seq = seq
        attached = torch.load(os.path.join(folder, ATTACHED_FILE), weights_only=True)
        self._in_memory[policy_id] = policy
        for listener, listener_state in zip(self._listeners, attached):
            listener.on_policy_restored(policy_id, listener_state)
        self._evict_if_full()
        return policy

    def __repr__(self) -> str:
        return (
            f"PolicyMap(capacity={self.capacity}, in_memory={self.in_memory()}, all={list(self)})"
        )


def _new_policy_map(cls: type) -> PolicyMap:
    return dict.__new__(cls)


def _safe_name(policy_id: str) -> str:
    """A folder name for any policy id (ids may hold '/' or other odd characters)."""
    return "".join(c if c.isalnum() or c in "-_." else f"%{ord(c):02x}" for c in policy_id)
