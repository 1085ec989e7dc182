"""A3C, the asynchronous advantage actor-critic (Mnih et al. 2016, arXiv:1602.01783).

Each remote worker samples a fragment and computes the gradients of A3C's loss on it
(`Policy.compute_gradients`, advantages from its own postprocessing); the driver applies
each worker's gradients as they arrive (`apply_gradients` of the trainer's learner, so
the optimiser state is the one checkpoints save) and sends the new weights back to that
worker only, which then samples again. No worker waits for another. `grads_per_step`
gradients are applied per training step. With `num_workers=0` the driver samples,
computes and applies itself (the synchronous special case).
"""

from __future__ import annotations

from typing import Any

from corral.agents.a3c.a3c_torch_policy import A3CTorchPolicy
from corral.agents.config import with_common_config
from corral.agents.trainer import (
    NUM_AGENT_STEPS_SAMPLED,
    NUM_AGENT_STEPS_TRAINED,
    NUM_ENV_STEPS_SAMPLED,
    NUM_ENV_STEPS_TRAINED,
    Trainer,
)
from corral.execution.parallel_requests import AsyncRequestsManager
from corral.utils.config_spec import Bool, Float, Int, Optional, Schedule
from corral.utils.metrics.window_stat import WindowStat

# How long one wait for a worker's gradients lasts before the step checks its budget.
_GRAD_WAIT_S = 0.5

DEFAULT_CONFIG = with_common_config(
    {
        # Use a critic (value function) as a baseline; required by GAE.
        "use_critic": True,
        # Use Generalized Advantage Estimation (GAE) with `lambda`.
        "use_gae": True,
        # Steps per fragment collected by each worker per env (one gradient each).
        "rollout_fragment_length": 10,
        # The GAE lambda.
        "lambda": 1.0,
        # Clip gradients to this global norm (on the worker, before sending them).
        "grad_clip": 40.0,
        # Learning rate (the loss is summed over the fragment, as RLlib's).
        "lr": 0.0001,
        # [[timestep, lr], ...] piecewise-linear learning-rate schedule (None: constant).
        "lr_schedule": None,
        # Weight of the value-function loss.
        "vf_loss_coeff": 0.5,
        # Weight of the entropy bonus.
        "entropy_coeff": 0.01,
        # [[timestep, coeff], ...] schedule for `entropy_coeff` (None: constant).
        "entropy_coeff_schedule": None,
        # Each `train()` call lasts at least this many seconds.
        "min_time_s_per_reporting": 5,
        # Each worker's sampler runs ahead in a background thread while the worker
        # computes gradients (RLlib 1.13's A3C default; `corral.evaluation.async_sampler`),
        # so a worker's batches may come from weights one update old.
        "sample_async": True,
        # RLlib 1.13 runs A3C through `training_iteration()` (a trainer built from this
        # config with an `execution_plan` runs its `training_step()` unless this is False).
        "_disable_execution_plan_api": True,
        # Gradients applied per training step (the step waits for that many; each
        # comes from one worker's fragment). 1: RLlib 1.13's step (whatever is ready,
        # at least one).
        "grads_per_step": 1,
    }
)

CONFIG_SPECS = {
    "use_critic": Bool(),
    "use_gae": Bool(),
    "lambda": Float(0, 1),
    "grad_clip": Optional(Float(0)),
    "lr_schedule": Schedule(Float(0)),
    "vf_loss_coeff": Float(0),
    "entropy_coeff": Float(0),
    "entropy_coeff_schedule": Schedule(Float(0)),
    "sample_async": Bool(),
    "grads_per_step": Int(1),
}


def sample_and_compute_gradients(worker: Any) -> dict[str, Any]:
    """On a rollout worker: one fragment and, per policy to train in it, its gradients.

    Returns `{"grads": {pid: [array, ...]}, "infos": {pid: {"learner_stats": ...}},
    "env_steps": n, "agent_steps": m}` (RLlib 1.13's `sample_and_compute_grads`).
    """
    samples = worker.sample()
    batch = samples.as_multi_agent()
    grads, infos = {}, {}
    for pid, policy_batch in batch.policy_batches.items():
        if policy_batch.count and worker.is_policy_to_train(pid, batch):
            grads[pid], infos[pid] = worker.policy_map[pid].compute_gradients(policy_batch)
    return {
        "grads": grads,
        "infos": infos,
        "env_steps": samples.env_steps(),
        "agent_steps": samples.agent_steps(),
    }


