"""IMPALA through the classic Trainer API (Espeholt et al. 2018, arXiv:1802.01561).

Sampling never waits for learning. Each remote worker keeps
`max_sample_requests_in_flight_per_worker` sample requests in flight; the driver takes
whichever fragments are ready (optionally mixed with replayed ones,
`replay_proportion`), concatenates them into train batches of `train_batch_size` and
puts those into the learner thread's bounded queue (`corral.execution.learner_thread`),
which trains while the driver goes on sampling. A worker that returned a fragment gets
the newest weights, taken from the learner every `broadcast_interval` fragments; the
weights version each fragment was sampled with is kept, so the learner reports the
policy lag (its version minus the fragment's, in updates). V-trace
(`impala_torch_policy`) corrects for that lag.

With `num_workers=0` the driver samples itself, between taking results, while the
thread trains the same policies (RLlib's behaviour: acting may see weights mid-update).
Failed workers go through the trainer's recovery (`ignore_worker_failures`,
`recreate_failed_workers`); a request running longer than `sample_timeout_s` counts as
a failure of its worker.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import numpy as np

from corral.agents.config import with_common_config
from corral.agents.impala.impala_torch_policy import UNROLL_ID, VTraceTorchPolicy
from corral.agents.trainer import (
    NUM_AGENT_STEPS_SAMPLED,
    NUM_AGENT_STEPS_TRAINED,
    NUM_ENV_STEPS_SAMPLED,
    NUM_ENV_STEPS_TRAINED,
    Trainer,
)
from corral.execution.learner_thread import LearnerThread
from corral.execution.multi_gpu_learner_thread import MultiGPULearnerThread
from corral.execution.parallel_requests import AsyncRequestsManager
from corral.execution.replay_ops import MixInReplay
from corral.execution.tree_agg import create_aggregators, resolve_tree_aggregation
from corral.policy.sample_batch import (
    DEFAULT_POLICY_ID,
    MultiAgentBatch,
    SampleBatch,
    concat_samples,
)
from corral.utils.config_spec import AnyValue, Bool, Float, Int, Optional, Schedule
from corral.utils.deprecation import DEPRECATED_VALUE, deprecation_warning

logger = logging.getLogger(__name__)

# How long one training step waits for a first ready fragment (seconds).
_SAMPLE_WAIT_S = 0.5

DEFAULT_CONFIG = with_common_config(
    {
        # Use V-trace's off-policy corrections (else: the A3C loss on GAE advantages).
        "vtrace": True,
        # V-trace's rho-bar: truncation of the importance weights in the value targets.
        "vtrace_clip_rho_threshold": 1.0,
        # Truncation of the importance weights in the policy-gradient advantages.
        "vtrace_clip_pg_rho_threshold": 1.0,
        # Where a trajectory piece is cut (not ended by a terminal step), its last step
        # serves only as V-trace's bootstrap value (RLlib's legacy behaviour); False:
        # train on it too, bootstrapped with V(new_obs) of that step.
        "vtrace_drop_last_ts": True,
        # Steps per fragment collected by each worker per env.
        "rollout_fragment_length": 50,
        # Env (or agent) steps per train batch handed to the learner thread.
        "train_batch_size": 500,
        # Each `train()` call lasts at least this many seconds.
        "min_time_s_per_reporting": 10,
        # Remote rollout workers (0: the driver samples between learner updates).
        "num_workers": 2,
        # GPUs of the learner (RLlib's default is 1; corral's learner runs on the CPU
        # unless asked: set 1 where torch sees a GPU).
        "num_gpus": 0,
        # Slots the `MultiGPULearnerThread` of `make_learner_thread` (execution plans)
        # loads train batches into ahead of training; the trainer's own learner thread
        # takes batches straight from its queue (no effect there).
        "num_multi_gpu_tower_stacks": 1,
        # Train batches kept in the learner's ring buffer for the `num_sgd_iter`
        # replays (each batch is used `num_sgd_iter` times, round-robin over the ring).
        "minibatch_buffer_size": 1,
        # Updates per train batch.
        "num_sgd_iter": 1,
        # > 0: mix replayed fragments into the train batches, this many per new one
        # (the fraction drawn at random): 0.5 = one replayed per two new on average.
        "replay_proportion": 0.0,
        # Fragments kept for replay (`replay_proportion > 0` needs some).
        "replay_buffer_num_slots": 0,
        # Capacity (train batches) of the learner thread's input queue.
        "learner_queue_size": 16,
        # Seconds the driver waits to put a batch into a full learner queue before it
        # gives up (the learner is stuck); the learner warns after as long without input.
        "learner_queue_timeout": 300,
        # Sample requests kept in flight on each remote worker.
        "max_sample_requests_in_flight_per_worker": 2,
        # RLlib 2.x's name for `max_sample_requests_in_flight_per_worker`; when set
        # (not None) it is used instead.
        "max_requests_in_flight_per_sampler_worker": None,
        # Fragments received between two refreshes of the weights sent to the workers
        # (each worker gets the newest weights with its next request after a refresh).
        "broadcast_interval": 1,
        # > 0: this many aggregation actors (`corral.execution.tree_agg`) sample the
        # remote workers (round-robin shares), mix in replay, concatenate the fragments
        # into train batches and hand those to the driver, which sends them new weights
        # (passed on to their workers). Runs on backend="ray"; on the local backend the
        # driver gathers the fragments itself, with a warning.
        "num_aggregation_workers": 0,
        # Clip gradients to this global norm (None: no clipping).
        "grad_clip": 40.0,
        # The optimiser: "adam" or "rmsprop".
        "opt_type": "adam",
        # Learning rate (the loss is summed over the batch, as RLlib's).
        "lr": 0.0005,
        # [[timestep, lr], ...] piecewise-linear learning-rate schedule (None: constant).
        "lr_schedule": None,
        # RMSProp's smoothing constant (TF's `decay`, torch's `alpha`; opt_type "rmsprop").
        "decay": 0.99,
        # RMSProp's momentum (opt_type "rmsprop").
        "momentum": 0.0,
        # RMSProp's epsilon (opt_type "rmsprop").
        "epsilon": 0.1,
        # Weight of the value-function loss.
        "vf_loss_coeff": 0.5,
        # Weight of the entropy bonus.
        "entropy_coeff": 0.01,
        # [[timestep, coeff], ...] schedule for `entropy_coeff` (None: constant).
        "entropy_coeff_schedule": None,
        # Separate optimisers for policy and value net (TF only in RLlib: not built).
        "_separate_vf_optimizer": False,
        # The value net's learning rate with `_separate_vf_optimizer` (not built).
        "_lr_vf": 0.0005,
        # fn(workers, config) -> fn(learner_info), called after each learner update
        # (RLlib's hook, used by APPO's target and KL updates in RLlib 1.13).
        "after_train_step": None,
        # Deprecated name of `num_multi_gpu_tower_stacks`.
        "num_data_loader_buffers": DEPRECATED_VALUE,
    }
)

CONFIG_SPECS = {
    "vtrace": Bool(),
    "vtrace_clip_rho_threshold": Optional(Float(0)),
    "vtrace_clip_pg_rho_threshold": Optional(Float(0)),
    "vtrace_drop_last_ts": Bool(),
    "num_multi_gpu_tower_stacks": Int(1),
    "minibatch_buffer_size": Int(1),
    "num_sgd_iter": Int(1),
    "replay_proportion": Float(0),
    "replay_buffer_num_slots": Int(0),
    "learner_queue_size": Int(1),
    "learner_queue_timeout": Float(0),
    "max_sample_requests_in_flight_per_worker": Int(1),
    "max_requests_in_flight_per_sampler_worker": Optional(Int(1)),
    "broadcast_interval": Int(1),
    "num_aggregation_workers": Int(0),
    "grad_clip": Optional(Float(0)),
    "opt_type": AnyValue(),
    "lr_schedule": Schedule(Float(0)),
    "decay": Float(0),
    "momentum": Float(0),
    "epsilon": Float(0),
    "vf_loss_coeff": Float(0),
    "entropy_coeff": Float(0),
    "entropy_coeff_schedule": Schedule(Float(0)),
    "_separate_vf_optimizer": Bool(),
    "_lr_vf": Float(0),
    "after_train_step": AnyValue(),
    "num_data_loader_buffers": AnyValue(),
}


def make_learner_thread(local_worker: Any, config: dict) -> LearnerThread:
    """RLlib 1.13's factory (for execution plans): the learner thread for `config`,
    training `local_worker`'s policies with its own learner.

    As RLlib 1.13: a `MultiGPULearnerThread` (loader threads, `num_multi_gpu_tower_stacks`
    slots, the learner on `num_gpus`) unless `simple_optimizer` is True, then a plain
    `LearnerThread` (`minibatch_buffer_size`). A `minibatch_buffer_size` above the
    number of stacks is lowered to it, with a warning. With one stack and
    `num_sgd_iter=1` (the defaults) both train on the same batches in the same order.
    """
    if config.get("simple_optimizer") is True:
        return LearnerThread(
            local_worker,
            minibatch_buffer_size=config["minibatch_buffer_size"],
            num_sgd_iter=config["num_sgd_iter"],
            learner_queue_size=config["learner_queue_size"],
            learner_queue_timeout=config["learner_queue_timeout"],
        )
    num_stacks = config["num_multi_gpu_tower_stacks"]
    if num_stacks < config["minibatch_buffer_size"]:
        logger.warning(
            "The multi-GPU learner thread's ring has one slot per tower stack: "
            "num_multi_gpu_tower_stacks=%d < minibatch_buffer_size=%d; setting "
            "minibatch_buffer_size=%d.",
            num_stacks,
            config["minibatch_buffer_size"],
            num_stacks,
        )
        config["minibatch_buffer_size"] = num_stacks
    return MultiGPULearnerThread(
        local_worker,
        num_gpus=config["num_gpus"],
        lr=config["lr"],
        train_batch_size=config["train_batch_size"],
        num_multi_gpu_tower_stacks=num_stacks,
        num_sgd_iter=config["num_sgd_iter"],
        learner_queue_size=config["learner_queue_size"],
        learner_queue_timeout=config["learner_queue_timeout"],
        _fake_gpus=config.get("_fake_gpus", False),
    )


def with_unroll_id(batch: Any, unroll_id: int) -> Any:
    """A shallow copy of `batch` whose rows carry `unroll_id` (per policy batch)."""

    def tag(b: SampleBatch) -> SampleBatch:
        out = b.copy(shallow=True)
        out[UNROLL_ID] = np.full(b.count, unroll_id, dtype=np.int64)
        return out

    if isinstance(batch, MultiAgentBatch):
        return MultiAgentBatch({p: tag(b) for p, b in batch.policy_batches.items()}, batch.count)
    return tag(batch)


class ImpalaTrainer(Trainer):
    """Importance-weighted actor-learner architecture: asynchronous sampling, a learner
    thread, V-trace."""

    _name = "IMPALA"
    _default_config = DEFAULT_CONFIG
    _config_specs = CONFIG_SPECS
    _policy_class: type = VTraceTorchPolicy

    def get_default_policy_class(self, config: dict) -> type:
        if config["vtrace"]:
            return self._policy_class
        from corral.agents.a3c.a3c_torch_policy import A3CTorchPolicy

        return A3CTorchPolicy

    def validate_config(self, config: dict) -> None:
        super().validate_config(config)
        if config["max_requests_in_flight_per_sampler_worker"] is not None:
            config["max_sample_requests_in_flight_per_worker"] = config[
                "max_requests_in_flight_per_sampler_worker"
            ]
        if config["num_data_loader_buffers"] != DEPRECATED_VALUE:
            deprecation_warning(
                "num_data_loader_buffers", "num_multi_gpu_tower_stacks", error=False
            )
            config["num_multi_gpu_tower_stacks"] = config["num_data_loader_buffers"]
        if config["entropy_coeff"] < 0.0:
            raise ValueError(f"`entropy_coeff` must be >= 0.0, got {config['entropy_coeff']}.")
        if config["opt_type"] not in ("adam", "rmsprop"):
            raise ValueError(f"`opt_type` must be 'adam' or 'rmsprop', got {config['opt_type']!r}.")
        if config["num_aggregation_workers"] > config["num_workers"]:
            raise ValueError(
                "`num_aggregation_workers` must be <= `num_workers`, got "
                f"{config['num_aggregation_workers']} > {config['num_workers']}."
            )
        resolve_tree_aggregation(config)
        if config["_separate_vf_optimizer"]:
            raise ValueError(
                "`_separate_vf_optimizer` is only supported with TensorFlow (as in RLlib)."
            )
        if config["replay_proportion"] > 0 and config["replay_buffer_num_slots"] <= 0:
            raise ValueError(
                f"replay_proportion={config['replay_proportion']} needs "
                f"replay_buffer_num_slots > 0, got {config['replay_buffer_num_slots']}."
            )
        hook = config["after_train_step"]
        if hook is not None and not callable(hook):
            raise ValueError(f"`after_train_step` must be None or callable, got {hook!r}.")

    def setup(self, config: dict) -> None:
        super().setup(config)
        self._learner_thread: LearnerThread | None = None
        self._requests: AsyncRequestsManager | None = None
        self._after_train_step = None
        self._worker_seqs: dict[Any, dict[str, int]] = {}
        self._broadcast: tuple[dict | None, dict[str, int]] = (None, {})
        self._batches_since_broadcast = 0
        self._num_broadcasts = 0
        self._pending: list[Any] = []
        self._pending_steps = 0
        self._pending_seqs: dict[str, list] = defaultdict(list)
        self._unroll_counter = 0
        # fragment -> the pieces it adds to train batches (itself, plus replayed ones).
        self._replay: Callable[[Any], list[Any]] = MixInReplay(
            self.config["replay_buffer_num_slots"],
            self.config["replay_proportion"],
            self.config.get("seed"),
        )
        self._last_info: dict = {}
        # Tree aggregation (`num_aggregation_workers`): the aggregation actors and
        # their requests (started with the first step, again after a recovery).
        self._aggregators: list[Any] = []
        self._agg_requests: AsyncRequestsManager | None = None
        self._agent_steps_trained_seen = 0
        self._learner_agent_steps = 0
        self._throughput_mark = (time.perf_counter(), 0)

    # -- the learner thread -------------------------------------------------

    def _ensure_started(self) -> LearnerThread:
        if self._learner_thread is not None and self._learner_thread.is_alive():
            return self._learner_thread
        cfg = self.config
        _ = self.learner_group  # built here, in the main thread
        local = self.workers.local_worker()
        thread = LearnerThread(
            local,
            minibatch_buffer_size=cfg["minibatch_buffer_size"],
            num_sgd_iter=cfg["num_sgd_iter"],
            learner_queue_size=cfg["learner_queue_size"],
            learner_queue_timeout=cfg["learner_queue_timeout"],
            update_fn=self._learner_update,
        )
        thread.start()
        self._learner_thread = thread
        self._agent_steps_trained_seen = 0
        if cfg["after_train_step"] is not None and self._after_train_step is None:
            self._after_train_step = cfg["after_train_step"](self.workers, cfg)
        if self._requests is None:
            self._requests = AsyncRequestsManager(
                [],
                cfg["max_sample_requests_in_flight_per_worker"],
                request_timeout_s=self.workers.sample_timeout_s,
            )
            # Every worker starts from the driver's weights, so each fragment's
            # weights version is known.
            self.workers.sync_weights()
            self._reset_weight_records()
        return thread

    def _learner_update(self, batch: MultiAgentBatch) -> dict:
        """One update on the learner thread (the trainer's learner group)."""
        results = self.learner_group.update(
            batch=batch,
            num_epochs=1,
            minibatch_size=None,
            timesteps={"num_env_steps_sampled_lifetime": self._counters[NUM_ENV_STEPS_SAMPLED]},
        )
        self._learner_agent_steps += batch.agent_steps()
        return self.learner_info_from(results)

    def _raise_if_learner_failed(self) -> None:
        thread = self._learner_thread
        if thread is not None and thread.error is not None:
            error, thread.error = thread.error, None
            self._learner_thread = None  # a new one starts with the next step
            raise error

    @contextlib.contextmanager
    def _learning_paused(self) -> Iterator[None]:
        """Holds the learner between updates (weights and optimisers stay still)."""
        thread = self._learner_thread
        if thread is None:
            yield
            return
        with thread.update_lock:
            yield

    def _reset_weight_records(self) -> None:
        """After weights were set from outside (a sync, a restore): every worker has the
        driver's current weights, and those are what the next broadcast sends."""
        local = self.workers.local_worker()
        seqs = local.get_weights_seqs()
        self._worker_seqs = {w: dict(seqs) for w in self.workers.remote_workers()}
        self._broadcast = (None, dict(seqs))
        # The aggregators' records of their workers' weights are stale now: new ones
        # start with the next step.
        self._stop_aggregators()
        if self._learner_thread is not None:
            self._learner_thread._published = None

    # -- one training step --------------------------------------------------

    def training_step(self) -> dict:
        thread = self._ensure_started()
        self._raise_if_learner_failed()
        if self.config["num_aggregation_workers"]:
            self._step_with_aggregators(thread)
        for handle, batch, seqs in self._sample():
            self._counters[NUM_ENV_STEPS_SAMPLED] += batch.env_steps()
            self._counters[NUM_AGENT_STEPS_SAMPLED] += batch.agent_steps()
            for piece in self._replay(batch):
                self._add_to_train_batch(piece, seqs, thread)
            if handle is not None:
                self._send_weights(handle, thread)
        self.workers.local_worker().set_global_vars(
            {"timestep": self._counters[NUM_ENV_STEPS_SAMPLED]}
        )
        self._drain_learner_results(thread)
        self._raise_if_learner_failed()
        return self._last_info

    def _step_with_aggregators(self, thread: LearnerThread) -> None:
        """Tree aggregation: the aggregators' ready train batches into the learner's
        queue; each aggregator that delivered gets the newest broadcast weights."""
        if not self._aggregators:
            seqs = self.workers.local_worker().get_weights_seqs()
            self._aggregators = create_aggregators(self.workers, self.config, seqs)
            self._agg_requests = AsyncRequestsManager(
                self._aggregators, 1, request_timeout_s=self.workers.sample_timeout_s
            )
            for agg in self._aggregators:
                self._worker_seqs[agg] = dict(seqs)
        assert self._agg_requests is not None
        try:
            self._agg_requests.call_on_all_available("next_train_batch")
            ready = self._agg_requests.get_ready(self._sample_wait_s())
        except BaseException:
            self._stop_aggregators()  # new ones start over the recovered workers
            raise
        for agg, outs in ready.items():
            for out in outs:
                self._counters[NUM_ENV_STEPS_SAMPLED] += out["env_steps"]
                self._counters[NUM_AGENT_STEPS_SAMPLED] += out["agent_steps"]
                self._enqueue((out["batch"], out["sampled_seqs"]), thread)
                self._send_weights(agg, thread, with_seqs=True)

    def _stop_aggregators(self) -> None:
        for agg in self._aggregators:
            self._worker_seqs.pop(agg, None)
            agg.kill()
        self._aggregators = []
        self._agg_requests = None

    def _sample(self) -> list[tuple[Any, Any, dict]]:
        """Ready fragments: (worker handle or None for the driver, batch, versions)."""
        if self.config["num_aggregation_workers"]:
            return []  # the aggregators sample the workers
        remote = self.workers.remote_workers()
        if not remote:
            local = self.workers.local_worker()
            seqs = local.get_weights_seqs()
            return [(None, local.sample(), seqs)]
        assert self._requests is not None
        self._requests.set_workers(remote)
        seqs_now = self.workers.local_worker().get_weights_seqs()
        for w in remote:
            # A worker new since the last step (recreated) started from the driver's weights.
            self._worker_seqs.setdefault(w, dict(seqs_now))
        self._requests.call_on_all_available("sample", tag_fn=lambda w: dict(self._worker_seqs[w]))
        ready = self._requests.get_ready(self._sample_wait_s(), with_tags=True)
        return [(w, batch, seqs) for w, items in ready.items() for batch, seqs in items]

    def _sample_wait_s(self) -> float:
        """How long one training step waits for a first ready fragment (seconds)."""
        return _SAMPLE_WAIT_S

    def _add_to_train_batch(self, batch: Any, seqs: dict, thread: LearnerThread) -> None:
        self._unroll_counter += 1
        batch = with_unroll_id(batch, self._unroll_counter)
        self._pending.append(batch)
        by_agent = self.config["multiagent"]["count_steps_by"] == "agent_steps"
        self._pending_steps += batch.agent_steps() if by_agent else batch.env_steps()
        pids = batch.policy_batches if isinstance(batch, MultiAgentBatch) else [DEFAULT_POLICY_ID]
        for pid in pids:
            self._pending_seqs[pid].append(seqs.get(pid))
        if self._pending_steps < self.config["train_batch_size"]:
            return
        train_batch = concat_samples(self._pending).as_multi_agent()
        item = (train_batch, dict(self._pending_seqs))
        self._pending, self._pending_steps = [], 0
        self._pending_seqs = defaultdict(list)
        self._enqueue(item, thread)

    def _enqueue(self, item: tuple[MultiAgentBatch, dict], thread: LearnerThread) -> None:
        """Puts `(train batch, sampled versions)` into the learner's queue."""
        deadline = time.monotonic() + self.config["learner_queue_timeout"]
        while True:
            try:
                # Short waits: a learner that died must not block the driver.
                thread.inqueue.put(item, timeout=0.1)
                return
            except queue.Full:
                self._raise_if_learner_failed()
                if time.monotonic() > deadline:
                    raise RuntimeError(
                        "The learner queue stayed full for learner_queue_timeout="
                        f"{self.config['learner_queue_timeout']} s: the learner is stuck."
                    ) from None

    def _send_weights(self, handle: Any, thread: LearnerThread, with_seqs: bool = False) -> None:
        """Gives `handle` the newest broadcast weights (refreshed from the learner every
        `broadcast_interval` fragments, or train batches of aggregators) unless it has
        them already; `with_seqs`: with their versions (an aggregator's `set_weights`)."""
        self._batches_since_broadcast += 1
        published = thread.published_weights()
        if (
            published is not None
            and self._batches_since_broadcast >= self.config["broadcast_interval"]
            and published[1] != self._broadcast[1]
        ):
            self._broadcast = published
            self._batches_since_broadcast = 0
            self._num_broadcasts += 1
        weights, seqs = self._broadcast
        have = self._worker_seqs.get(handle, {})
        if weights is None or have == seqs:
            return
        changed = {pid: w for pid, w in weights.items() if have.get(pid) != seqs.get(pid)}
        # Not waited for: the worker runs it before the sample request sent next, and a
        # worker that died shows in that request's result.
        global_vars = {"timestep": self._counters[NUM_ENV_STEPS_SAMPLED]}
        extra = (dict(seqs),) if with_seqs else ()
        handle.call("set_weights", changed, global_vars, *extra)
        self._worker_seqs[handle] = dict(seqs)

    def _drain_learner_results(self, thread: LearnerThread) -> None:
        while True:
            try:
                count, info = thread.outqueue.get_nowait()
            except queue.Empty:
                break
            self._counters[NUM_ENV_STEPS_TRAINED] += count
            self._last_info = info
            if self._after_train_step is not None:
                self._after_train_step(info)
        trained_agents = self._learner_agent_steps
        self._counters[NUM_AGENT_STEPS_TRAINED] += trained_agents - self._agent_steps_trained_seen
        self._agent_steps_trained_seen = trained_agents

    def _compile_results(self, learner_info: dict, steps_this_iter: int) -> dict:
        result = super()._compile_results(learner_info, steps_this_iter)
        info = result.setdefault("info", {})
        if self._learner_thread is not None:
            self._learner_thread.add_learner_metrics(result)
            info["learner_queue"]["size_now"] = self._learner_thread.inqueue.qsize()
        now, trained = time.perf_counter(), self._counters[NUM_ENV_STEPS_TRAINED]
        then, before = self._throughput_mark
        self._throughput_mark = (now, trained)
        info["learner_throughput"] = (trained - before) / max(now - then, 1e-9)
        info["num_weight_broadcasts"] = self._num_broadcasts
        return result

    # -- what must not run while the learner updates -------------------------

    def _sync_weights_to_workers(self, *, worker_set: Any) -> None:
        with self._learning_paused():
            super()._sync_weights_to_workers(worker_set=worker_set)

    def get_weights(self, policies: list[str] | None = None) -> dict:
        with self._learning_paused():
            return super().get_weights(policies)

    def set_weights(self, weights: dict) -> None:
        with self._learning_paused():
            super().set_weights(weights)
            self._reset_weight_records()

    def save_checkpoint(self, checkpoint_dir: str) -> Any:
        with self._learning_paused():
            return super().save_checkpoint(checkpoint_dir)

    def __getstate__(self) -> dict:
        with self._learning_paused():
            return super().__getstate__()

    def __setstate__(self, state: dict) -> None:
        with self._learning_paused():
            super().__setstate__(state)
            self._reset_weight_records()

    def add_policy(self, *args: Any, **kwargs: Any) -> Any:
        with self._learning_paused():
            return super().add_policy(*args, **kwargs)

    def remove_policy(self, *args: Any, **kwargs: Any) -> Any:
        with self._learning_paused():
            return super().remove_policy(*args, **kwargs)

    def try_recover_from_step_attempt(self, error: BaseException | None = None) -> None:
        self._stop_aggregators()  # they hold the old workers; new ones start next step
        with self._learning_paused():
            super().try_recover_from_step_attempt(error)
        if self._requests is not None:
            self._requests.set_workers(self.workers.remote_workers())

    def cleanup(self) -> None:
        thread = getattr(self, "_learner_thread", None)
        if thread is not None:
            thread.stop()
        if getattr(self, "_aggregators", None):
            self._stop_aggregators()
        super().cleanup()
