"""Data-parallel learners: n `Learner`s in their own processes, one torch.distributed group.

Each remote learner holds its own copy of the policies it trains. Per update the driver
(`LearnerGroup`) sends every learner the driver policies' training state (weights of
every torch module the policy holds, target networks included, and the schedule state)
and one shard of the train batch; the learners run `Learner.update` on their shards with
`minibatch_size / n` and average every gradient across the group as soon as backward
has computed it (a post-accumulate-grad hook per parameter, DDP's scheme without
buckets), so gradient clipping, the non-finite checks and the optimiser step all see the
averaged gradient and every learner takes the bit-identical step. The mean stats that
`policy.after_update` adapts to (PPO's KL coefficient) are averaged too, so no state
drifts apart. Learner 0 then sends its new training state back; the driver loads it into
its own policies, which stay the source of truth (what rollout workers are synced from,
what checkpoints hold).

The processes are the rollout workers' machinery (`corral.evaluation.backend`'s
`ProcessWorker` with backend="local", `ray_backend.RayWorker` in a placement group with
backend="ray"): a learner is a worker whose factory builds a `LearnerWorker`.

DD-PPO turns this around: its learners are the remote rollout workers themselves
(`RolloutWorker.setup_torch_data_parallel`). Each one's `LearnerWorker` trains the
worker's own policies in place (`policies=`), on the batch that worker sampled
(`update_own_batch`), with the same gradient averaging; there is no driver state to
load and none to send back. `AttachedLearner` is the handle through which the driver's
`LearnerGroup` reaches such a learner.
"""

from __future__ import annotations

import io
import os
import socket
import weakref
from collections.abc import Callable, Iterable, Mapping, MutableMapping
from datetime import timedelta
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np
import torch

from corral.core.learner.finite import optimizers_of
from corral.core.learner.learner import Learner
from corral.evaluation.backend import DEFAULT_CALL_TIMEOUT_S, Future
from corral.evaluation.worker_handle import WorkerFuture, WorkerHandle
from corral.policy.policy import Policy
from corral.policy.sample_batch import DEFAULT_POLICY_ID, MultiAgentBatch, SampleBatch

if TYPE_CHECKING:
    from corral.agents.callbacks import DefaultCallbacks

# (policy class, observation space, action space, policy config): how a learner
# process builds its copy of a policy.
PolicyBuildSpec = tuple[type[Policy], gym.Space, gym.Space, dict]


def policy_build_spec(policy: Policy) -> PolicyBuildSpec:
    """What a learner process needs to build its own copy of `policy`."""
    return (type(policy), policy.observation_space, policy.action_space, policy.config)


# -- policy training state ----------------------------------------------------


def policy_train_state(policy: Policy) -> dict[str, Any]:
    """Everything of `policy` that training reads or changes, as numpy and JSON values.

    The state dict of every `torch.nn.Module` attribute (the model, and target networks
    such as DQN's `target_model` or SAC's `target_q`, which are not in `get_weights()`),
    the global timestep (schedules) and `extra_state()` (e.g. PPO's KL coefficient).
    """
    modules = {
        name: {k: v.detach().cpu().numpy() for k, v in module.state_dict().items()}
        for name, module in vars(policy).items()
        if isinstance(module, torch.nn.Module)
    }
    extra = policy.extra_state() if hasattr(policy, "extra_state") else {}
    return {
        "modules": modules,
        "global_timestep": getattr(policy, "global_timestep", 0),
        "extra": extra,
    }


