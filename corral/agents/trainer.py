"""`Trainer`: the classic RLlib 1.x training API, orchestration only.

A trainer builds its rollout workers (`WorkerSet`), its learners
(`LearnerGroup`) and, when asked, evaluation workers; `train()` runs one
iteration: `step()` retries `step_attempt()` after worker failures, and
`step_attempt()` runs the algorithm's `training_step()` (sample -> update ->
sync weights) until the iteration's minimum time/steps are reached, then
evaluates when due. An algorithm is a default config, a policy class and a
`training_step`.
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

from corral.agents import (
    acting,
    recovery,
    trainer_checkpoints,
    trainer_evaluation,
    trainer_plan,
    trainer_results,
)
from corral.agents.callbacks import DefaultCallbacks, make_callbacks
from corral.agents.config import (
    ALLOW_UNKNOWN_SUBKEYS,
    COMMON_CONFIG,
    COMMON_CONFIG_SPECS,
    OVERRIDE_ALL_SUBKEYS_IF_TYPE_CHANGES,
    check_config_values,
    check_not_implemented,
    merge_trainer_configs,
    validate_config,
    with_common_config,
)
from corral.agents.config_validation import validate_framework as _validate_framework
from corral.agents.driver import default_logger, prepare_driver
from corral.agents.policy_ledger import (
    AddedPolicy,
    PolicyLedger,
    added_policy_spaces,
    call_on_given_workers,
    call_on_workers,
    call_on_workers_of,
    remove_where_present,
)
from corral.agents.recovery import MAX_WORKER_FAILURE_RETRIES
from corral.agents.resources import resource_bundles
from corral.agents.trainer_checkpoints import RESUME_CHECKPOINT_STATE  # noqa: F401  (old path)
from corral.core import _heap  # noqa: F401  (torch loaded, the heap frozen: see there)
from corral.core.learner import LearnerGroup
from corral.core.learner.learner_group import check_gpus
from corral.env.env_context import EnvContext
from corral.env.utils import env_id_of, make_env_creator
from corral.evaluation.backend import wait_all
from corral.evaluation.metrics import RolloutMetrics, collect_metrics
from corral.evaluation.worker_set import WORKER_START_TIMEOUT_S, WorkerSet
from corral.execution.common import (  # noqa: F401  (the names: RLlib 1.13's trainer has them)
    NUM_AGENT_STEPS_SAMPLED,
    NUM_AGENT_STEPS_TRAINED,
    NUM_ENV_STEPS_SAMPLED,
    NUM_ENV_STEPS_TRAINED,
    count_sampled,
    steps_sampled,
    steps_trained,
)
from corral.execution.train_ops import reduces_per_iteration
from corral.policy.policy import Policy, learns_by_itself
from corral.policy.sample_batch import DEFAULT_POLICY_ID
from corral.policy.torch_policy import with_learn_fetches
from corral.tune.trainable import Trainable
from corral.utils.checkpoint_config import class_named_by_config
from corral.utils.deprecation import deprecation_warning
from corral.utils.filter import FilterManager
from corral.utils.metrics import TRAINING_ITERATION_TIMER
from corral.utils.metrics.learner_info import learner_info_from
from corral.utils.sys_usage import SysUsage
from corral.utils.timer import TimerStat

__all__ = [
    "COMMON_CONFIG",
    "MAX_WORKER_FAILURE_RETRIES",
    "Trainer",
    "with_common_config",
]

logger = logging.getLogger(__name__)


class Trainer(Trainable):
    """Coordinates sampling, learning and evaluation for one algorithm.

    Args:
        config: partial config, merged over the algorithm's `DEFAULT_CONFIG`.
        env: a name given to `register_env`, a Gymnasium id, a dotted class
            path or an env class (overrides `config["env"]`).
        logger_creator: `fn(config) -> Logger`; default: a `UnifiedLogger` in
            `~/corral_results/<Trainer>_<env>_<time>...`.
    """

    _name = "Trainer"
    _default_config: dict = COMMON_CONFIG
    # Type/range specs of the config keys this class adds (see
    # `corral.utils.config_spec`); `get_config_specs` merges them along the MRO.
    _config_specs: dict = COMMON_CONFIG_SPECS
    _policy_class: type[Policy] | None = None
    # The fewest remote rollout workers the algorithm runs with (DD-PPO's learners and
    # MAML's tasks are its workers); `corral evaluate` starts that many.
    min_num_workers = 0
    _allow_unknown_configs = False
    _allow_unknown_subkeys = ALLOW_UNKNOWN_SUBKEYS
    _override_all_subkeys_if_type_changes = OVERRIDE_ALL_SUBKEYS_IF_TYPE_CHANGES

    def __init__(
        self,
        config: dict | None = None,
        env: Any = None,
        logger_creator: Callable | None = None,
        remote_checkpoint_dir: str | None = None,
        sync_function_tpl: str | None = None,
    ) -> None:
        config = dict(config or {})
        env = env if env is not None else config.get("env")
        self._env_id = env_id_of(env)
        if env is not None:
            config["env"] = env
        if logger_creator is None:
            logger_creator = self._default_logger_creator
        self.train_exec_impl: Any
        super().__init__(config, logger_creator, remote_checkpoint_dir, sync_function_tpl)
        # An execution plan is built once the whole setup (a subclass's too) is done.
        if trainer_plan.uses_execution_plan(self):
            try:
                self.train_exec_impl = trainer_plan.build(self)
            except BaseException:
                self.stop()
                raise

    def _default_logger_creator(self, config: dict) -> Any:
        return default_logger(self._name, self._env_id, config)

    # -- config -------------------------------------------------------------

    @classmethod
    def get_default_config(cls) -> dict:
        return cls._default_config

    @classmethod
    def get_config_specs(cls) -> dict:
        """The type/range spec of each config key: COMMON_CONFIG_SPECS updated with the
        `_config_specs` of every class from `Trainer` down to this one."""
        specs: dict = {}
        for klass in reversed(cls.__mro__):
            specs.update(klass.__dict__.get("_config_specs") or {})
        return specs

    @classmethod
    def merge_trainer_configs(
        cls, config1: dict, config2: dict | None, _allow_unknown_configs: bool | None = None
    ) -> dict:
        if _allow_unknown_configs is None:
            _allow_unknown_configs = cls._allow_unknown_configs
        return merge_trainer_configs(
            config1,
            config2,
            _allow_unknown_configs,
            cls._allow_unknown_subkeys,
            cls._override_all_subkeys_if_type_changes,
        )

    @staticmethod
    def _validate_config(config: dict, trainer_obj_or_none: Trainer | None = None) -> None:
        validate_config(config, trainer_obj_or_none)

    def validate_config(self, config: dict) -> None:
        """Algorithm-specific checks (subclasses extend; call super)."""

    @staticmethod
    def validate_framework(config: dict) -> None:
        """Checks `config["framework"]`: corral runs "torch" only (RLlib 1.13's name;
        the same check `validate_config` makes).

        Raises:
            ValueError: a TensorFlow framework ("tf", "tf2", "tfe") or an unknown one.
        """
        _validate_framework(config)

    def get_default_policy_class(self, config: dict) -> type[Policy] | None:
        """The policy class of specs that name none; None when this trainer has none
        (RLlib 1.13: every policy spec must then name its class)."""
        return self._policy_class

    @staticmethod
    def validate_env(env: Any, env_context: EnvContext) -> None:
        """Checks each new (sub-)env; override to add your own checks."""

    # -- setup --------------------------------------------------------------

    def setup(self, config: dict) -> None:
        defaults = self.get_default_config()
        self.config = self.merge_trainer_configs(defaults, config, self._allow_unknown_configs)
        self.raw_user_config = config
        # A run's params.json given back as a config names its callbacks class.
        self.config["callbacks"] = class_named_by_config(
            self.config.get("callbacks"), DefaultCallbacks, "callbacks"
        )
        # Types and ranges first, so that no later check or setup step trips over a
        # value of the wrong kind with a message that does not name its key.
        check_config_values(self.config, self.get_config_specs())
        self._validate_config(self.config, trainer_obj_or_none=self)
        check_not_implemented(self.config, defaults, getattr(self, "_name", None))
        self.validate_config(self.config)
        check_gpus(self.config)
        prepare_driver(self.config)
        if self.config.get("vectorize_mode") == "envpool":  # `env` is an EnvPool task id
            from corral.env.envpool_env import envpool_env_creator

            self.env_creator = envpool_env_creator(self.config.get("env"))
        else:
            self.env_creator = make_env_creator(
                self.config.get("env"),
                self.config.get("preprocessor_pref"),
                self.config.get("model"),
            )
        self.callbacks: DefaultCallbacks = make_callbacks(self.config["callbacks"])
        self._counters: dict[str, int] = defaultdict(int)
        # RLlib 1.13's timers (`with self._timers[SAMPLE_TIMER]: ...` in a
        # `training_iteration` of one's own); each result reports them under "timers".
        self._timers: defaultdict[str, TimerStat] = defaultdict(TimerStat)
        self._trained_this_iter = 0
        # The execution plan's iterator (RLlib 1.x's name), when the class has a plan.
        self.train_exec_impl = None
        self._episode_history: list[RolloutMetrics] = []
        self._episodes_total = 0

        self.workers = self._make_workers(
            env_creator=self.env_creator,
            validate_env=self.validate_env,
            policy_class=self.get_default_policy_class(self.config),
            config=self.config,
            num_workers=self.config["num_workers"],
        )
        self.workers.timers = self._timers  # sampling and weight syncs time into them
        self._learner_group: LearnerGroup | None = None
        # Inside `train()` of a step marked `learner_results_per_iteration`: the learners'
        # metrics wait for the iteration's end (`update_learners` reads this).
        self._defer_learner_results = False
        self.evaluation_workers: WorkerSet | None = None
        # The last evaluation's results (RLlib's name), attached to every later result
        # with `always_attach_evaluation_results`. Before the first evaluation, RLlib 1.13's
        # placeholder: the reward keys as NaN, so Tune stop criteria on them find a value.
        self.evaluation_metrics: dict = {
            "evaluation": {
                "episode_reward_max": float("nan"),
                "episode_reward_min": float("nan"),
                "episode_reward_mean": float("nan"),
            }
        }
        if self.config["evaluation_num_workers"] > 0 or self.config["evaluation_interval"]:
            eval_config = self._evaluation_config()
            self.evaluation_workers = self._make_workers(
                env_creator=trainer_evaluation.evaluation_env_creator(self, eval_config),
                validate_env=None,
                policy_class=self.get_default_policy_class(self.config),
                config=eval_config,
                num_workers=self.config["evaluation_num_workers"],
            )
        # `log_sys_usage`: the machine's load in each result, as `result["perf"]`.
        self._sys_usage = SysUsage() if self.config["log_sys_usage"] else None
        # Policy-map changes since setup, replayed on recreated workers and restores.
        self._policy_ledger = PolicyLedger()
        self.callbacks.on_trainer_init(trainer=self)

    @property
    def learner_group(self) -> LearnerGroup:
        """The learners that train the local worker's policies in place.

        Built on first use: acting and sampling never need the learners and their
        optimisers (nor torch's compiler stack, seconds to import, which an optimiser
        that steps itself, e.g. RMSprop, imports on its first step), so a trainer
        samples (and a restored one acts) without paying for them.
        """
        if self._learner_group is None:
            self._learner_group = LearnerGroup(
                self.config,
                self.workers.local_worker().policy_map,
                self.callbacks,
                policy_ids=self._learned_policies(),
            )
        return self._learner_group

    def _evaluation_config(self) -> dict:
        return trainer_evaluation.evaluation_config(self)

    def _make_workers(
        self,
        *,
        env_creator: Callable,
        validate_env: Callable | None,
        policy_class: type[Policy] | None,
        config: dict,
        num_workers: int,
    ) -> WorkerSet:
        return WorkerSet(
            env_creator=env_creator,
            validate_env=validate_env,
            policy_class=policy_class,
            trainer_config=config,
            num_workers=num_workers,
            logdir=self.logdir,
        )

    # -- training -----------------------------------------------------------

    def step(self) -> dict:
        """One iteration, retrying `step_attempt()` after worker failures."""
        return recovery.step_with_retries(self)

    def _sync_filters_if_needed(self, worker_set: WorkerSet) -> None:
        """Merges the remote workers' observation-filter statistics into the local
        worker's filters and, with `synchronize_filters`, pushes the result back."""
        if self.config.get("observation_filter", "NoFilter") == "NoFilter":
            return
        FilterManager.synchronize(
            worker_set.local_worker().filters,
            worker_set.healthy_remote_workers(),
            update_remote=self.config["synchronize_filters"],
        )

    def step_attempt(self) -> dict:
        """Trains one iteration and evaluates when `evaluation_interval` says so."""
        interval = self.config["evaluation_interval"]
        evaluate_now = bool(interval) and (self._iteration + 1) % interval == 0
        evaluation: dict | None
        if evaluate_now and self.config["evaluation_parallel_to_training"]:
            results, evaluation = self._train_and_evaluate_in_parallel()
        else:
            results = self._train_iteration()
            evaluation = self.evaluate() if evaluate_now else None
        if evaluate_now:
            if not isinstance(evaluation, dict):
                raise ValueError("Trainer.evaluate() must return a dict.")
            self.evaluation_metrics = evaluation
            results.update(evaluation)
        elif self.config["always_attach_evaluation_results"]:
            results.update(self.evaluation_metrics)
        self._update_env_tasks(results)
        return results

    def _train_iteration(self) -> dict:
        if self.train_exec_impl is not None:
            return trainer_plan.next_result(self)
        start = time.perf_counter()
        # Timesteps count agent steps when `multiagent/count_steps_by` says so.
        count_steps_by = self.config["multiagent"]["count_steps_by"]
        steps_before = steps_sampled(self._counters, count_steps_by)
        trained_before = steps_trained(self._counters, count_steps_by)
        min_time = self.config["min_iter_time_s"] or 0
        min_steps = self.config["timesteps_per_iteration"] or 0
        min_trained = self.config["min_train_timesteps_per_reporting"] or 0
        # RLlib 1.13 users override `training_iteration()` (1.13's name), corral's
        # algorithms `training_step()`: an override of the former wins.
        step = (
            self.training_iteration
            if type(self).training_iteration is not Trainer.training_iteration
            else self.training_step
        )
        # A step that reads no learner results (`learner_results_per_iteration`): its
        # updates keep their metrics, reduced once below.
        defer = self._defer_learner_results = reduces_per_iteration(step)
        timer = self._timers[TRAINING_ITERATION_TIMER]
        try:
            while True:
                step_start = time.perf_counter()
                learner_info = step()
                timer.push(time.perf_counter() - step_start)
                steps = steps_sampled(self._counters, count_steps_by) - steps_before
                trained = steps_trained(self._counters, count_steps_by) - trained_before
                if (
                    time.perf_counter() - start >= min_time
                    and steps >= min_steps
                    and trained >= min_trained
                ):
                    break
        finally:
            self._defer_learner_results = False
        group = self._learner_group  # (None: no update built it, none to reduce)
        if defer and group is not None and group.unreduced_updates:
            learner_info = self._iteration_learner_info(
                self.learner_info_from(group.reduce_metrics())
            )
        # (What `compile_results` reports as `num_*_trained_this_iter`.)
        self._trained_this_iter = trained
        return self._compile_results(learner_info, steps)

    def _iteration_learner_info(self, learner_info: dict) -> dict:
        """The learner info of an iteration whose updates were reduced at its end (a
        hook for trainers that keep it; default: as it is)."""
        return learner_info

    def training_step(self) -> dict:
        """One round of sampling and learning; returns the learner info dict.

        Algorithms implement this (sample with the worker set, update through
        `self.learner_group`, sync weights, count steps in `self._counters`). The
        default is RLlib 1.13's default `training_iteration()`: sample
        `train_batch_size` steps from all workers, train the policies to train on
        them (`multi_gpu_train_one_step`: `num_sgd_iter` epochs of
        `sgd_minibatch_size` minibatches where the config has them, else one update),
        then sync the weights to the workers.
        """
        from corral.execution.rollout_ops import synchronous_parallel_sample
        from corral.execution.train_ops import multi_gpu_train_one_step

        size = self.config["train_batch_size"]
        by_agent = self.config["multiagent"]["count_steps_by"] == "agent_steps"
        batch = synchronous_parallel_sample(
            worker_set=self.workers,
            max_env_steps=None if by_agent else size,
            max_agent_steps=size if by_agent else None,
        ).as_multi_agent()
        sampled = count_sampled(self._counters, batch)
        results = multi_gpu_train_one_step(self, batch)
        self.workers.sync_weights(global_vars={"timestep": sampled})
        return results

    # Trainable's `training_iteration` is the iteration count; RLlib 1.13's Trainer
    # reuses the name for the training step, and so does corral's.
    def training_iteration(self) -> dict:  # type: ignore[override]
        """RLlib 1.13's name for `training_step()`; override either (an override of
        this one is what `train()` runs)."""
        return self.training_step()

    @staticmethod
    def execution_plan(workers: WorkerSet, config: dict, **kwargs: Any) -> Any:
        """RLlib 1.x's classic form of an algorithm: an iterator (built from the
        operators of `corral.execution`) whose every item is one iteration's result
        dict. A subclass that overrides it (or `build_trainer(execution_plan=fn)`) runs
        it instead of `training_step()`, unless `_disable_execution_plan_api` is set;
        `kwargs` holds `local_replay_buffer` when the config has a replay buffer.
        This default is RLlib 1.13's: sample, concatenate to `train_batch_size`, train,
        report (see `corral.agents.trainer_plan`)."""
        return trainer_plan.default_execution_plan(workers, config)

    def _kwargs_for_execution_plan(self) -> dict:
        """The keyword arguments `execution_plan` gets (RLlib 1.13's hook)."""
        return trainer_plan.plan_kwargs(self)

    def _compile_results(self, learner_info: dict, steps_this_iter: int) -> dict:
        return trainer_results.compile_results(self, learner_info, steps_this_iter)

    def collect_metrics(self, selected_workers: list | None = None) -> dict:
        """Episode metrics of the rollout workers, as `train()` reports them.

        Drains the episodes finished since the last call (they are counted
        once) and smooths over `metrics_smoothing_episodes` episodes.
        `selected_workers`: the remote workers to ask (default: the healthy ones).
        """
        return collect_metrics(
            self.workers.local_worker(),
            self.workers.healthy_remote_workers(),
            keep_custom_metrics=self.config["keep_per_episode_custom_metrics"],
            min_history=self.config["metrics_smoothing_episodes"],
            selected_workers=selected_workers,
            history=self._episode_history,
        )

    def log_result(self, result: dict) -> None:
        # Callbacks may change the result before it is written.
        self.callbacks.on_train_result(trainer=self, result=result)
        super().log_result(result)

    def learner_info_from(self, results: dict | None) -> dict:
        """Learner results (Stats leaves) -> RLlib's `info/learner` layout, with the
        `extra_compute_grad_fetches()` of each policy whose class overrides it (as RLlib
        1.13's `learn_on_batch` returned them), read after the update."""
        info = learner_info_from(results)
        workers = getattr(self, "workers", None)
        if workers is None:
            return info
        local = workers.local_worker()
        for pid in info:
            policy = local.get_policy(pid)
            if getattr(policy, "_learn_fetches", False):
                info[pid] = with_learn_fetches(policy, info[pid])
        return info

    # -- evaluation ---------------------------------------------------------

    def evaluate(
        self,
        episodes_left_fn: Callable[[int], int] | None = None,
        duration_fn: Callable[[int], int] | None = None,
    ) -> dict:
        """Evaluates the current policies under the `evaluation_config` settings.

        Weights and filters are synced to the evaluation workers first. Then
        `custom_eval_function(trainer, evaluation_workers)` runs if set;
        otherwise episodes are sampled: exactly `evaluation_num_episodes` on a
        local worker, at least that many on remote evaluation workers (one
        round gives one episode per worker asked).

        Args:
            episodes_left_fn: deprecated in RLlib 1.13: `duration_fn`.
            duration_fn: `fn(num_units_done) -> num_units_left` in the units of
                `evaluation_duration_unit` (episodes or env steps); evaluation stops
                once it returns <= 0. Default: the configured duration minus what is
                done.

        Returns:
            `{"evaluation": metrics}`.
        """
        if episodes_left_fn is not None:
            deprecation_warning(
                old="Trainer.evaluate(episodes_left_fn)",
                new="Trainer.evaluate(duration_fn)",
                error=False,
            )
            duration_fn = episodes_left_fn
        self._before_evaluate()
        self._sync_evaluation_workers()
        return trainer_evaluation.evaluate_synced(self, duration_fn)

    def _train_and_evaluate_in_parallel(self) -> tuple[dict, dict]:
        return trainer_evaluation.train_and_evaluate_in_parallel(self)

    def _before_evaluate(self) -> None:
        """Hook run before each evaluation."""

    def _sync_evaluation_workers(self) -> None:
        if self.evaluation_workers is not None:
            self._sync_weights_to_workers(worker_set=self.evaluation_workers)

    def _sync_weights_to_workers(self, *, worker_set: WorkerSet) -> None:
        """Copies the local worker's weights, filters and global vars to `worker_set`."""
        source = self.workers.local_worker()
        state = source.get_state()
        if worker_set.local_worker() is not source:
            worker_set.local_worker().set_state(state)
        wait_all([w.call("set_state", state) for w in worker_set.remote_workers()])

    def _update_env_tasks(self, results: dict) -> None:
        """Lets `env_task_fn` pick the next task of every rollout worker's envs."""
        trainer_evaluation.update_env_tasks(self, results)

    # -- acting -------------------------------------------------------------

    # Defined, with their docstrings, in `corral.agents.acting` (preprocessing and
    # filtering as the sampler does, one batch per policy, env-space actions).
    compute_single_action = acting.compute_single_action
    compute_actions = acting.compute_actions
    compute_action = acting.compute_action

    # -- policies and weights ----------------------------------------------

    def get_policy(self, policy_id: str = DEFAULT_POLICY_ID) -> Policy | None:
        return self.workers.local_worker().get_policy(policy_id)

    def get_weights(self, policies: list[str] | None = None) -> dict:
        return self.workers.local_worker().get_weights(policies)

    def set_weights(self, weights: dict) -> None:
        local = self.workers.local_worker()
        local.set_weights(weights)
        for pid in weights:
            local.policy_map[pid].bump_weights_seq()
        self.workers.sync_weights()

    def add_policy(
        self,
        policy_id: str,
        policy_cls: type[Policy],
        *,
        observation_space: Any = None,
        action_space: Any = None,
        config: dict | None = None,
        policy_state: dict | None = None,
        policy_mapping_fn: Callable | None = None,
        policies_to_train: list[str] | Callable | None = None,
        evaluation_workers: bool = True,
        workers: list[Any] | None = None,
    ) -> Policy | None:
        """Adds a policy to every rollout worker (and evaluation worker) and the learners.

        Spaces left None are taken from the env (the agents `policy_mapping_fn`
        maps to the policy). `policy_state` (a `Policy.get_state()`) is set on
        every copy right after it is built. A new `policy_mapping_fn` applies to
        episodes started afterwards; `policies_to_train` None keeps the current
        list (plus the new policy). Returns the local worker's copy.

        `workers` (RLlib 1.13): the rollout workers to add it to instead of all of
        them: `RolloutWorker`s (`self.workers.local_worker()`) and remote workers'
        handles (`self.workers.remote_workers()`). The evaluation workers still get it
        with `evaluation_workers`; the learners train it when the local worker has it
        (and it is to be trained). Returns None when `workers` leaves the local worker
        out (RLlib 1.13's `get_policy`). `remove_policy` then removes it where it is.

        The trainer remembers the policy: workers recreated after a failure
        (`recreate_failed_workers`) get it too (with `workers`, those of the indices
        it was added to), and checkpoints record its id, class, spaces and config so
        that `restore()` on a fresh trainer adds it again before loading its weights.
        """
        kwargs = {
            "policy_id": policy_id,
            "policy_cls": policy_cls,
            "observation_space": observation_space,
            "action_space": action_space,
            "config": config,
            "policy_state": policy_state,
            "policy_mapping_fn": policy_mapping_fn,
            "policies_to_train": policies_to_train,
        }
        indices: tuple[int, ...] | None = None
        if workers is None:
            call_on_workers(self, "add_policy", evaluation_workers, **kwargs)
        else:
            indices = call_on_given_workers(self, workers, "add_policy", **kwargs)
            if evaluation_workers and self.evaluation_workers is not None:
                call_on_workers_of(self.evaluation_workers, "add_policy", **kwargs)
            # A worker that lacked the policy while its weights were sent gets them anew.
            self.workers.forget_synced_weights(policy_id, indices)
        self._sync_learner_policies()
        obs_space, act_space = added_policy_spaces(
            self, policy_id, indices, observation_space, action_space
        )
        self._policy_ledger.record_added(
            policy_id,
            AddedPolicy(
                policy_cls, obs_space, act_space, dict(config or {}), evaluation_workers, indices
            ),
        )
        if indices is not None and 0 not in indices:
            return self.get_policy(policy_id)
        return acting.policy_or_key_error(self, policy_id)

    def remove_policy(
        self,
        policy_id: str = DEFAULT_POLICY_ID,
        *,
        policy_mapping_fn: Callable | None = None,
        policies_to_train: list[str] | Callable | None = None,
        evaluation_workers: bool = True,
    ) -> None:
        """Removes a policy from every rollout worker (and evaluation worker) and the
        learners; one added to some workers only (`add_policy(workers=...)`) from those
        that have it, the others getting the new mapping fn and policies to train."""
        added = self._policy_ledger.added.get(policy_id)
        if added is not None and added.worker_indices is not None:
            remove = functools.partial(
                remove_where_present, policy_id, policy_mapping_fn, policies_to_train
            )
            self.workers.foreach_worker(remove)
            if evaluation_workers and self.evaluation_workers is not None:
                self.evaluation_workers.foreach_worker(remove)
        else:
            call_on_workers(
                self,
                "remove_policy",
                evaluation_workers,
                policy_id=policy_id,
                policy_mapping_fn=policy_mapping_fn,
                policies_to_train=policies_to_train,
            )
        self.learner_group.remove_policy(policy_id)
        self._sync_learner_policies()
        self._policy_ledger.record_removed(policy_id)

    def set_policy_mapping_fn(
        self, policy_mapping_fn: Callable, *, evaluation_workers: bool = True
    ) -> None:
        """Sets the `policy_mapping_fn` of every rollout (and evaluation) worker; it
        applies to episodes started afterwards. A function cannot be stored in a
        checkpoint: after `restore()`, call this again if the config's mapping
        is not the one wanted."""
        call_on_workers(self, "set_policy_mapping_fn", evaluation_workers, policy_mapping_fn)

    def _replay_policy_changes(self, handle: Any) -> None:
        """Gives a freshly built remote worker the policy map of the local worker:
        the added policies (not in the config it was built from) without the
        removed ones, and the current mapping fn and policies to train."""
        replay = self._policy_ledger.replay_on(self.workers.local_worker())
        handle.apply(replay).result(WORKER_START_TIMEOUT_S)

    def _sync_learner_policies(self) -> None:
        """The learners train exactly the local worker's policies to train."""
        self.learner_group.set_policies_to_train(self._learned_policies())

    def _learned_policies(self) -> list[str]:
        """The local worker's policies to train, but those of one's own that learn by
        themselves (`learns_by_itself`): the learners train these."""
        local = self.workers.local_worker()
        return [
            pid
            for pid in local.policy_map
            if local.is_policy_to_train(pid) and not learns_by_itself(local.policy_map[pid])
        ]

    # -- export and import --------------------------------------------------

    def export_policy_model(
        self, export_dir: str, policy_id: str = DEFAULT_POLICY_ID, onnx: int | None = None
    ) -> None:
        """Writes policy `policy_id`'s model to `export_dir` for serving without corral.

        `model.pt` (TorchScript) plus its state dict, or with `onnx=<opset>`
        `model.onnx` (input `obs`, output `output`: action-distribution inputs).
        """
        acting.policy_or_key_error(self, policy_id).export_model(export_dir, onnx)

    def export_policy_checkpoint(
        self, export_dir: str, filename_prefix: str = "model", policy_id: str = DEFAULT_POLICY_ID
    ) -> None:
        """Writes policy `policy_id`'s state (weights as safetensors, the rest JSON)."""
        acting.policy_or_key_error(self, policy_id).export_checkpoint(export_dir, filename_prefix)

    def import_model(self, import_file: str) -> None:
        """Imports weights from `import_file` (HDF5 only, as in RLlib)."""
        if not os.path.exists(import_file):
            raise FileNotFoundError(
                f"`import_file` '{import_file}' does not exist! Can't import Model."
            )
        self.import_policy_model_from_h5(import_file)

    def import_policy_model_from_h5(
        self, import_file: str, policy_id: str = DEFAULT_POLICY_ID
    ) -> None:
        """Loads policy `policy_id`'s weights from an HDF5 file, then syncs them to
        the remote workers so that sampling uses them too."""
        acting.policy_or_key_error(self, policy_id).import_model_from_h5(import_file)
        self.workers.sync_weights()

    def _export_model(self, export_formats: list[str], export_dir: str) -> dict[str, str]:
        return trainer_checkpoints.export_model(self, export_formats, export_dir)

    # -- recovery -----------------------------------------------------------

    def try_recover_from_step_attempt(self, error: BaseException | None = None) -> None:
        """Health-checks every remote worker, rollout and evaluation ones; drops
        (or, with `recreate_failed_workers`, recreates) the failed ones.

        A worker has failed when it is dead, does not answer a ping within
        `worker_health_probe_timeout_s`, or is the one `error` (the
        `WorkerFailure` of the failed attempt) came from: a worker whose env
        raised, or that did not answer in time, still answers a ping, yet it
        is broken (its env is mid-step, or it is too slow). A dropped or
        replaced worker is SIGKILLed, so a hung one does not linger.

        A failed data-parallel learner (`LearnerFailure`) restarts the learner
        group instead: as many learners with `recreate_failed_workers`, one fewer
        with `ignore_worker_failures`.
        """
        recovery.recover(self, error)
        if self.train_exec_impl is not None:
            # The old plan holds the old worker list: rebuild it over the new one.
            logger.warning("Recreating execution plan after failure.")
            self.train_exec_impl = trainer_plan.build(self)

    # -- checkpoints --------------------------------------------------------

    def save_checkpoint(self, checkpoint_dir: str) -> str:
        """Writes weights (safetensors), optimiser state (tensors) and JSON state.

        Policies added with `add_policy` are recorded by id, class (dotted import
        path), spaces and config, removed ones by id, and the policies to train
        when they are a list (see `load_checkpoint`).

        Returns:
            the path of the folder's `checkpoint-<iteration>` file, which `save()`
            hands out as RLlib 1.13 did (code of RLlib 1.x reads the trial folder as
            that path's grandparent); the checkpoint is the whole folder.
        """
        trainer_checkpoints.save(self, checkpoint_dir)
        return trainer_checkpoints.write_rllib_marker(checkpoint_dir, self.iteration)

    # A trainer's checkpoint is a directory (`save_checkpoint` returns a file in it),
    # never a dict.
    def load_checkpoint(self, checkpoint_path: str) -> None:  # type: ignore[override]
        """Restores a checkpoint written by `save_checkpoint`.

        Policies the checkpoint's trainer had added at runtime are added first
        (those this trainer already has are kept as they are: add a policy
        yourself before restoring when its class or config could not be
        stored), removed ones are removed, and a stored list of policies to
        train is set. The `policy_mapping_fn` cannot be stored: the config's
        one stays in force; set another with `set_policy_mapping_fn`.
        """
        trainer_checkpoints.load(self, checkpoint_path)

    def _checkpoint_algorithm(self) -> str:
        return self._name

    def _checkpoint_config(self) -> dict:
        """The config a checkpoint saves, from which `from_checkpoint` builds the trainer
        again (default: `self.config`; a trainer whose setup derives parts of its config
        saves what it derives them from)."""
        return self.config

    @classmethod
    def from_checkpoint(
        cls,
        checkpoint_path: str,
        config_overrides: dict | None = None,
        *,
        logger_creator: Callable | None = None,
    ) -> Trainer:
        """A trainer of the saved algorithm with the saved config, restored from the checkpoint.

        Called on `Trainer` itself, the algorithm is the one the checkpoint
        names (built-in or registered with `register_trainable` in this
        process); called on a subclass, the checkpoint must be of that class.
        Config values that were code (functions, classes that are not imported
        in this process) and envs that are not registered names or Gymnasium
        ids cannot come back from a checkpoint: pass them in `config_overrides`,
        which is merged over the saved config (e.g. fewer workers, exploration
        off: `{"num_workers": 0, "explore": False}`).

        Args:
            checkpoint_path: a checkpoint directory written by `save`, or a path inside it.
            config_overrides: config keys to change (nested dicts are merged).
            logger_creator: as for the constructor.

        Raises:
            CheckpointError: the checkpoint is damaged, of another algorithm, or
                lacks config values that were not passed; the message says which.
        """
        return trainer_checkpoints.from_checkpoint(
            cls, checkpoint_path, config_overrides, logger_creator
        )

    def _extra_checkpoint_state(self) -> dict:
        """Algorithm state beyond weights and optimisers (e.g. a replay buffer).

        A nested dict of numpy arrays and JSON-able values, written as
        `extra_state.safetensors` + `extra_state.json`; empty: nothing written. (The
        base class saves the replay buffer it made for an execution plan, with
        `store_buffer_in_checkpoints`.)
        """
        return trainer_plan.replay_buffer_state(self)

    def _set_extra_checkpoint_state(self, state: dict) -> None:
        """Restores what `_extra_checkpoint_state` returned."""
        trainer_plan.set_replay_buffer_state(self, state)

    def __getstate__(self) -> dict:
        return trainer_checkpoints.get_state(self)

    def __setstate__(self, state: dict) -> None:
        trainer_checkpoints.set_state(self, state)
        trainer_plan.relink(self)

    # -- resources ----------------------------------------------------------

    @classmethod
    def default_resource_request(cls, config: dict) -> Any:
        """What a trial of this config needs, as placement-group bundles.

        One bundle for the driver (`num_cpus_for_driver`, `num_gpus`), one per rollout
        worker and per evaluation worker (`num_cpus_per_worker`, `num_gpus_per_worker`,
        `custom_resources_per_worker`) and one per data-parallel learner
        (`num_cpus_per_learner`, `num_gpus_per_learner`), with `placement_strategy`.

        Returns:
            A Ray Tune `PlacementGroupFactory` when Ray is installed (Ray Tune then
            reserves exactly this for each trial), else a `ResourceRequest` with the
            same `bundles`, `strategy` and `required_resources`.
        """
        from corral.tune.resources import resource_request

        bundles, strategy = resource_bundles(cls._default_config, config)
        return resource_request(bundles, strategy)

    @classmethod
    def resource_help(cls, config: dict) -> str:
        return (
            "\n\nYou can adjust the resource requests of corral trainers by setting "
            "`num_workers`, `num_gpus`, and other configs. See the DEFAULT_CONFIG defined "
            f"by each algorithm for more info.\n\nThe config of this trainer is: {config}"
        )

    # -- lifecycle ----------------------------------------------------------

    def cleanup(self) -> None:
        """Ends a `stream_to_learners` stream, stops every remote learner and worker
        process (rollout and evaluation)."""
        for name in ("_stream", "_learner_group", "workers", "evaluation_workers"):
            part = getattr(self, name, None)
            if part is not None:
                part.stop()

    @staticmethod
    def with_updates(**overrides: Any) -> type[Trainer]:
        raise NotImplementedError(
            "`with_updates` may only be called on Trainer sub-classes that were generated "
            "via the `corral.agents.trainer_template.build_trainer()` function!"
        )

    def __repr__(self) -> str:
        return self._name
