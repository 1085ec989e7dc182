"""`Learner`: the one place where gradient updates happen.

`Learner.update` takes a train batch and runs `num_epochs` passes over it in
minibatches of `minibatch_size` (shuffled per epoch when asked), calling the
policy's `loss` on each minibatch. The train batch is turned into torch
tensors once; minibatches are index selections on those tensors.

Algorithms with several optimisers (SAC: actor, critic, temperature) return a
dict of them from `make_optimizer` and define `learn_step(minibatch,
optimizers) -> stats`; the learner then calls `learn_step` once per minibatch
instead of loss -> backward -> step, so the algorithm orders its own updates
(and e.g. skips the actor on some steps, as TD3 does). Epochs, minibatches,
metrics and optimiser checkpoints stay here either way.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, MutableMapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, cast

import numpy as np
import torch

from corral.core.learner.compile import LossCompiler
from corral.core.learner.finite import (
    NonFiniteUpdateError,
    Optimizers,
    all_finite,
    check_finite_update,
    clip_grad_norm_checked,
    finite_probes,
    optimizers_of,
    scalar_values,
    steps_keep_weights_finite,
    sum_is_finite,
)
from corral.core.learner.policy_protocol import (
    LossPolicy,
    RecurrentPolicy,
    TensorDict,
    TrainablePolicy,
)
from corral.core.learner.training_data import (
    SEQ_MASK,
    TrainingData,
    pad_sequences,
    to_tensors,
    training_data_of,
)
from corral.policy.policy import Policy, declared_for
from corral.policy.policy_map import PolicyMap
from corral.policy.rnn_sequencing import divisible_train_batch
from corral.policy.sample_batch import MultiAgentBatch, SampleBatch, map_column
from corral.utils.metrics import MetricsLogger, Stats
from corral.utils.metrics.learner_info import LEARNER_STATS_KEY
from corral.utils.torch_utils import clear_grads, step_optimizer

if TYPE_CHECKING:
    from corral.agents.callbacks import DefaultCallbacks


# Key under which per-update counters that concern all policies are logged.
ALL_MODULES = "__all_modules__"
NUM_ENV_STEPS_SAMPLED_LIFETIME = "num_env_steps_sampled_lifetime"
# Per policy: minibatch updates skipped for a NaN/inf loss or gradient
# (`skip_nonfinite_updates`), and updates undone because a step overflowed the weights.
NUM_NONFINITE_UPDATES_SKIPPED = "num_nonfinite_updates_skipped"

__all__ = [
    "ALL_MODULES",
    "SEQ_MASK",
    "Learner",
    "NonFiniteUpdateError",
    "TrainingData",
    "check_finite_update",
    "loss_and_stats",
]


class Learner:
    """Owns the optimisers of the policies it trains and updates them.

    Args:
        policies: policy id -> policy (a `LossPolicy`, e.g. a `TorchPolicy`, or a
            `LearnStepPolicy` whose `make_optimizer` returns a dict of optimisers;
            see `corral.core.learner.policy_protocol`); the learner updates these
            objects in place.
        config: the trainer config (`grad_clip`, `seed`).
        callbacks: optional `DefaultCallbacks`; `on_learn_on_batch` is called
            once per policy and update, before the first gradient step.
        device: where the policies' models are (default: the CPU); each
            update's train batch is copied there once (pinned, non-blocking).
    """

    def __init__(
        self,
        policies: Mapping[str, TrainablePolicy],
        config: dict,
        callbacks: DefaultCallbacks | None = None,
        *,
        policy_ids: Iterable[str] | None = None,
        device: str | torch.device | None = None,
    ) -> None:
        self.device = torch.device("cpu" if device is None else device)
        # A worker's `PolicyMap` is used as it is (a live view: policies it
        # spills and reloads are looked up again); any other mapping is copied.
        self.policies = _live_or_copy(policies)
        self.policy_ids = set(self.policies if policy_ids is None else policy_ids)
        self.config = config
        self.callbacks = callbacks
        self.optimizers: dict[str, Optimizers] = {}
        if isinstance(policies, PolicyMap):
            policies.add_spill_listener(self)
        for pid in sorted(self.policy_ids):
            policy = self.policies[pid]  # may reload a spilled policy (and spill another)
            self.optimizers[pid] = policy.make_optimizer()
        self.metrics = MetricsLogger()
        # Per policy: buffers holding the weights from before the current update.
        self._snapshots: dict[str, list[torch.Tensor]] = {}
        # Per policy class: whether its `train_columns` are declared for its `loss`.
        self._declares_columns: dict[type, bool] = {}
        # `torch_compile_learner`: the policies' loss methods through torch.compile.
        self._compiler = (
            LossCompiler(
                config.get("torch_compile_learner_dynamo_backend") or "inductor",
                config.get("torch_compile_learner_dynamo_mode"),
            )
            if config.get("torch_compile_learner")
            else None
        )
        # The minibatch shuffles' own stream: from `seed`, else drawn from torch's global
        # generator, so that `torch.manual_seed` makes them reproducible (never reseed the
        # global generator, as `torch.seed()` would).
        self._generator = torch.Generator()
        seed = config.get("seed")
        if seed is None:
            seed = int(torch.randint(2**62, (), dtype=torch.int64))
        self._generator.manual_seed(int(seed))

    def add_policy(self, policy_id: str, policy: TrainablePolicy) -> None:
        """Starts training `policy` (already in the map when `policies` is a PolicyMap)."""
        if self.policies.get(policy_id) is not policy:
            self.policies[policy_id] = policy
        self.policy_ids.add(policy_id)
        self.optimizers[policy_id] = policy.make_optimizer()

    def remove_policy(self, policy_id: str) -> None:
        """Stops training the policy and drops its optimiser."""
        self.policy_ids.discard(policy_id)
        self.optimizers.pop(policy_id, None)
        if self._compiler is not None and policy_id in self.policies:
            self._compiler.forget(self.policies[policy_id])
        if not isinstance(self.policies, PolicyMap):
            self.policies.pop(policy_id, None)

    def set_policies_to_train(self, policy_ids: Iterable[str]) -> None:
        """Trains exactly `policy_ids` from now on; optimisers of the others are kept."""
        self.policy_ids = set(policy_ids)
        for pid in self.policy_ids - set(self.optimizers):
            self.optimizers[pid] = self.policies[pid].make_optimizer()

    def _optimizer_reloading(self, policy_id: str) -> Optimizers | None:
        """The policy's optimiser, reloading the policy first if it was spilled."""
        spilled = policy_id not in self.optimizers and policy_id in self.policy_ids
        if spilled and policy_id in self.policies:
            self.policies[policy_id]  # a spilled policy comes back with its optimiser
        return self.optimizers.get(policy_id)

    # PolicyMap spill listener: a spilled policy's optimiser goes to disk with it
    # (and releases the old model's parameters); a reloaded policy gets a new
    # optimiser over its new parameters, with the saved moments and step counts.
    def on_policy_spilled(self, policy_id: str) -> dict[str, Any] | None:
        """`PolicyMap` hook: the policy's optimiser state, to go to disk with it."""
        optimizer = self.optimizers.pop(policy_id, None)
        return None if optimizer is None else _optimizer_state(optimizer)

    def on_policy_restored(self, policy_id: str, state: dict[str, Any] | None) -> None:
        """`PolicyMap` hook: a new optimiser for the reloaded policy, with its saved state."""
        if policy_id not in self.policy_ids:
            return
        optimizer = self.policies[policy_id].make_optimizer()
        if state is not None:
            _load_optimizer_state(optimizer, state)
        self.optimizers[policy_id] = optimizer

    def update(
        self,
        batch: SampleBatch | MultiAgentBatch | None = None,
        batches: list[SampleBatch | MultiAgentBatch] | None = None,
        batch_refs: list | None = None,
        episodes: list | None = None,
        episodes_refs: list | None = None,
        data_iterators: list | None = None,
        training_data: TrainingData | None = None,
        *,
        timesteps: dict[str, Any] | None = None,
        num_total_minibatches: int = 0,
        num_epochs: int = 1,
        minibatch_size: int | None = None,
        shuffle_batch_per_epoch: bool = False,
        _no_metrics_reduce: bool = False,
        **kwargs: Any,
    ) -> dict | None:
        """Runs `num_epochs` epochs over the training data.

        Each epoch splits the batch into `len(batch) // minibatch_size`
        minibatches (the whole batch when `minibatch_size` is None or larger
        than the batch), shuffled per epoch when `shuffle_batch_per_epoch`.
        `num_total_minibatches > 0` instead runs exactly that many minibatches,
        cycling through epochs. `data_iterators` (Ray Data) give `num_iters` batches of
        `minibatch_size` rows each (see `training_data_of`), so one epoch runs one
        minibatch per batch. Returns `metrics.reduce()`: a nested dict
        (policy id -> stat name) of `Stats`, which can be reduced again across
        learners; None when `_no_metrics_reduce`.
        """
        if num_epochs < 1:
            raise ValueError(f"num_epochs must be >= 1, got {num_epochs}.")
        if minibatch_size is not None and minibatch_size < 1:
            raise ValueError(f"minibatch_size must be None or >= 1, got {minibatch_size}.")
        data = training_data_of(
            batch,
            batches,
            batch_refs,
            episodes,
            episodes_refs,
            data_iterators,
            training_data,
            num_iters=kwargs.get("num_iters"),
            minibatch_size=minibatch_size,
        )
        for pid, policy_batch in data.policy_batches.items():
            if pid in self.policy_ids and pid in self.policies and policy_batch.count > 0:
                self._update_policy(
                    pid,
                    policy_batch,
                    num_epochs,
                    minibatch_size,
                    shuffle_batch_per_epoch,
                    num_total_minibatches,
                )
        if timesteps:
            self.metrics.log_value(
                (ALL_MODULES, NUM_ENV_STEPS_SAMPLED_LIFETIME),
                timesteps.get(NUM_ENV_STEPS_SAMPLED_LIFETIME, 0),
                reduce="max",
                window=1,
            )
        self.metrics.log_value(
            (ALL_MODULES, "num_env_steps_trained"),
            data.env_steps(),
            reduce="sum",
            clear_on_reduce=True,
        )
        return None if _no_metrics_reduce else self.metrics.reduce()

    def _update_policy(
        self,
        pid: str,
        batch: SampleBatch,
        num_epochs: int,
        minibatch_size: int | None,
        shuffle: bool,
        num_total_minibatches: int,
    ) -> None:
        policy = self.policies[pid]
        optimizer = self.optimizers[pid]
        extra: dict[str, Any] = {}
        if self.callbacks is not None:
            # (A trainer's policies, which the callbacks are written for, are `Policy`s.)
            self.callbacks.on_learn_on_batch(
                policy=cast("Policy", policy), train_batch=batch, result=extra
            )
        params = params_of(optimizer)
        step, bounded = self._minibatch_step(policy, optimizer, params)
        skip_nonfinite = bool(self.config.get("skip_nonfinite_updates"))
        skipped = 0
        # Each minibatch's stats, logged after the loop: their tensors become numbers
        # in one host copy together with the weight check below (not one per stat).
        minibatch_stats: list[dict[str, Any]] = []
        # The weights as they were, put back if a step (finite loss and gradients, but
        # e.g. an enormous lr) overflows them: weights are never left non-finite. Not
        # needed where the steps provably cannot overflow them (Adam on clipped gradients).
        snapshot = None if bounded else self._snapshot(pid, params)
        with self._compiling(policy):
            for mb in self._minibatches(
                policy, batch, num_epochs, minibatch_size, shuffle, num_total_minibatches
            ):
                try:
                    minibatch_stats.append(step(mb))
                except NonFiniteUpdateError as err:
                    if not skip_nonfinite:
                        self._log_stats(pid, minibatch_stats, None)
                        if snapshot is not None:
                            self._restore_if_nonfinite(params, snapshot)
                        raise NonFiniteUpdateError(err.detail, pid) from None
                    skipped += 1
        logged, weights_finite = self._log_stats(
            pid, minibatch_stats, None if snapshot is None else params
        )
        if not weights_finite and snapshot is not None:
            with torch.no_grad():
                torch._foreach_copy_([p.data for p in params], snapshot)
            if not skip_nonfinite:
                raise NonFiniteUpdateError(
                    "an optimiser step made the weights NaN or inf (from a finite loss and "
                    "gradients: is the learning rate far too large?); the weights were put "
                    "back as they were before this update.",
                    pid,
                )
            skipped += 1
        if skip_nonfinite or skipped:
            self.metrics.log_value(
                (pid, NUM_NONFINITE_UPDATES_SKIPPED), skipped, reduce="sum", clear_on_reduce=True
            )
        policy.bump_weights_seq()
        after_update = policy.after_update
        if getattr(after_update, "__func__", None) is not Policy.after_update:
            # (Policy's own `after_update` does nothing: its mean stats are not worked out.)
            # This update's means, whatever the logger still holds from earlier updates
            # (a trainer reduces its learners' metrics once per iteration).
            for name, value in after_update(_means(logged)).items():
                self.metrics.log_value((pid, name), value, window=1)
        # What `on_learn_on_batch` put into its `result` dict: RLlib reports it as the
        # policy's custom metrics (`info/learner/<pid>/custom_metrics`).
        for name, value in extra.items():
            self.metrics.log_value((pid, "custom_metrics", name), value, window=1)
        self.metrics.log_value(
            (pid, "num_module_steps_trained"), batch.count, reduce="sum", clear_on_reduce=True
        )

    # -- RLlib 1.13's Policy.compute_gradients / apply_gradients -----------------

    def compute_gradients(
        self, policy_id: str, batch: SampleBatch
    ) -> tuple[list[np.ndarray | None], dict[str, Any]]:
        """The gradients of the policy's loss on the whole `batch`, without a step.

        The same loss -> backward -> finite check -> `grad_clip` as one minibatch of
        `update`, so `apply_gradients(compute_gradients(b))` on the same learner
        moves the weights exactly as `update(batch=b)` with one minibatch does
        (clipping happens here, as in RLlib: the gradients a worker sends are
        already clipped). Unlike `update` it runs no `on_learn_on_batch` callback,
        no `after_update` hook and logs no metrics.

        Args:
            policy_id: a policy this learner trains (with `loss`, not `learn_step`).
            batch: the policy's postprocessed train batch.

        Returns:
            (gradients, info): one numpy array per parameter the optimiser updates,
            in its order (None for a parameter the loss does not reach), and
            `{"learner_stats": {name: float}}`.

        Raises:
            NonFiniteUpdateError: the loss or a gradient is NaN/inf (whatever
                `skip_nonfinite_updates` says: there is no update here to skip).
        """
        policy, optimizer = self._loss_policy(policy_id, "compute_gradients")
        params = params_of(optimizer)
        mb = next(self._minibatches(policy, batch, 1, None, False, 0))
        try:
            stats = _backward(policy, mb, params, optimizer)
        except NonFiniteUpdateError as err:
            clear_grads(params)
            raise NonFiniteUpdateError(err.detail, policy_id) from None
        grads = [None if p.grad is None else p.grad.detach().cpu().numpy() for p in params]
        clear_grads(params)  # the arrays own the gradients now
        learner_stats = {
            name: float(value.detach().float().mean()) if torch.is_tensor(value) else value
            for name, value in stats.items()
        }
        return grads, {LEARNER_STATS_KEY: learner_stats}

    def apply_gradients(
        self, policy_id: str, gradients: Sequence[np.ndarray | torch.Tensor | None]
    ) -> None:
        """One optimiser step of the policy with the given gradients.

        Args:
            policy_id: a policy this learner trains (with `loss`, not `learn_step`).
            gradients: as `compute_gradients` returns them (numpy arrays or tensors,
                one per parameter in the optimiser's order; None: no gradient).
                They are applied as given: `grad_clip` was applied when they were
                computed. The learning rate follows the policy's `cur_lr`.

        Raises:
            ValueError: `gradients` has another length, or an entry another shape,
                than the parameters.
            NonFiniteUpdateError: a gradient is NaN/inf (the weights stay as they are).
        """
        policy, optimizer = self._loss_policy(policy_id, "apply_gradients")
        params = params_of(optimizer)
        load_gradients(params, gradients, f"apply_gradients for policy {policy_id!r}")
        try:
            check_finite_update(None, optimizer)
            _follow_lr_schedule(policy, optimizer)
            step_optimizer(optimizer)
        except NonFiniteUpdateError as err:
            raise NonFiniteUpdateError(err.detail, policy_id) from None
        finally:
            clear_grads(params)
        policy.bump_weights_seq()

    def _loss_policy(self, policy_id: str, what: str) -> tuple[LossPolicy, torch.optim.Optimizer]:
        """The policy and its (single) optimiser, for the gradient-level API."""
        if policy_id not in self.policy_ids:
            raise KeyError(
                f"{what}: this learner does not train policy {policy_id!r} "
                f"(it trains {sorted(self.policy_ids)})."
            )
        policy = self.policies[policy_id]
        optimizer = self._optimizer_reloading(policy_id)
        if getattr(policy, "learn_step", None) is not None or optimizer is None:
            raise NotImplementedError(
                f"{what}: {type(policy).__name__} updates itself in `learn_step` (with its "
                "own optimisers), so it has no single gradient to compute or apply; "
                "train it with `update` / `learn_on_batch`."
            )
        return _as_loss_policy(policy, optimizer)

    @staticmethod
    def _minibatch_step(
        policy: TrainablePolicy, optimizer: Optimizers, params: list[torch.Tensor]
    ) -> tuple[Callable[[TensorDict], dict[str, Any]], bool]:
        """One minibatch's update: the policy's `learn_step`, or loss -> backward ->
        checks -> clip -> step of its one optimiser (at the scheduled `cur_lr`); and
        whether those steps provably keep finite weights finite (only the learner's own
        steps can be known to: `grad_clip` and `steps_keep_weights_finite`, as DQN's Adam
        with its default `grad_clip` of 40)."""
        learn_step = getattr(policy, "learn_step", None)
        if learn_step is not None:
            return (lambda minibatch: learn_step(minibatch, optimizer)), False
        loss_policy, single = _as_loss_policy(policy, optimizer)
        _follow_lr_schedule(policy, single)

        def loss_step(minibatch: TensorDict) -> dict[str, Any]:
            stats = _backward(loss_policy, minibatch, params, single)
            step_optimizer(single)
            return stats

        grad_clip = loss_policy.config.get("grad_clip")
        bounded = isinstance(grad_clip, (int, float)) and steps_keep_weights_finite(
            single, float(grad_clip)
        )
        return loss_step, bounded

    def _snapshot(self, pid: str, params: list[torch.Tensor]) -> list[torch.Tensor]:
        """A copy of `params` in buffers kept per policy (reallocated when the
        parameters change, e.g. after a policy reload)."""
        buffers = self._snapshots.get(pid)
        if buffers is None or len(buffers) != len(params):
            buffers = None
        else:
            for b, p in zip(buffers, params):
                if b.shape != p.shape or b.dtype != p.dtype or b.device != p.device:
                    buffers = None
                    break
        if buffers is None:
            buffers = self._snapshots[pid] = [torch.empty_like(p) for p in params]
        with torch.no_grad():
            torch._foreach_copy_(buffers, params)
        return buffers

    def _compiling(self, policy: TrainablePolicy) -> AbstractContextManager[None]:
        """Within the block, the policy's loss methods are compiled ones
        (`torch_compile_learner`); a no-op without it."""
        return nullcontext() if self._compiler is None else self._compiler.compiled(policy)

    def _log_stats(
        self, pid: str, minibatch_stats: list[dict[str, Any]], params: list[torch.Tensor] | None
    ) -> tuple[list[tuple[str, Any]], bool]:
        """Logs each minibatch's stats (reduced to their mean over the minibatches
        logged until the next reduce); returns the (name, value) pairs logged and, with
        `params`, whether every weight is finite (read in the same host copy as the
        stats' tensors), else True."""
        names = [name for stats in minibatch_stats for name in stats]
        values = [value for stats in minibatch_stats for value in stats.values()]
        probes = [] if params is None else finite_probes(params)
        values = scalar_values(values + probes)
        logged = list(zip(names, values))
        log_value = self.metrics.log_value
        for name, value in logged:
            log_value((pid, name), value, window=math.inf, clear_on_reduce=True)
        if params is None:
            return logged, True
        return logged, all(math.isfinite(v) for v in values[len(names) :]) or all_finite(params)

    @staticmethod
    def _restore_if_nonfinite(params: list[torch.Tensor], snapshot: list[torch.Tensor]) -> bool:
        """Copies the snapshot back if any weight is NaN/inf; True if it did."""
        if sum_is_finite(params):
            return False
        with torch.no_grad():
            torch._foreach_copy_([p.data for p in params], snapshot)
        return True

    def _minibatches(
        self,
        policy: TrainablePolicy,
        batch: SampleBatch,
        num_epochs: int,
        minibatch_size: int | None,
        shuffle: bool,
        num_total_minibatches: int,
    ) -> Iterator[dict[str, torch.Tensor]]:
        """Minibatch tensors; for recurrent policies whole padded sequences.

        A recurrent policy's batch is cut into sequences of at most
        `max_seq_len` steps along its trajectories; minibatches then hold
        `minibatch_size // max_seq_len` whole sequences (never a split one),
        with `seq_lens`, each sequence's `state_in_<i>` and a `seq_mask`.
        """
        # A loss overridden below the class that listed its columns reads any column.
        declared = self._declares_columns.get(type(policy))
        if declared is None:
            declared = self._declares_columns[type(policy)] = declared_for(
                policy, "train_columns", "loss"
            )
        columns = getattr(policy, "train_columns", None) if declared else None
        is_recurrent = getattr(policy, "is_recurrent", None)
        # A policy whose train batches hold one whole sequence per row (Dreamer's chunks,
        # `[B, T, ...]`) trains on those rows as they are, though it is stateful in acting.
        sequence_rows = getattr(policy, "trains_on_sequence_rows", False)
        if sequence_rows or not (is_recurrent and is_recurrent()):
            if getattr(policy, "batch_divisibility_req", 1) > 1:
                # RLlib 1.13's `get_batch_divisibility_req`: rows padded to whole chunks.
                batch = divisible_train_batch(policy, batch)
            tensors = self._to_device(to_tensors(batch, columns))
            if batch.zero_padded and (minibatch_size or batch.count) < batch.count:
                tensors.pop(SampleBatch.SEQ_LENS, None)  # (one per chunk, not per row)
            for idx in self._minibatch_indices(
                batch.count, num_epochs, minibatch_size, shuffle, num_total_minibatches
            ):
                yield tensors if idx is None else _rows_of(tensors, idx)
            return
        max_len = int(policy.config["model"]["max_seq_len"])
        num_states = len(cast(RecurrentPolicy, policy).get_initial_state())
        if columns is not None:
            columns = [*columns, SampleBatch.PREV_ACTIONS, SampleBatch.PREV_REWARDS]
        rows, per_seq = (
            self._to_device(t) for t in pad_sequences(batch, columns, num_states, max_len)
        )
        num_seqs = len(per_seq[SampleBatch.SEQ_LENS])
        seqs_per_mb = None if minibatch_size is None else max(1, minibatch_size // max_len)
        offsets = torch.arange(max_len)
        for idx in self._minibatch_indices(
            num_seqs, num_epochs, seqs_per_mb, shuffle, num_total_minibatches
        ):
            if idx is None:
                yield {**rows, **per_seq}
                continue
            row_idx = (idx[:, None] * max_len + offsets).reshape(-1)
            yield {**_rows_of(rows, row_idx), **_rows_of(per_seq, idx)}

    def _to_device(self, tensors: dict[str, Any]) -> dict[str, Any]:
        """The update's tensors on the learner's device: one copy per update, from
        pinned memory without blocking (minibatches then index on the device)."""
        if self.device.type == "cpu":
            return tensors
        device = self.device
        return {
            k: map_column(lambda t: t.pin_memory().to(device, non_blocking=True), v)
            for k, v in tensors.items()
        }

    def _minibatch_indices(
        self,
        n: int,
        num_epochs: int,
        minibatch_size: int | None,
        shuffle: bool,
        num_total_minibatches: int,
    ) -> Iterator[torch.Tensor | None]:
        if minibatch_size is None or minibatch_size >= n:
            total = num_total_minibatches or num_epochs
            for _ in range(total):
                yield None
            return
        per_epoch = n // minibatch_size
        total = num_total_minibatches or num_epochs * per_epoch
        done = 0
        while done < total:
            order = torch.randperm(n, generator=self._generator) if shuffle else torch.arange(n)
            for i in range(per_epoch):
                if done == total:
                    return
                yield order[i * minibatch_size : (i + 1) * minibatch_size]
                done += 1

    # -- state --------------------------------------------------------------

    def get_state(self) -> dict[str, Any]:
        """Optimiser states (tensors and numbers: loadable with weights_only).

        Policies spilled by a `PolicyMap` are reloaded one by one, since their
        optimiser state went to disk with them.
        """
        states = {}
        for pid in sorted(self.policy_ids | set(self.optimizers)):
            optimizer = self._optimizer_reloading(pid)
            if optimizer is not None:
                states[pid] = _optimizer_state(optimizer)
        return {"optimizers": states, "generator": self._generator.get_state()}

    def set_state(self, state: dict[str, Any]) -> None:
        """Loads what `get_state` returned (optimisers of policies it trains, generator)."""
        for pid, opt_state in state.get("optimizers", {}).items():
            optimizer = self._optimizer_reloading(pid)
            if optimizer is not None:
                _load_optimizer_state(optimizer, opt_state)
        if "generator" in state:
            self._generator.set_state(state["generator"])


def _rows_of(tensors: dict[str, Any], idx: torch.Tensor) -> dict[str, Any]:
    """The rows `idx` of each tensor (of each leaf of a nested column).

    (`index_select`: the same rows as `v[idx]`, at about half its cost.)
    """
    return {
        k: v.index_select(0, idx)
        if isinstance(v, torch.Tensor)
        else map_column(lambda t: t.index_select(0, idx), v)
        for k, v in tensors.items()
    }


def _means(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """The mean value of each name among (name, value) pairs, as the learner's metrics
    reduce what `_log_stats` logged (numpy scalars and one-element arrays as numbers)."""
    groups: dict[str, Stats] = {}
    for name, value in pairs:
        stats = groups.get(name)
        if stats is None:
            stats = groups[name] = Stats(reduce="mean", window=math.inf)
        stats.push(value)
    return {name: stats.peek() for name, stats in groups.items()}


def params_of(optimizer: Optimizers | Sequence[torch.optim.Optimizer]) -> list[torch.Tensor]:
    """Every parameter the optimiser (or each of a dict or list of them) updates, in
    order: the order of `compute_gradients`' gradients."""
    if isinstance(optimizer, list | tuple):
        optimizers = list(optimizer)
    else:
        optimizers = optimizers_of(optimizer)  # type: ignore[arg-type]
    return [p for opt in optimizers for group in opt.param_groups for p in group["params"]]


def load_gradients(params: Sequence[torch.Tensor], gradients: Sequence[Any], what: str) -> None:
    """Puts `gradients` (arrays or tensors, one per parameter, None for none) on `params`
    as their `.grad`, for an optimiser step (`apply_gradients`).

    Raises:
        ValueError: another number of gradients, or a gradient of another shape, than
            the parameters (`what` names the call in the message).
    """
    if len(gradients) != len(params):
        raise ValueError(
            f"{what}: got {len(gradients)} gradients, expected one per parameter "
            f"({len(params)}), as compute_gradients returns."
        )
    for i, (param, grad) in enumerate(zip(params, gradients)):
        if grad is None:
            param.grad = None
            continue
        if isinstance(grad, np.ndarray) and not grad.flags.writeable:
            grad = grad.copy()  # e.g. zero-copy from Ray's object store
        tensor = torch.as_tensor(grad, dtype=param.dtype, device=param.device)
        if tensor.shape != param.shape:
            raise ValueError(
                f"{what}: gradient {i} has shape {tuple(tensor.shape)}, expected the "
                f"parameter's {tuple(param.shape)}."
            )
        # A copy: the optimiser must not write into (or keep) the caller's array.
        param.grad = tensor.clone()


def _follow_lr_schedule(policy: TrainablePolicy, optimizer: torch.optim.Optimizer) -> None:
    """Sets the optimiser's rate to the policy's `cur_lr` (`LearningRateSchedule`), if any."""
    for group in optimizer.param_groups:
        group["lr"] = getattr(policy, "cur_lr", group["lr"])


def _live_or_copy(policies: Mapping[str, TrainablePolicy]) -> MutableMapping[str, TrainablePolicy]:
    """A `PolicyMap` itself (a live view), any other mapping copied."""
    if isinstance(policies, PolicyMap):
        return cast(MutableMapping[str, TrainablePolicy], policies)
    return dict(policies)


def _as_loss_policy(
    policy: TrainablePolicy, optimizer: Optimizers
) -> tuple[LossPolicy, torch.optim.Optimizer]:
    """`policy` as a `LossPolicy` with its one optimiser (a policy without `learn_step`).

    Raises:
        TypeError: `make_optimizer` returned a dict of optimisers, which only a
            `learn_step` can step.
    """
    if not isinstance(optimizer, torch.optim.Optimizer):
        raise TypeError(
            f"{type(policy).__name__}.make_optimizer() returned {type(optimizer).__name__}; "
            "a policy without `learn_step` needs one torch.optim.Optimizer (a dict of "
            "optimisers needs a `learn_step(batch, optimizers)` that steps them)."
        )
    return cast(LossPolicy, policy), optimizer


def _backward(
    policy: LossPolicy,
    minibatch: dict[str, torch.Tensor],
    params: list[torch.Tensor],
    optimizer: Optimizers,
) -> dict[str, Any]:
    """Loss -> backward -> finite check -> `grad_clip` on one minibatch; returns its stats.

    The gradients are left on `params` for the caller's optimiser step.
    """
    loss, stats = loss_and_stats(
        policy, policy.loss(policy.model, policy.dist_class, minibatch), minibatch
    )
    clear_grads(params)
    loss.backward()
    grad_clip = policy.config.get("grad_clip")
    if grad_clip:
        # The finite check reads the norm the clip computes (one sync for both).
        stats["grad_gnorm"] = clip_grad_norm_checked(loss, optimizer, params, grad_clip, stats)
    else:
        check_finite_update(loss, optimizer, stats)
    return stats


def loss_and_stats(
    policy: TrainablePolicy, out: Any, batch: TensorDict
) -> tuple[torch.Tensor, dict[str, Any]]:
    """`(loss, stats)` from what a policy's `loss()` returned.

    corral's policies return `(loss, stats)`. RLlib 1.x-style losses (`build_policy_class`
    `loss_fn`s, `with_updates(loss_fn=...)`, `loss()` overrides) return the loss tensor
    alone (or a list of them, summed here); their stats come from the policy's
    `extra_grad_info(batch)` (RLlib's `stats_fn`), which may read `model.tower_stats`.
    """
    if isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], dict):
        return out
    if isinstance(out, (list, tuple)):
        out = sum(out)
    if not torch.is_tensor(out):
        raise TypeError(
            f"{type(policy).__name__}.loss() returned {type(out).__name__}; expected a loss "
            "tensor or (loss tensor, stats dict)."
        )
    stats_fn = getattr(policy, "extra_grad_info", None)
    stats = dict(stats_fn(batch) or {}) if callable(stats_fn) else {}
    if not any("loss" in name for name in stats):
        stats["total_loss"] = out.detach()
    return out, stats


def _load_optimizer_state(optimizer: Optimizers, state: dict[str, Any]) -> None:
    if isinstance(optimizer, Mapping):
        for name, sub_state in state.items():
            optimizer[name].load_state_dict(sub_state)
    else:
        optimizer.load_state_dict(state)


def _optimizer_state(optimizer: Optimizers) -> dict[str, Any]:
    if isinstance(optimizer, Mapping):
        return {name: opt.state_dict() for name, opt in optimizer.items()}
    return optimizer.state_dict()