def take_optimizer_grads_per_step(config: dict) -> None:
    """Moves RLlib's `optimizer: {"grads_per_step": n}` onto A3C's `grads_per_step`.

    RLlib's asynchronous-gradients optimiser read the key there, and RLlib 1.13's configs
    still carry it (1.13 ignored it); corral's `optimizer` dict is Adam's keyword arguments,
    which would refuse it. Its meaning is A3C's own key's: gradients applied per step.

    Raises:
        ValueError: the value is not an int >= 1, or `grads_per_step` is set to another.
    """
    optimizer = config.get("optimizer")
    if not isinstance(optimizer, dict) or "grads_per_step" not in optimizer:
        return
    value = optimizer.pop("grads_per_step")
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ValueError(f"optimizer.grads_per_step must be an int >= 1, got {value!r}.")
    own = config["grads_per_step"]
    if own not in (value, DEFAULT_CONFIG["grads_per_step"]):
        raise ValueError(
            f"optimizer.grads_per_step={value} and grads_per_step={own} disagree: set "
            "grads_per_step only (A3C's key; `optimizer` holds Adam's arguments)."
        )
    config["grads_per_step"] = value


class A3CTrainer(Trainer):
    """Asynchronous advantage actor-critic: workers' gradients applied as they arrive."""

    _name = "A3C"
    _default_config = DEFAULT_CONFIG
    _config_specs = CONFIG_SPECS
    _policy_class = A3CTorchPolicy

    def validate_config(self, config: dict) -> None:
        take_optimizer_grads_per_step(config)
        super().validate_config(config)
        if config["entropy_coeff"] < 0:
            raise ValueError(f"`entropy_coeff` must be >= 0.0, got {config['entropy_coeff']}.")
        if config["use_gae"] and not config["use_critic"]:
            raise ValueError("`use_gae=True` requires `use_critic=True`.")
        if config.get("num_learners") or (config.get("num_gpus") or 0) > 0:
            raise NotImplementedError(
                "A3C applies the workers' gradients in the driver, on the CPU: "
                f"num_learners={config.get('num_learners')} and "
                f"num_gpus={config.get('num_gpus')} are not built for it (leave both 0)."
            )

    def setup(self, config: dict) -> None:
        super().setup(config)
        self._requests: AsyncRequestsManager | None = None
        self._policy_lag = WindowStat("lag", 100)

    def _apply(self, result: dict, seqs: dict | None) -> dict:
        """Applies one worker's gradients; counts its steps; returns its learner info."""
        learner = self.learner_group.local_learner
        assert learner is not None  # validate_config: the driver's in-place learner
        local = self.workers.local_worker()
        now = local.get_weights_seqs()
        info = {}
        for pid, grads in result["grads"].items():
            if seqs is not None and pid in seqs and pid in now:
                self._policy_lag.push(now[pid] - seqs[pid])
            learner.apply_gradients(pid, grads)
            info[pid] = {
                **result["infos"][pid],
                "num_agent_steps_trained": result["agent_steps"],
                "custom_metrics": {},
            }
        c = self._counters
        c[NUM_ENV_STEPS_SAMPLED] += result["env_steps"]
        c[NUM_AGENT_STEPS_SAMPLED] += result["agent_steps"]
        c[NUM_ENV_STEPS_TRAINED] += result["env_steps"]
        c[NUM_AGENT_STEPS_TRAINED] += result["agent_steps"]
        return info

    def training_step(self) -> dict:
        local = self.workers.local_worker()
        remote = self.workers.remote_workers()
        wanted = self.config["grads_per_step"]
        info: dict = {}
        if not remote:
            for _ in range(wanted):
                info = self._apply(sample_and_compute_gradients(local), None)
            local.set_global_vars({"timestep": self._counters[NUM_AGENT_STEPS_SAMPLED]})
            return info
        if self._requests is None:
            # One request per worker, as RLlib: its next one must see the new weights.
            self._requests = AsyncRequestsManager(
                [], 1, request_timeout_s=self.workers.sample_timeout_s
            )
            self.workers.sync_weights()
        requests = self._requests
        requests.set_workers(remote)
        applied = 0
        to_train = [p for p in local.policy_map if local.is_policy_to_train(p)]
        while applied < wanted:
            requests.call_on_all_available(
                sample_and_compute_gradients, tag_fn=lambda w: local.get_weights_seqs()
            )
            for worker, results in requests.get_ready(_GRAD_WAIT_S, with_tags=True).items():
                for result, seqs in results:
                    info = self._apply(result, seqs)
                    applied += 1
                global_vars = {"timestep": self._counters[NUM_AGENT_STEPS_SAMPLED]}
                # Not waited for: the worker runs it before its next request.
                worker.call("set_weights", local.get_weights(to_train), global_vars)
                local.set_global_vars(global_vars)
        return info

    def _compile_results(self, learner_info: dict, steps_this_iter: int) -> dict:
        result = super()._compile_results(learner_info, steps_this_iter)
        stats = self._policy_lag.stats()
        result["info"]["policy_lag"] = {"mean": stats["lag_mean"]}
        return result

    def try_recover_from_step_attempt(self, error: BaseException | None = None) -> None:
        super().try_recover_from_step_attempt(error)
        if self._requests is not None:
            self._requests.set_workers(self.workers.remote_workers())


__all__ = ["DEFAULT_CONFIG", "A3CTrainer", "sample_and_compute_gradients"]