def load_policy_train_state(policy: Policy, state: Mapping[str, Any], *, schedules: bool) -> None:
    """Loads `policy_train_state` output into `policy` (in place, on its device).

    Args:
        policy: the policy to load into (its torch modules are loaded by name).
        state: what `policy_train_state` returned (for this policy's class).
        schedules: also run `on_global_var_update` with the state's timestep (in a
            learner process, so that its `cur_lr` / entropy schedules match the driver's).
    """
    for name, tensors in state["modules"].items():
        module = getattr(policy, name)
        module.load_state_dict({k: torch.from_numpy(_writable(v)) for k, v in tensors.items()})
    if state.get("extra") and hasattr(policy, "set_extra_state"):
        policy.set_extra_state(state["extra"])
    if schedules and hasattr(policy, "on_global_var_update"):
        policy.on_global_var_update({"timestep": state.get("global_timestep", 0)})


def _writable(array: np.ndarray) -> np.ndarray:
    # Arrays read zero-copy from Ray's object store are read-only; torch wants writable.
    array = np.asarray(array)
    return array if array.flags.writeable else array.copy()


def to_bytes(obj: object) -> bytes:
    """Tensors (optimiser states) as bytes: no tensor travels through a pipe by itself
    (torch would pass it as shared memory), and they load back with weights_only."""
    buffer = io.BytesIO()
    torch.save(obj, buffer)
    return buffer.getvalue()


def from_bytes(data: bytes) -> Any:
    """What `to_bytes` wrote (tensors and plain values only: loaded with weights_only)."""
    return torch.load(io.BytesIO(data), weights_only=True)


# -- rendezvous ---------------------------------------------------------------


def node_address(use_ray: bool) -> str:
    """This process's address for a process group's TCP rendezvous: loopback on one
    machine (backend="local"), the node's IP on a Ray cluster."""
    if not use_ray:
        return "127.0.0.1"
    import ray

    return str(ray.util.get_node_ip_address())


def free_port() -> int:
    """A TCP port that is free on this machine now (for a rendezvous)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return int(s.getsockname()[1])


# -- sharding -----------------------------------------------------------------


def shard_batch(
    batch: MultiAgentBatch, num_shards: int, minibatch_size: int | None
) -> tuple[list[MultiAgentBatch], int | None]:
    """Splits each policy's rows into `num_shards` equal shards.

    Rows go out in blocks of `minibatch_size // num_shards` (the per-learner minibatch),
    round robin, so that without shuffling learner k's j-th minibatch is the k-th part of
    the j-th minibatch a single learner would see: n learners then compute exactly one
    learner's update. Without a minibatch size the blocks are `count // num_shards`
    rows (contiguous shards). Shards are cut to equal length (at most
    `num_shards * block - 1` rows are dropped), since every learner must run the same
    number of minibatches: each one is a collective gradient average. A policy with
    fewer rows than learners is left out of this update.

    Returns:
        (the shards, the per-learner minibatch size).
    """
    if minibatch_size is not None and minibatch_size < num_shards:
        raise ValueError(
            f"minibatch_size={minibatch_size} is smaller than num_learners={num_shards}: "
            "each learner needs at least one row per minibatch."
        )
    per_learner = None if minibatch_size is None else minibatch_size // num_shards
    parts: list[dict[str, SampleBatch]] = [{} for _ in range(num_shards)]
    for pid, policy_batch in batch.policy_batches.items():
        count = policy_batch.count
        if count < num_shards:
            continue
        block = per_learner if per_learner is not None and per_learner * num_shards <= count else 0
        block = block or count // num_shards
        rows = np.arange(count)
        owner = (rows // block) % num_shards
        per_shard = [rows[owner == k] for k in range(num_shards)]
        length = min(len(idx) for idx in per_shard)
        for k, idx in enumerate(per_shard):
            parts[k][pid] = policy_batch.take(idx[:length])
    env_steps = batch.env_steps()
    base, extra = divmod(env_steps, num_shards)
    shards = [
        MultiAgentBatch(part, base + (extra if k == 0 else 0)) for k, part in enumerate(parts)
    ]
    return shards, per_learner


# -- the learner process --------------------------------------------------------


class LearnerWorker:
    """One data-parallel learner, living in a worker process (or Ray actor).

    Args:
        specs: policy id -> `PolicyBuildSpec` of each policy to train.
        config: the trainer config.
        policy_ids: the policies to train.
        rank: this learner's rank in the group (0..world_size-1).
        world_size: the number of learners.
        device: "cpu", or "cuda" for a learner given a GPU.
        callbacks: the `DefaultCallbacks` to use (default: built from
            `config["callbacks"]`, as a learner process must).
        policies: train these policies in place instead of building copies from
            `specs` (which must then be empty): a rollout worker's `PolicyMap`, whose
            policies the worker also samples with (DD-PPO).
    """

    def __init__(
        self,
        specs: Mapping[str, PolicyBuildSpec],
        config: dict,
        policy_ids: Iterable[str],
        rank: int,
        world_size: int,
        device: str = "cpu",
        callbacks: DefaultCallbacks | None = None,
        *,
        policies: MutableMapping[str, Policy] | None = None,
    ) -> None:
        if policies is not None and specs:
            raise ValueError("LearnerWorker: pass `specs` or `policies`, not both.")
        self.rank = rank
        self.world_size = world_size
        self.device = torch.device(device)
        self.config = config
        # Whether the policies are someone else's (a rollout worker's), trained in place.
        self.in_place = policies is not None
        self.policies: MutableMapping[str, Policy] = {} if policies is None else policies
        for pid, spec in specs.items():
            self._build_policy(pid, spec)
        # Gradient averaging: on once the group has more than one member
        # (`init_group`); the policies and optimisers whose hooks are in place.
        self._averaging = False
        self._hooked_policies: dict[str, tuple[Policy, Callable[[], None]]] = {}
        self._hooked_optimizers: weakref.WeakSet[torch.optim.Optimizer] = weakref.WeakSet()
        if callbacks is None and callable(config.get("callbacks")):
            callbacks = config["callbacks"]()
        self.learner = Learner(
            self.policies, config, callbacks, policy_ids=policy_ids, device=self.device
        )
        # Ray Data iterators sent by the driver (`set_data_iterator`), by key.
        self._data_iterators: dict[int, Any] = {}

    def _build_policy(self, pid: str, spec: PolicyBuildSpec) -> Policy:
        cls, obs_space, action_space, policy_config = spec
        policy = cls(obs_space, action_space, policy_config)
        for module in vars(policy).values():
            if isinstance(module, torch.nn.Module):
                module.to(self.device)
        self.policies[pid] = policy
        return policy

    # -- torch.distributed ----------------------------------------------------

    def rendezvous_address(self, use_node_ip: bool) -> tuple[str, int]:
        """(address, free port) for the group's TCP rendezvous, on this learner's node."""
        return node_address(use_node_ip), free_port()

    def init_group(
        self,
        address: str,
        port: int,
        timeout_s: float,
        backend: str | None = None,
        *,
        rank: int | None = None,
        world_size: int | None = None,
    ) -> int:
        """Joins the process group (every learner must call this at once) and hooks the
        trained policies' parameters to average their gradients; returns this
        process's pid.

        Args:
            address: the rendezvous host (rank 0's node).
            port: the rendezvous port.
            timeout_s: how long the group's operations may wait for each other.
            backend: torch.distributed's backend (default: "nccl" on a GPU, else "gloo").
            rank: a new rank for this learner (default: its own).
            world_size: a new size of the group (default: its own).

        A learner that is in a group already leaves it first: the group is formed anew
        (after a member failed). Hooks are put in place once per policy and stay.
        """
        import torch.distributed as dist

        if rank is not None:
            self.rank = rank
        if world_size is not None:
            self.world_size = world_size
        if dist.is_initialized():
            dist.destroy_process_group()
        if address == "127.0.0.1":
            # Gloo listens on the interface its host name resolves to, which in
            # containers is often not reachable: stay on loopback on one machine.
            os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
        if backend is None:
            backend = "nccl" if self.device.type == "cuda" else "gloo"
        dist.init_process_group(
            backend,
            init_method=f"tcp://{address}:{port}",
            rank=self.rank,
            world_size=self.world_size,
            timeout=timedelta(seconds=timeout_s),
        )
        # A learner alone (the driver's GPU learner) has nothing to average.
        self._averaging = self._averaging or self.world_size > 1
        self._hook_trained()
        return os.getpid()

    def _hook_trained(self, policy_ids: Iterable[str] | None = None) -> None:
        """Puts the averaging hooks on each trained policy (and its optimiser) that does
        not have them yet: all of them, or those of `policy_ids`."""
        if not self._averaging:
            return
        trained = self.learner.policy_ids
        for pid in sorted(trained if policy_ids is None else set(policy_ids) & trained):
            policy = self.policies[pid]
            hooked = self._hooked_policies.get(pid)
            if hooked is None or hooked[0] is not policy:
                self._hooked_policies[pid] = (policy, self._hook(policy))
            flush = self._hooked_policies[pid][1]
            optimizer = self.learner.optimizers.get(pid)
            for opt in optimizers_of(optimizer) if optimizer is not None else []:
                if opt not in self._hooked_optimizers:
                    # Averages what a backward that reached only some parameters queued.
                    opt.register_step_pre_hook(lambda *_, flush=flush: flush())
                    self._hooked_optimizers.add(opt)

    def _hook(self, policy: Policy) -> Callable[[], None]:
        """Gradient averaging on every trainable parameter, and averaged stats for
        `after_update`, so that the learners' policies never drift apart.

        Each parameter's post-accumulate-grad hook queues its gradient; when the last
        one of a backward pass is queued, all of them are averaged in one flattened
        all-reduce (one message per minibatch, not one per parameter). A backward that
        reaches only some parameters is flushed by the optimiser's step pre-hook. The
        queue order is the backward order, the same on every learner, so the flattened
        buffers line up. Averaging is linear: gradients accumulated over several
        backward passes still end up as the average of the learners' sums. The group's
        size is read at each average (a group formed anew may be smaller).

        Returns:
            The function that averages what is queued (for the optimisers' pre-hooks).
        """
        import torch.distributed as dist
        from torch._utils import _flatten_dense_tensors, _unflatten_dense_tensors

        pending: list[torch.nn.Parameter] = []

        def flush() -> None:
            if not pending:
                return
            # Every queued parameter has its gradient: the hook runs after accumulation.
            grads = [p.grad for p in pending if p.grad is not None]
            pending.clear()
            flat = _flatten_dense_tensors(grads)
            dist.all_reduce(flat, op=dist.ReduceOp.SUM)
            flat.div_(float(self.world_size))
            for grad, averaged in zip(grads, _unflatten_dense_tensors(flat, grads)):
                grad.copy_(averaged)

        params: list[torch.nn.Parameter] = []
        seen: set[int] = set()
        for module in vars(policy).values():
            if not isinstance(module, torch.nn.Module):
                continue
            for param in module.parameters():
                if param.requires_grad and id(param) not in seen:
                    seen.add(id(param))
                    params.append(param)

        def queue(param: torch.nn.Parameter) -> None:
            pending.append(param)
            if len(pending) == len(params):
                flush()

        for param in params:
            param.register_post_accumulate_grad_hook(queue)
        original = policy.after_update

        def after_update(stats: dict[str, Any]) -> dict[str, Any]:
            return original(self._mean_across_learners(stats))

        vars(policy)["after_update"] = after_update  # this policy's, for its lifetime
        return flush

    def _mean_across_learners(self, stats: dict[str, Any]) -> dict[str, Any]:
        import torch.distributed as dist

        names = sorted(k for k, v in stats.items() if _is_scalar(v))
        if not names:
            return stats
        values = torch.tensor([float(stats[k]) for k in names], dtype=torch.float64)
        values = values.to(self.device)
        dist.all_reduce(values, op=dist.ReduceOp.SUM)
        means = (values / self.world_size).tolist()
        return {**stats, **dict(zip(names, means))}

    # -- updates ----------------------------------------------------------------

    def update(
        self, states: Mapping[str, Any], shard: MultiAgentBatch, **kwargs: Any
    ) -> tuple[dict | None, dict[str, Any] | None]:
        """Loads the driver's policy states, updates on this learner's shard.

        Returns:
            (the learner's reduced metrics, learner 0's new policy training states;
            None from the other learners).
        """
        self.load_states(states)
        return self._update_loaded(states, shard, **kwargs)

    def load_states(self, states: Mapping[str, Any]) -> None:
        """Loads policy training states (`policy_train_state` output, by policy id) into
        this learner's policies, with their schedules."""
        for pid, state in states.items():
            load_policy_train_state(self.policies[pid], state, schedules=True)

    def update_own_batch(self, batch: MultiAgentBatch | None, **kwargs: Any) -> dict | None:
        """`Learner.update` (same keyword arguments) on this learner's own batch, with
        nothing loaded before and nothing sent back (DD-PPO: what its rollout worker
        sampled, its policies trained in place).

        Every learner of the group must run as many minibatches as the others (each
        one is a collective gradient average), so each policy's rows are first cut to
        the fewest any learner holds (one all-reduce; nothing is cut where all hold as
        many, as with `batch_mode="truncate_episodes"` and one agent per env); a policy
        some learner has no rows of is left out of this update everywhere.

        Args:
            batch: the rows to train on; None when this learner has none this round
                (its rollout worker failed to sample): it still joins that all-reduce,
                so that the others learn of it instead of waiting for it, and the whole
                group skips the round.
            **kwargs: `Learner.update`'s keyword arguments.

        Returns:
            The learner's reduced metrics (None with `_no_metrics_reduce`, and when the
            group skipped the round).
        """
        equalized = self._equalized(batch)
        if equalized is None:
            return None
        # A policy its `PolicyMap` spilled and reloaded is a new object: hook it again.
        self._hook_trained(equalized.policy_batches)
        return self.learner.update(batch=equalized, **kwargs)

    def _equalized(self, batch: MultiAgentBatch | None) -> MultiAgentBatch | None:
        """`batch` with each trained policy's rows cut to the group's fewest; None when
        some learner of the group has no batch."""
        if not self._averaging:
            return batch
        fewest = self._fewest_rows(batch)
        if fewest is None or batch is None:
            return None
        own = batch.policy_batches
        kept = {}
        for pid, n in fewest.items():
            if n > 0:
                kept[pid] = own[pid] if own[pid].count == n else own[pid].slice(0, n)
        return MultiAgentBatch(kept, batch.env_steps())

    def _fewest_rows(self, batch: MultiAgentBatch | None) -> dict[str, int] | None:
        """Per trained policy, the fewest rows any learner of the group holds (one
        all-reduce; every learner must call it); None if some learner has no batch."""
        import torch.distributed as dist

        pids = sorted(self.learner.policy_ids)
        own = {} if batch is None else batch.policy_batches
        # First entry: whether this learner has a batch at all.
        counts = torch.tensor(
            [int(batch is not None), *(own[pid].count if pid in own else 0 for pid in pids)],
            dtype=torch.int64,
        )
        if self.device.type == "cuda":
            counts = counts.to(self.device)
        dist.all_reduce(counts, op=dist.ReduceOp.MIN)
        values = [int(v) for v in counts.tolist()]
        if values[0] == 0:
            return None
        return dict(zip(pids, values[1:]))

    def _update_loaded(
        self, states: Mapping[str, Any], shard: MultiAgentBatch, **kwargs: Any
    ) -> tuple[dict | None, dict[str, Any] | None]:
        metrics = self.learner.update(batch=shard, **kwargs)
        new_states = None
        if self.rank == 0:
            new_states = {pid: policy_train_state(self.policies[pid]) for pid in states}
        return metrics, new_states

    def set_data_iterator(self, key: int, iterator: Any) -> None:
        """Keeps a Ray Data iterator (e.g. this learner's part of a `streaming_split`)
        for `update_from_iterator`."""
        self._data_iterators[key] = iterator

    def update_from_iterator(
        self,
        states: Mapping[str, Any],
        key: int,
        num_iters: int,
        prepare_rows: Callable[..., SampleBatch] | None = None,
        **kwargs: Any,
    ) -> tuple[dict | None, dict[str, Any] | None]:
        """`update` on `num_iters` batches of `minibatch_size` rows of the iterator kept
        under `key` (read here, continuing its pass), as the default policy's rows;
        `prepare_rows(policy, columns)` (see `LearnerGroup.update`) runs on each batch
        with this learner's policy, once the driver's states are loaded into it."""
        from corral.core.learner.training_data import rows_of_iterator, with_reading_policy

        self.load_states(states)
        prepare = with_reading_policy(prepare_rows, self.policies)
        rows = rows_of_iterator(
            self._data_iterators[key], num_iters, kwargs.get("minibatch_size"), prepare
        )
        shard = MultiAgentBatch({DEFAULT_POLICY_ID: rows}, rows.count)
        return self._update_loaded(states, shard, **kwargs)

    def get_learner_state(self) -> bytes:
        """The learner's state (optimisers, generator) as `to_bytes`."""
        return to_bytes(self.learner.get_state())

    def set_learner_state(self, data: bytes) -> None:
        """Loads what `get_learner_state` returned (of this or another learner)."""
        self.learner.set_state(from_bytes(data))

    def policy_weights(self, pid: str) -> dict[str, Any]:
        """The policy's training state (`policy_train_state`): for checks that the
        learners agree, and for a group formed anew to hand to its new members."""
        return policy_train_state(self.policies[pid])

    def add_policy(self, pid: str, spec: PolicyBuildSpec, state: Mapping[str, Any]) -> None:
        """Builds a copy of a new policy from its spec and state, and trains it.

        In place (`policies=`), the policy is the one its owner added under `pid`
        (`RolloutWorker.add_policy`); it is given `state`, so that every learner of the
        group starts it from the same weights.
        """
        policy = self.policies[pid] if self.in_place else self._build_policy(pid, spec)
        load_policy_train_state(policy, state, schedules=True)
        self.learner.add_policy(pid, policy)
        self._hook_trained()

    def remove_policy(self, pid: str) -> None:
        """Stops training the policy and drops this learner's copy."""
        self.learner.remove_policy(pid)
        self._hooked_policies.pop(pid, None)  # (its hooks held the policy alive)
        if not self.in_place:  # (in place, the policy map's owner removes it)
            self.policies.pop(pid, None)

    def set_policies_to_train(self, policy_ids: Iterable[str]) -> None:
        """Trains exactly `policy_ids` from now on."""
        self.learner.set_policies_to_train(policy_ids)
        self._hook_trained()

    def ping(self) -> str:
        """Answers a health probe."""
        return "pong"

    def stop(self) -> None:
        """Leaves the process group (before the process ends)."""
        import torch.distributed as dist

        if dist.is_initialized():
            dist.destroy_process_group()


class AttachedLearner:
    """The `LearnerWorker` of a remote rollout worker (DD-PPO: made by its
    `setup_torch_data_parallel`), behind the `WorkerHandle` interface: `call` and `apply`
    run on that learner, through the rollout worker's handle.

    The process is the rollout worker's, which its `WorkerSet` starts, recovers and
    stops: `stop` and `kill` leave it be.

    Args:
        worker: the rollout worker's handle.
    """

    def __init__(self, worker: WorkerHandle) -> None:
        self.worker = worker

    @property
    def worker_index(self) -> int:
        """The rollout worker's index."""
        return self.worker.worker_index

    @property
    def call_timeout_s(self) -> float:
        """The rollout worker's call timeout."""
        return self.worker.call_timeout_s

    @property
    def pid(self) -> int | None:
        """The rollout worker's pid."""
        return self.worker.pid

    def wait_ready(self, timeout: float | None = None) -> None:
        """Nothing to wait for: the rollout worker was built already."""

    def call(self, method: str, *args: Any, **kwargs: Any) -> WorkerFuture:
        """Runs `learner.<method>(*args, **kwargs)` in the rollout worker."""
        return self.worker.apply(_call_attached_learner, method, *args, **kwargs)

    def apply(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> WorkerFuture:
        """Runs `func(learner, *args, **kwargs)` in the rollout worker."""
        return self.worker.apply(_apply_to_attached_learner, func, *args, **kwargs)

    def is_alive(self) -> bool:
        """Whether the rollout worker is (not known to be dead)."""
        return self.worker.is_alive()

    def stop(self, timeout: float = 2.0) -> None:
        """Nothing: the rollout worker's set stops it (and it leaves the group then)."""

    def kill(self) -> None:
        """Nothing: the rollout worker's set ends it."""

    def __repr__(self) -> str:
        return f"AttachedLearner({self.worker!r})"


def attached_learner(worker: Any) -> LearnerWorker:
    """(In a rollout worker's process.) The worker's data-parallel learner.

    Raises:
        RuntimeError: it has none (`setup_torch_data_parallel` was not called).
    """
    learner = getattr(worker, "data_parallel_learner", None)
    if learner is None:
        raise RuntimeError(
            f"{worker!r} has no data-parallel learner: call its "
            "`setup_torch_data_parallel` first (DD-PPO does, when it starts)."
        )
    return learner


def _call_attached_learner(worker: Any, method: str, *args: Any, **kwargs: Any) -> Any:
    return getattr(attached_learner(worker), method)(*args, **kwargs)


def _apply_to_attached_learner(
    worker: Any, func: Callable[..., Any], *args: Any, **kwargs: Any
) -> Any:
    return func(attached_learner(worker), *args, **kwargs)


class InProcessLearner:
    """A `LearnerWorker` in the driver behind the `WorkerHandle` interface (calls return
    finished futures), so that the group drives it as it drives remote ones: the
    driver's learner on a GPU (`num_gpus`), or on the CPU with `_fake_gpus`.

    A call that raises, raises in the caller (there is no process to fail).
    """

    worker_index = 1
    call_timeout_s = DEFAULT_CALL_TIMEOUT_S

    def __init__(self, worker: LearnerWorker) -> None:
        self.worker = worker

    @property
    def pid(self) -> int | None:
        """The driver's pid (the learner lives there)."""
        return os.getpid()

    def wait_ready(self, timeout: float | None = None) -> None:
        """Nothing to wait for: the learner was built in the driver."""

    def call(self, method: str, *args: Any, **kwargs: Any) -> Future:
        """Runs `worker.<method>(*args, **kwargs)` now; the future is already done."""
        return _finished(method, getattr(self.worker, method)(*args, **kwargs))

    def apply(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Future:
        """Runs `func(worker, *args, **kwargs)` now; the future is already done."""
        return _finished("apply", func(self.worker, *args, **kwargs))

    def is_alive(self) -> bool:
        """Always True: it lives as long as the driver."""
        return True

    def stop(self, timeout: float = 2.0) -> None:
        """Leaves the process group."""
        self.worker.stop()

    def kill(self) -> None:
        """Nothing to kill: the learner is part of the driver."""
        pass


def _finished(what: str, value: Any) -> Future:
    future = Future(None, what)
    future._set(value)
    return future


def _is_scalar(value: Any) -> bool:
    if torch.is_tensor(value):
        return value.numel() == 1
    return isinstance(value, int | float | np.number) and not isinstance(value, bool)
